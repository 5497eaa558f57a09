// Every user-facing import error, pinned to its message: each names the file or node, the value,
// and the fix.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "gpusim/onnx_import.h"
#include "gpusim/op_catalog.h"
#include "support/onnx_builder.h"

using Catch::Matchers::Contains;
using gpusim::ErrorCode;
using gpusim::import_onnx;
using gpusim::test::OnnxBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

// A valid two-node model used as a base for corruption tests.
std::string small_model_bytes() {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{16}});
  b.initializer("w", kF32, {16, 16});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  std::string s;
  b.model().SerializeToString(&s);
  return s;
}

}  // namespace

TEST_CASE("a missing file is named with the fix", "[import][errors]") {
  auto g = import_onnx("/nonexistent/dir/model.onnx");
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kIo);
  CHECK_THAT(g.error().message,
             Contains("/nonexistent/dir/model.onnx: cannot open: No such file or directory (check the path)"));
}

TEST_CASE("a directory is not a model", "[import][errors]") {
  auto g = import_onnx(gpusim::test::temp_dir());
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("is a directory, not an .onnx file"));
}

TEST_CASE("an empty file is reported as empty", "[import][errors]") {
  auto g = import_onnx(gpusim::test::write_bytes("empty.onnx", ""));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kParse);
  CHECK_THAT(g.error().message, Contains("empty.onnx: the file is empty (0 bytes)"));
}

TEST_CASE("a file that is not a protobuf is rejected at byte 0", "[import][errors]") {
  SECTION("text") {
    auto g = import_onnx(gpusim::test::write_bytes("text.onnx", "<?xml version=\"1.0\"?><model/>"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == ErrorCode::kParse);
    CHECK_THAT(g.error().message, Contains("text.onnx: not an ONNX model: byte 0 starts wire type 4"));
    CHECK_THAT(g.error().message, Contains("an .onnx file is a binary protobuf ModelProto"));
  }
  SECTION("invalid wire type") {
    auto g = import_onnx(gpusim::test::write_bytes("junk.onnx", std::string("\x07\x01\x02", 3)));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("junk.onnx: not an ONNX model: byte 0 starts wire type 7"));
  }
  SECTION("a protobuf without a graph") {
    auto g = import_onnx(gpusim::test::write_bytes("nograph.onnx", std::string("\x08\x07", 2)));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("nograph.onnx: not an ONNX model: it parses as protobuf but has no graph"));
  }
}

TEST_CASE("a truncated file says where it ends", "[import][errors]") {
  const std::string full = small_model_bytes();
  auto g = import_onnx(gpusim::test::write_bytes("cut.onnx", full.substr(0, full.size() / 2)));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kParse);
  CHECK_THAT(g.error().message, Contains("cut.onnx: truncated:"));
  CHECK_THAT(g.error().message, Contains(fmt::format("the file ends at byte {}", full.size() / 2)));
  CHECK_THAT(g.error().message, Contains("the file is incomplete (re-download or re-export it)"));
}

TEST_CASE("all unknown ops are listed in one run", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{4}});
  b.node("Frobnicate", {"x"}, {"a"}, "frob_1");
  b.node("Relu", {"a"}, {"b"});
  b.node("Frobnicate", {"b"}, {"c"}, "frob_2");
  auto n = b.node("Fancy", {"c"}, {"d"}, "fancy_1");
  n.proto()->set_domain("com.example");
  b.output("d");
  auto g = import_onnx(b.write("unknown.onnx"));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(g.error().message, Contains("unknown.onnx: 2 unsupported op types (3 nodes): Frobnicate x2 (first: "
                                         "node \"frob_1\"), com.example:Fancy x1 (first: node \"fancy_1\")"));
  CHECK_THAT(g.error().message, Contains("`gpusim ops` lists what is supported"));
}

TEST_CASE("a cyclic graph names the nodes in the cycle", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{4}});
  b.node("Add", {"x", "q"}, {"p"}, "add_p");
  b.node("Relu", {"p"}, {"q"}, "relu_q");
  b.output("q");
  auto g = import_onnx(b.write("cycle.onnx"));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kInvalidModel);
  CHECK_THAT(g.error().message, Contains("cycle.onnx: the graph has a cycle: 2 of 2 nodes wait on each other, e.g. "
                                         "\"add_p\" (Add), \"relu_q\" (Relu)"));
}

