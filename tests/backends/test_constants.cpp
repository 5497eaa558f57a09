// Constant values a model needs to run (issue 16, points 1 and 2): the reader keeps a Constant's
// data (position ids, a causal mask) that it strips from a weight of the same size, reads small
// external tensors from the file beside the model, and says which file is missing when it is not
// there. The bundled BERT and GPT-2 carry theirs.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpusim/onnx_import.h"
#include "reference.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {

const Node* node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

// Runs the Constant node `name` on the host and returns its output.
cpu::HostTensor run_constant(const Graph& g, const std::string& name) {
  auto st = cpu::initial_state(g, {}, {});
  REQUIRE(st);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (g.nodes[ni].name != name) continue;
    auto s = cpu::run_node(g, ni, *st, {});
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);
    return st->vals[static_cast<size_t>(g.nodes[ni].outputs[0])];
  }
  FAIL("no node " << name);
  return {};
}

// Marks `t` as stored in `location` at `offset`, as onnx.save(save_as_external_data=True) writes.
void make_external(onnx::TensorProto& t, const std::string& location, int64_t offset, int64_t length) {
  t.clear_int64_data();
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location},
                             {"offset", std::to_string(offset)},
                             {"length", std::to_string(length)}}) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
}

std::string i64_bytes(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

// x [2, 6] reshaped by an external int64 initializer `shape` = {3, 4} stored at byte 8 of `bin`.
std::string reshape_model(const std::string& file, const std::string& bin) {
  test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 6});
  onnx::TensorProto shape = test::i64_tensor({2}, {3, 4});
  shape.set_name("shape");
  make_external(shape, bin, 8, 16);
  *b.graph().add_initializer() = shape;
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  b.output("y");
  return b.write(file);
}

}  // namespace

TEST_CASE("the bundled BERT and GPT-2 carry the Constant values they run with", "[models][cpu]") {
  const fs::path dir = fs::path(test::source_dir()) / "models";
  ImportOptions opts;
  opts.dims["batch"] = 1;
  {
    auto g = import_onnx((dir / "bert_base_seq128.onnx").string(), opts);
    REQUIRE(g);
    // BertEmbeddings.position_ids: arange(512) as [1, 512]; token_type_ids: zeros.
    const cpu::HostTensor pos = run_constant(*g, "Constant_157");
    const cpu::HostTensor types = run_constant(*g, "Constant_127");
    REQUIRE(pos.elements() == 512);
    REQUIRE(types.elements() == 512);
    int64_t wrong = 0;
    for (int64_t k = 0; k < 512; ++k) wrong += pos.integer(k) != k || types.integer(k) != 0;
    CHECK(wrong == 0);
  }
  {
    auto g = import_onnx((dir / "gpt2_prefill_seq512.onnx").string(), opts);
    REQUIRE(g);
    // GPT2Attention.bias: the causal mask, tril(ones(1024, 1024)) as bool [1, 1, 1024, 1024].
    const cpu::HostTensor mask = run_constant(*g, "Constant_223");
    REQUIRE(mask.elements() == 1024 * 1024);
    int64_t wrong = 0;
    for (int64_t i = 0; i < 1024; ++i) {
      for (int64_t j = 0; j < 1024; ++j) wrong += mask.integer(i * 1024 + j) != (j <= i ? 1 : 0);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("the reader keeps a Constant's data and drops a weight's of the same size", "[import][cpu]") {
  std::vector<int64_t> vals(2000);
  for (size_t k = 0; k < vals.size(); ++k) vals[k] = static_cast<int64_t>(k) * 3 - 7;
  test::OnnxBuilder b(17);
  b.initializer_i64("w", {2000}, vals);
  b.node("Constant", {}, {"c"}, "const").tensor("value", test::i64_tensor({2000}, vals));
  b.node("Add", {"c", "w"}, {"y"}, "add");
  b.output("y");
  auto g = import_onnx(b.write("keep_constant.onnx"));
  REQUIRE(g);
  const Node* c = node_named(*g, "const");
  REQUIRE(c);
  const Attribute& a = c->attributes.at("value");
  REQUIRE(a.tensor);
  CHECK(a.tensor->ints == vals);
  CHECK(a.tensor_absent.empty());
  for (const Tensor& t : g->tensors) {
    if (t.name == "w") CHECK_FALSE(t.value);  // 16 kB of weight: skipped, as every weight
  }
  const cpu::HostTensor out = run_constant(*g, "const");
  CHECK(out.integer(1999) == 1999 * 3 - 7);
}

TEST_CASE("Constants past the kept total have no values and the run names why and the fix", "[import][cpu]") {
  // Three 4 Mi-element int8 Constants: the first two fill kMaxConstAttrTotalElements.
  static_assert(3 * kMaxConstAttrElements > kMaxConstAttrTotalElements);
  test::OnnxBuilder b(17);
  for (int k = 0; k < 3; ++k) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT8);
    t.add_dims(kMaxConstAttrElements);
    t.set_raw_data(std::string(static_cast<size_t>(kMaxConstAttrElements), static_cast<char>(k + 1)));
    b.node("Constant", {}, {fmt::format("c{}", k)}, fmt::format("const{}", k)).tensor("value", t);
  }
  b.node("Add", {"c0", "c1"}, {"s"}, "add0");
  b.node("Add", {"s", "c2"}, {"y"}, "add1");
  b.output("y");
  auto g = import_onnx(b.write("constant_budget.onnx"));
  REQUIRE(g);
  CHECK(node_named(*g, "const1")->attributes.at("value").tensor);
  const Attribute& third = node_named(*g, "const2")->attributes.at("value");
  CHECK_FALSE(third.tensor);
  CHECK_THAT(third.tensor_absent, Catch::Contains("more than gpusim keeps of a Constant"));
  auto r = cpu::run_reference(*g, {});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("const2") && Catch::Contains("more than gpusim keeps") &&
                                    Catch::Contains("re-export the model keeping its Constant values"));
}