TEST_CASE("an input no node produces is named", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{4}});
  b.node("Add", {"x", "ghost"}, {"y"}, "add_1");
  b.output("y");
  auto g = import_onnx(b.write("dangling.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("node \"add_1\" (Add): input \"ghost\" is not produced by any node and is "
                                         "not a graph input or initializer"));
}

TEST_CASE("symbolic dims must be resolved and and the message says how", "[import][errors]") {
  OnnxBuilder b;
  b.input("ids", onnx::TensorProto::INT64, {std::string("batch"), std::string("")});
  b.node("Identity", {"ids"}, {"y"});
  b.output("y");
  const std::string path = b.write("symbolic.onnx");

  auto g = import_onnx(path);
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kShape);
  CHECK_THAT(g.error().message, Contains("input \"ids\" dim 0 is symbolic (\"batch\") and has no value; set it with "
                                         "`dims batch=N`"));
  CHECK_THAT(g.error().message, Contains("input \"ids\" dim 1 has no size; set it with `dims ids:1=N`"));

  gpusim::ImportOptions opts;
  opts.dims = {{"batch", 2}, {"ids:1", 7}};
  auto ok = import_onnx(path, opts);
  REQUIRE(ok);
  CHECK(ok->tensor(ok->outputs[0]).shape == gpusim::Shape{2, 7});

  opts.dims["seq"] = 3;
  auto unused = import_onnx(path, opts);
  REQUIRE_FALSE(unused);
  CHECK_THAT(unused.error().message, Contains("`dims seq=3` matches no input dim; the model's symbolic dims are: batch"));
}

TEST_CASE("a --dim on a model whose inputs are all fixed: the size they lead with is noted, another is refused",
          "[import][errors]") {
  // The README's library snippet passes batch=1 to every model; ResNet-50's input is [1, 3, 224, 224].
  const std::string path = gpusim::test::source_dir() + "/models/resnet50.onnx";
  gpusim::ImportOptions opts;
  opts.dims = {{"batch", 1}};
  auto g = import_onnx(path, opts);
  REQUIRE(g);
  bool noted = false;
  for (const auto& n : g->notes) {
    noted = noted || n.find("`dims batch=1` changes nothing: the model's inputs have no symbolic dims and already lead "
                            "with 1") != std::string::npos;
  }
  CHECK(noted);
  // batch=32 would price batch 1 and say nothing: refused, with the axis form that changes it.
  opts.dims = {{"batch", 32}};
  auto refused = import_onnx(path, opts);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message,
             Contains("`dims batch=32` would change nothing: the model's inputs have no symbolic dims (every size is "
                      "fixed: input [1, 3, 224, 224]); to change a fixed size name its input's axis (`dims input:0=32`)"));
  opts.dims = {{"input:0", 32}};
  auto axis = import_onnx(path, opts);
  REQUIRE(axis);
  CHECK(axis->tensor(axis->inputs[0]).shape == gpusim::Shape{32, 3, 224, 224});
  // An axis the inputs do not have.
  opts.dims = {{"input:7", 32}};
  auto no_axis = import_onnx(path, opts);
  REQUIRE_FALSE(no_axis);
  CHECK_THAT(no_axis.error().message,
             Contains("`dims input:7=32` names no input axis; the inputs are input [1, 3, 224, 224]"));
  opts.dims = {{"image:0", 32}};
  no_axis = import_onnx(path, opts);
  REQUIRE_FALSE(no_axis);
  CHECK_THAT(no_axis.error().message, Contains("`dims image:0=32` names no input axis"));
}

TEST_CASE("dim overrides are parsed with a clear error", "[import][errors]") {
  auto ok = gpusim::parse_dim_override("batch=8");
  REQUIRE(ok);
  CHECK(ok->first == "batch");
  CHECK(ok->second == 8);
  auto bad = gpusim::parse_dim_override("batch");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Contains("`dims` \"batch\": no name before '='; expected NAME=VALUE"));
  auto neg = gpusim::parse_dim_override("batch=-1");
  REQUIRE_FALSE(neg);
  CHECK_THAT(neg.error().message, Contains("value \"-1\" is not a non-negative integer"));
}

TEST_CASE("negative dims are rejected with the tensor named", "[import][errors]") {
  SECTION("graph input") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{2}, int64_t{-3}});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    auto g = import_onnx(b.write("neg_input.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("neg_input.onnx: graph input \"x\" dim 1 is -3, negative"));
  }
  SECTION("initializer") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{2}});
    b.initializer("w", kF32, {-1, 2});
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y");
    auto g = import_onnx(b.write("neg_init.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("neg_init.onnx: initializer \"w\": dims [-1, 2] have a negative dim -1; dims must be >= 0"));
  }
}

TEST_CASE("dims whose product overflows 64 bits are rejected", "[import][errors]") {
  SECTION("initializer") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{2}});
    b.initializer("huge", kF32, {int64_t{1} << 40, int64_t{1} << 40});
    b.node("Add", {"x", "huge"}, {"y"});
    b.output("y");
    auto g = import_onnx(b.write("overflow.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("initializer \"huge\": dims [1099511627776, 1099511627776] have more than "
                                           "2^63 elements, over gpusim's limit of 2^40 (1099511627776) per tensor"));
  }
  SECTION("computed output") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1} << 40});
    b.initializer_i64("target", {2}, {int64_t{1} << 40, int64_t{1} << 40});
    b.node("Expand", {"x", "target"}, {"y"}, "expand_1");
    b.output("y");
    auto g = import_onnx(b.write("overflow_expand.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"expand_1\" (Expand): output 0: dims [1099511627776, "
                                           "1099511627776] have more than 2^63 elements"));
  }
  SECTION("a graph input over the per-tensor limit") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1} << 21, int64_t{1} << 20});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    auto g = import_onnx(b.write("too_big_input.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("too_big_input.onnx: graph input \"x\": dims [2097152, 1048576] have "
                                           "2199023255552 elements, over gpusim's limit of 2^40 (1099511627776) per "
                                           "tensor; give smaller `dims` values"));
  }
}

TEST_CASE("shape mismatches name the node and both shapes", "[import][errors]") {
  SECTION("conv channels") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
    b.initializer("w", kF32, {8, 4, 3, 3});
    b.node("Conv", {"x", "w"}, {"y"}, "conv_7");
    b.output("y");
    auto g = import_onnx(b.write("conv_mismatch.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message,
               Contains("conv_mismatch.onnx: node \"conv_7\" (Conv): input channels 3 != weight channels 4 x group 1"));
  }
  SECTION("conv kernel rank") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
    b.initializer("w", kF32, {8, 3, 3, 3});
    b.node("Conv", {"x", "w"}, {"y"}, "conv_7").ints("kernel_shape", {3, 3, 3});
    b.output("y");
    auto g = import_onnx(b.write("conv_rank.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"conv_7\" (Conv): kernel_shape has 3 dims, input has 2 spatial dims"));
  }
  SECTION("matmul inner dims") {
    OnnxBuilder b;
    b.input("a", kF32, {int64_t{2}, int64_t{3}});
    b.initializer("w", kF32, {4, 5});
    b.node("MatMul", {"a", "w"}, {"y"}, "mm");
    b.output("y");
    auto g = import_onnx(b.write("mm_mismatch.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"mm\" (MatMul): inner dims differ: A [2, 3] has K = 3, B [4, 5] has K = 4"));
  }
  SECTION("reshape element count") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{2}, int64_t{3}});
    b.initializer_i64("s", {2}, {4, 2});
    b.node("Reshape", {"x", "s"}, {"y"}, "rs");
    b.output("y");
    auto g = import_onnx(b.write("reshape_mismatch.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"rs\" (Reshape): cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)"));
  }
}

TEST_CASE("a shape that depends on run-time data is an error when the model declares none", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{6}});
  b.input("target", onnx::TensorProto::INT64, {int64_t{2}});
  b.node("Reshape", {"x", "target"}, {"y"}, "rs");
  b.output("y");
  auto g = import_onnx(b.write("runtime_shape.onnx"));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ErrorCode::kDataDependent);
  CHECK_THAT(g.error().message, Contains("node \"rs\" (Reshape): input 1 (shape, tensor \"target\") must be known "
                                         "before run time to fix the output shape"));
}