TEST_CASE("small external tensors are read from the file beside the model and a missing file is named", "[import]") {
  const std::string bin = "reshape_shape.bin";
  const std::string model = reshape_model("reshape_external.onnx", bin);
  SECTION("present: the shape is read and the output has it") {
    test::write_bytes(bin, std::string(8, '\x7f') + i64_bytes({3, 4}));
    auto g = import_onnx(model);
    INFO((g ? std::string() : g.error().message));
    REQUIRE(g);
    CHECK(g->tensor(g->outputs[0]).shape == Shape{3, 4});
  }
  SECTION("missing: the error names the file and the initializer") {
    std::remove((test::temp_dir() + "/" + bin).c_str());
    auto g = import_onnx(model);
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Catch::Contains("initializer \"shape\"") &&
                                      Catch::Contains(fmt::format("external data file \"{}/{}\" not found",
                                                                  test::temp_dir(), bin)) &&
                                      Catch::Contains("put it beside the model"));
    CHECK_THAT(g.error().message, !Catch::Contains("computed from run-time data"));
  }
  SECTION("truncated: the error says the file ends before the tensor") {
    test::write_bytes(bin, std::string(12, '\0'));
    auto g = import_onnx(model);
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Catch::Contains("ends before bytes 8..24"));
  }
  SECTION("sent as bytes: no file can come with it, and the error says so") {
    auto g = import_onnx_bytes(test::file_bytes(model), "upload.onnx");
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Catch::Contains("which a model sent as bytes cannot bring"));
  }
}

TEST_CASE("an external location outside the model's directory is not read", "[import]") {
  const std::string model = reshape_model("reshape_escape.onnx", "../outside.bin");
  auto g = import_onnx(model);
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Catch::Contains("\"../outside.bin\" is outside the model's directory"));
}

TEST_CASE("an external data file that is a link out of the model's folder, or a FIFO, is not read", "[import][security]") {
  // A secret outside the model's folder, and a link to it beside the model under the location's name.
  const std::filesystem::path outside = std::filesystem::temp_directory_path() / fmt::format("gpusim-escape-{}", ::getpid());
  std::filesystem::create_directories(outside);
  {
    std::ofstream secret(outside / "secret.bin", std::ios::binary);
    secret << std::string(8, '\x7f') << i64_bytes({3, 4});
  }
  const std::string link = test::temp_dir() + "/escape_link.bin";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(outside / "secret.bin", link);
  auto g = import_onnx(reshape_model("reshape_link.onnx", "escape_link.bin"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Catch::Contains("escape_link.bin\" is a link to a file outside the model's directory"));
  // A link that stays in the folder is read.
  test::write_bytes("inside.bin", std::string(8, '\x7f') + i64_bytes({3, 4}));
  const std::string inner = test::temp_dir() + "/inside_link.bin";
  std::filesystem::remove(inner);
  std::filesystem::create_symlink("inside.bin", inner);
  auto in = import_onnx(reshape_model("reshape_inner_link.onnx", "inside_link.bin"));
  INFO((in ? std::string() : in.error().message));
  REQUIRE(in);
  CHECK(in->tensor(in->outputs[0]).shape == Shape{3, 4});
  // A FIFO under the location's name: refused at once, not waited on.
  const std::string fifo = test::temp_dir() + "/fifo.bin";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto f = import_onnx(reshape_model("reshape_fifo.onnx", "fifo.bin"));
  REQUIRE_FALSE(f);
  CHECK_THAT(f.error().message, Catch::Contains("is a FIFO (named pipe), not a regular file"));
  std::filesystem::remove(fifo);
  std::filesystem::remove(link);
  std::filesystem::remove_all(outside);
}

TEST_CASE("a Constant whose external data file is missing: the run names the file and the fix", "[import][cpu]") {
  test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::INT64, {100});
  onnx::TensorProto t = test::i64_tensor({100}, std::vector<int64_t>(100, 1));
  make_external(t, "gone_constant.bin", 0, 800);
  b.node("Constant", {}, {"c"}, "const").tensor("value", t);
  b.node("Add", {"x", "c"}, {"y"}, "add");
  b.output("y");
  auto g = import_onnx(b.write("constant_external_missing.onnx"));
  REQUIRE(g);  // its shape is all predict needs
  auto r = cpu::run_reference(*g, {});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("node \"const\"") && Catch::Contains("gone_constant.bin\" not found") &&
                                    Catch::Contains("put its external data file beside it"));
}