TEST_CASE("Loop is refused with the fix - If with a constant condition is inlined", "[import][errors]") {
  onnx::GraphProto body;
  body.set_name("body");
  SECTION("Loop") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{4}});
    b.initializer_i64("n", {}, {3});
    b.node("Loop", {"n", "", "x"}, {"y"}, "loop_1").graph("body", body);
    b.output("y");
    auto g = import_onnx(b.write("loop.onnx"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == ErrorCode::kUnsupported);
    CHECK_THAT(g.error().message, Contains("node \"loop_1\" (Loop): ops whose subgraph runs a run-time number of times "
                                           "(Loop, Scan) have no static cost; export the model with the loop unrolled"));
  }
  // Branches: then = Relu(x), else = Neg(x), both read x from the outer scope.
  auto branch = [](const std::string& op, const std::string& out) {
    onnx::GraphProto g;
    g.set_name(op);
    auto* n = g.add_node();
    n->set_op_type(op);
    n->add_input("x");
    n->add_output(out);
    g.add_output()->set_name(out);
    return g;
  };
  SECTION("If on a run-time condition") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{4}});
    b.input("c", onnx::TensorProto::BOOL, {});
    b.node("If", {"c"}, {"y"}, "if_1").graph("then_branch", branch("Relu", "t")).graph("else_branch", branch("Neg", "e"));
    b.output("y");
    auto g = import_onnx(b.write("if_runtime.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"if_1\" (If): the condition \"c\" is computed at run time"));
  }
  SECTION("If on a folded condition") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{4}});
    b.node("Shape", {"x"}, {"s"});
    b.initializer_i64("four", {1}, {4});
    b.node("Equal", {"s", "four"}, {"eq"});
    b.node("Squeeze", {"eq"}, {"c"}).ints("axes", {0});
    b.node("If", {"c"}, {"y"}, "if_1").graph("then_branch", branch("Relu", "t")).graph("else_branch", branch("Neg", "e"));
    b.output("y");
    b.model().mutable_opset_import(0)->set_version(11);
    auto g = import_onnx(b.write("if_folded.onnx"));
    REQUIRE(g);
    bool has_relu = false, has_neg = false;
    for (const auto& n : g->nodes) {
      has_relu = has_relu || n.op_type == "Relu";
      has_neg = has_neg || n.op_type == "Neg";
    }
    CHECK(has_relu);
    CHECK_FALSE(has_neg);
    CHECK(g->tensor(g->outputs[0]).shape == gpusim::Shape{4});
  }
}

TEST_CASE("weights are not needed: external data may be missing and embedded data is skipped", "[import]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{512}});
  auto* ext = b.graph().add_initializer();
  ext->set_name("w_ext");
  ext->set_data_type(kF32);
  ext->add_dims(512);
  ext->add_dims(512);
  ext->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = ext->add_external_data();
  loc->set_key("location");
  loc->set_value("weights_that_are_not_here.bin");
  auto* emb = b.graph().add_initializer();
  emb->set_name("w_emb");
  emb->set_data_type(kF32);
  emb->add_dims(512);
  emb->add_dims(512);
  emb->set_raw_data(std::string(512 * 512 * 4, '\x01'));
  b.node("MatMul", {"x", "w_ext"}, {"h"});
  b.node("MatMul", {"h", "w_emb"}, {"y"});
  b.output("y");
  auto g = import_onnx(b.write("weights.onnx"));
  REQUIRE(g);
  CHECK(g->tensor(g->outputs[0]).shape == gpusim::Shape{1, 512});
  const gpusim::Tensor& w = g->tensor(*g->find("w_emb"));
  CHECK(w.shape == gpusim::Shape{512, 512});
  CHECK_FALSE(w.value.has_value());
  bool skipped = false, external = false;
  for (const auto& note : g->notes) {
    skipped = skipped || note.find("weight data (1 tensors, 1048576 bytes) skipped") != std::string::npos;
    external = external || note.find("1 weights live in external data files") != std::string::npos;
  }
  CHECK(skipped);
  CHECK(external);
}

TEST_CASE("input element types are checked against the op's schema", "[import][errors]") {
  SECTION("a type the schema does not allow") {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::STRING, {int64_t{3}});
    b.node("Relu", {"x"}, {"y"}, "relu");
    b.output("y");
    auto g = import_onnx(b.write("string_relu.onnx"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == ErrorCode::kInvalidModel);
    CHECK_THAT(g.error().message, Contains("string_relu.onnx: node \"relu\" (Relu): input 0 (\"x\") is string, which "
                                           "Relu at opset 17 does not take for T; X takes "));
    CHECK_THAT(g.error().message, Contains("float, float16"));
    CHECK_THAT(g.error().message, Contains("insert a Cast or re-export the model"));
  }
  SECTION("inputs that share a type parameter disagree") {
    OnnxBuilder b;
    b.input("a", kF32, {int64_t{4}});
    b.input("b", onnx::TensorProto::INT64, {int64_t{4}});
    b.node("Add", {"a", "b"}, {"y"}, "add");
    b.output("y");
    auto g = import_onnx(b.write("mixed_add.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("mixed_add.onnx: node \"add\" (Add): inputs 0 and 1 share the type T in Add's "
                                           "schema but are float and int64; insert a Cast or re-export the model"));
  }
  SECTION("types the schema allows pass, and a type constraint names its own parameter") {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{2}, int64_t{3}});
    b.initializer_i64("s", {2}, {3, 2});
    b.node("Reshape", {"x", "s"}, {"y"}, "rs");  // T for data, int64 for shape
    b.output("y");
    REQUIRE(import_onnx(b.write("reshape_types_ok.onnx")));
  }
}

TEST_CASE("an axis outside the input rank names the node with the value and the range", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{2}, int64_t{3}});
  b.initializer_i64("axes", {1}, {-9});
  b.node("Unsqueeze", {"x", "axes"}, {"y"}, "unsq");
  b.output("y");
  auto g = import_onnx(b.write("unsqueeze_axis.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message,
             Contains("unsqueeze_axis.onnx: node \"unsq\" (Unsqueeze): axes = -9 is out of range [-3, 3) for a rank-3 input"));
}

TEST_CASE("a DepthToSpace or SpaceToDepth blocksize whose square overflows is refused, not a SIGFPE", "[import][errors]") {
  for (const char* op : {"DepthToSpace", "SpaceToDepth"}) {
    INFO(op);
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{16}, int64_t{2}, int64_t{2}});
    b.node(op, {"x"}, {"y"}, "d").i("blocksize", int64_t{1} << 62);
    b.output("y");
    auto g = import_onnx(b.write(std::string(op) + "_huge_block.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"d\" (" + std::string(op) + ")") &&
                                      Contains("blocksize = 4611686018427387904: its square overflows 64 bits"));
  }
}

TEST_CASE("a Conv group or an LRN size near 2^62 does not overflow: refused, or counted within range", "[import][errors]") {
  {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{8}});
    b.input("w", kF32, {int64_t{4}, int64_t{4}, int64_t{3}, int64_t{3}});
    b.node("Conv", {"x", "w"}, {"y"}, "c").i("group", int64_t{1} << 62);
    b.output("y");
    auto g = import_onnx(b.write("conv_huge_group.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"c\" (Conv): input channels 4 != weight channels 4 x group 4611686018427387904"));
  }
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{8}});
  b.node("LRN", {"x"}, {"y"}, "l").i("size", int64_t{1} << 62);
  b.output("y");
  auto g = import_onnx(b.write("lrn_huge_size.onnx"));
  REQUIRE(g);
  const gpusim::OpCost c = gpusim::op_cost(*g, g->nodes.back());
  CHECK(c.flops.fma > 0);
  CHECK(c.flops.fma <= (2 * (int64_t{1} << 20) + 2) * 256);
}

TEST_CASE("a declared dim of -2^63 is no shape: an Expand that needs it fails naming why", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{4}});
  b.input("shape", 7 /* int64 */, {int64_t{2}});
  b.node("Expand", {"x", "shape"}, {"y"}, "e");
  b.output("y");
  auto* t = b.graph().mutable_output(0)->mutable_type()->mutable_tensor_type();
  t->set_elem_type(kF32);
  t->mutable_shape()->add_dim()->set_dim_value(std::numeric_limits<int64_t>::min());
  t->mutable_shape()->add_dim()->set_dim_value(4);
  auto g = import_onnx(b.write("expand_negative_declared.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("node \"e\" (Expand): input 1 (shape, tensor \"shape\") must be known before run time"));
  CHECK_THAT(g.error().message, !Contains("-9223372036854775808"));
}

TEST_CASE("Resize scales that are not positive finite numbers are refused naming the value", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
  *b.graph().add_initializer() = gpusim::test::f32_tensor({4}, {std::nanf(""), -0.0f, 9.2e18f, 1e10f});
  b.graph().mutable_initializer(0)->set_name("scales");
  b.node("Resize", {"x", "", "scales"}, {"y"}, "r");
  b.output("y");
  auto g = import_onnx(b.write("resize_nan_scales.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message,
             Contains("node \"r\" (Resize): scales[0] = nan is not a positive finite number; give scales > 0 (or sizes)"));
}

TEST_CASE("a Resize to a dim past 2^40 in a tensor of no elements is refused, not sized near 2^63", "[import][errors]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{0}, int64_t{3}, int64_t{8}, int64_t{8}});
  *b.graph().add_initializer() = gpusim::test::f32_tensor({4}, {1.0f, 1.0f, 9.2e18f, 1.0f});
  b.graph().mutable_initializer(0)->set_name("scales");
  b.node("Resize", {"x", "", "scales"}, {"y"}, "r");
  b.output("y");
  auto g = import_onnx(b.write("resize_huge_dim.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("over gpusim's limit of 2^40"));
}

TEST_CASE("constant folding of a Cast past int64's range saturates (no undefined behaviour)", "[import]") {
  OnnxBuilder b;
  *b.graph().add_initializer() = gpusim::test::f32_tensor({3}, {9.2e18f * 4, -std::numeric_limits<float>::infinity(), std::nanf("")});
  b.graph().mutable_initializer(0)->set_name("c");
  b.node("Cast", {"c"}, {"y"}, "cast").i("to", 7);
  b.output("y");
  auto g = import_onnx(b.write("cast_overflow.onnx"));
  REQUIRE(g);
  const auto& v = g->tensor(g->outputs.front()).value;
  REQUIRE(v);
  CHECK(v->ints == std::vector<int64_t>{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 0});
}

TEST_CASE("an op given fewer or more inputs than its schema allows is refused at import", "[import][errors]") {
  {
    // ScatterND does not exist at opset 9: no schema of that opset to verify it, so the newest
    // one's count applies (this model imported, then crashed the CPU reference).
    OnnxBuilder b(9);
    b.input("x", kF32, {int64_t{4}, int64_t{4}});
    b.node("ScatterND", {"x"}, {"y"}, "s");
    b.output("y");
    auto g = import_onnx(b.write("scatternd_one_input.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"s\" (ScatterND): 1 input, but ScatterND takes 3 (opset ") &&
                                      Contains("the model's opset 9 has no ScatterND); fix the exporter or the model"));
  }
  {
    OnnxBuilder b(9);
    b.input("x", kF32, {int64_t{4}, int64_t{4}});
    b.input("u", kF32, {int64_t{4}});
    b.node("ScatterND", {"x", "", "u"}, {"y"}, "s");
    b.output("y");
    auto g = import_onnx(b.write("scatternd_empty_required.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"s\" (ScatterND): input 1 (indices) is required but given as \"\""));
  }
  {
    // Where the model's opset has the op, ONNX's own schema check names the count.
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{4}, int64_t{4}});
    b.node("ScatterND", {"x"}, {"y"}, "s");
    b.output("y");
    auto g = import_onnx(b.write("scatternd_one_input_17.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Contains("node \"s\" (ScatterND): Node (s) has input size 1 not in range [min=3, max=3]"));
  }
}

TEST_CASE("ConvTranspose strides, pads and output_padding near 2^62 are refused, not overflowed", "[import][errors]") {
  auto build = [](const std::string& file, auto&& attrs) {
    OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{8}});
    b.input("w", kF32, {int64_t{4}, int64_t{4}, int64_t{3}, int64_t{3}});
    auto n = b.node("ConvTranspose", {"x", "w"}, {"y"}, "ct");
    attrs(n);
    b.output("y");
    return import_onnx(b.write(file));
  };
  auto g = build("convt_huge_stride.onnx", [](auto& n) { n.ints("strides", {int64_t{1} << 62, 1}); });
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("node \"ct\" (ConvTranspose): spatial dim 0: stride 4611686018427387904") &&
                                    Contains("overflow 64 bits"));
  g = build("convt_short_output_padding.onnx", [](auto& n) { n.ints("output_padding", {int64_t{1}}); });
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("output_padding has 1 values, expected 2"));
  g = build("convt_short_output_shape.onnx", [](auto& n) { n.ints("output_shape", {int64_t{16}}); });
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Contains("output_shape has 1 values, expected at least 2"));
}
