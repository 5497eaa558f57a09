// Quantized graphs on the CPU reference and the generated kernels (issue 34): the reference's
// quantization kernels against values worked out by hand, and MatMulNBits as a dequantize-in-GEMM
// kernel (GEMV-shaped at a few rows, tiled and on matrix units at more) on every device backend
// present (Vulkan on lavapipe in CI), checked against the reference from the same packed bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "gpusim/graph.h"
#include "gpusim/kernel_work.h"
#include "gpusim/scheduler.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

using namespace gpusim;

namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;
constexpr int kE4M3 = 17;  // TensorProto FLOAT8E4M3FN (Debian 12's onnx headers predate the float8 types)

Graph load(test::OnnxBuilder& b, const std::string& file) {
  auto g = import_onnx(b.write(file));
  INFO((g ? std::string() : g.error().message));
  REQUIRE(g);
  return std::move(*g);
}

cpu::HostTensor reals(DType t, Shape s, std::vector<double> v) {
  cpu::HostTensor h;
  h.dtype = t;
  h.shape = std::move(s);
  h.r = std::move(v);
  return h;
}

cpu::HostTensor ints(DType t, Shape s, std::vector<int64_t> v) {
  cpu::HostTensor h;
  h.dtype = t;
  h.shape = std::move(s);
  h.i = std::move(v);
  return h;
}

void matmul_nbits(test::OnnxBuilder& b, const std::vector<std::string>& in, int64_t k, int64_t n, int64_t bits,
                  int64_t block, const std::string& name = "mm", const std::string& out = "y") {
  b.node("MatMulNBits", in, {out}, name).i("K", k).i("N", n).i("bits", bits).i("block_size", block).proto()->set_domain(
      "com.microsoft");
  auto* op = b.model().add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
}

}  // namespace

TEST_CASE("the reference dequantizes MatMulNBits blocks as packed", "[cpu][quantized]") {
  // One row of B' (N = 1), K = 16 in one block of 4-bit values: byte 0 = 0x98 holds 8 (low
  // nibble, k = 0) and 9 (k = 1); the other bytes are 0. Zero point 8 (the default), scale 0.5:
  // B' = [0, 0.5, -4 x 14].
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{2}, int64_t{16}});
  b.input("w", kU8, {int64_t{1}, int64_t{1}, int64_t{8}});
  b.input("s", kF32, {int64_t{1}});
  matmul_nbits(b, {"x", "w", "s"}, 16, 1, 4, 16);
  b.output("y");
  const Graph g = load(b, "nbits_ref.onnx");
  std::vector<double> x(32, 0.0);
  x[1] = 1.0;                                   // row 0 picks k = 1
  for (int k = 16; k < 32; ++k) x[k] = 1.0;     // row 1 sums the row
  std::vector<int64_t> w(8, 0);
  w[0] = 0x98;
  auto r = cpu::run_reference(g, {reals(DType::kFloat32, {2, 16}, x), ints(DType::kUInt8, {1, 1, 8}, w),
                                  reals(DType::kFloat32, {1}, {0.5})});
  REQUIRE(r);
  REQUIRE(r->outputs[0].r.size() == 2);
  CHECK(r->outputs[0].r[0] == Approx(0.5));
  CHECK(r->outputs[0].r[1] == Approx(0.5 * (0 + 1 - 8 * 14)));

  // 8 bits with a packed zero point: q = 200, 100 over zero point 128, scale 2.
  test::OnnxBuilder b8;
  b8.input("x", kF32, {int64_t{1}, int64_t{16}});
  b8.input("w", kU8, {int64_t{1}, int64_t{1}, int64_t{16}});
  b8.input("s", kF32, {int64_t{1}});
  b8.input("z", kU8, {int64_t{1}});
  matmul_nbits(b8, {"x", "w", "s", "z"}, 16, 1, 8, 16);
  b8.output("y");
  const Graph g8 = load(b8, "nbits_ref8.onnx");
  std::vector<double> x8(16, 0.0);
  x8[0] = 1.0;
  x8[15] = -1.0;
  std::vector<int64_t> w8(16, 128);
  w8[0] = 200;
  w8[15] = 100;
  auto r8 = cpu::run_reference(g8, {reals(DType::kFloat32, {1, 16}, x8), ints(DType::kUInt8, {1, 1, 16}, w8),
                                    reals(DType::kFloat32, {1}, {2.0}), ints(DType::kUInt8, {1}, {128})});
  REQUIRE(r8);
  CHECK(r8->outputs[0].r[0] == Approx(2.0 * 72 - 2.0 * (100 - 128)));

  // 3 bits straddle bytes: refused, naming the node and the widths it unpacks.
  test::OnnxBuilder b3;
  b3.input("x", kF32, {int64_t{1}, int64_t{32}});
  b3.input("w", kU8, {int64_t{1}, int64_t{1}, int64_t{12}});
  b3.input("s", kF32, {int64_t{1}});
  matmul_nbits(b3, {"x", "w", "s"}, 32, 1, 3, 32, "odd");
  b3.output("y");
  const Graph g3 = load(b3, "nbits_ref3.onnx");
  auto r3 = cpu::run_reference(g3, {});
  REQUIRE_FALSE(r3);
  CHECK_THAT(r3.error().message, Catch::Contains("node \"odd\" (MatMulNBits): bits = 3: the reference unpacks 2, 4 or 8 "
                                                 "bits (whole values a byte)"));
}

TEST_CASE("the reference quantizes and dequantizes as ONNX says", "[cpu][quantized]") {
  SECTION("QuantizeLinear to uint8: half to even, then the zero point, saturated; DequantizeLinear back") {
    test::OnnxBuilder b(21);
    b.input("x", kF32, {int64_t{6}});
    b.input("s", kF32, {});
    b.input("z", kU8, {});
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "q");
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "dq");
    b.output("q");
    b.output("y");
    const Graph g = load(b, "qdq_ref.onnx");
    auto r = cpu::run_reference(g, {reals(DType::kFloat32, {6}, {-1.5, 0.4, 2.5, 300.0, 0.25, -100.0}),
                                    reals(DType::kFloat32, {}, {0.5}), ints(DType::kUInt8, {}, {10})});
    REQUIRE(r);
    CHECK(r->outputs[0].i == std::vector<int64_t>{7, 11, 15, 255, 10, 0});
    CHECK(r->outputs[1].r == std::vector<double>{-1.5, 0.5, 2.5, 122.5, 0.0, -5.0});
  }
  SECTION("per-axis int8 and blocked scales") {
    test::OnnxBuilder b(21);
    b.input("w", kI8, {int64_t{2}, int64_t{4}});
    b.input("s", kF32, {int64_t{2}});
    b.input("sb", kF32, {int64_t{2}, int64_t{2}});
    b.node("DequantizeLinear", {"w", "s"}, {"y"}, "axis0").i("axis", 0);
    b.node("DequantizeLinear", {"w", "sb"}, {"yb"}, "blocked").i("axis", 1).i("block_size", 2);
    b.output("y");
    b.output("yb");
    const Graph g = load(b, "dq_axis_ref.onnx");
    auto r = cpu::run_reference(g, {ints(DType::kInt8, {2, 4}, {1, -2, 3, -128, 4, 5, 6, 127}),
                                    reals(DType::kFloat32, {2}, {0.5, 2.0}),
                                    reals(DType::kFloat32, {2, 2}, {1.0, 10.0, 100.0, 1000.0})});
    REQUIRE(r);
    CHECK(r->outputs[0].r == std::vector<double>{0.5, -1.0, 1.5, -64.0, 8.0, 10.0, 12.0, 254.0});
    CHECK(r->outputs[1].r == std::vector<double>{1.0, -2.0, 30.0, -1280.0, 400.0, 500.0, 6000.0, 127000.0});
  }
  SECTION("QuantizeLinear to float8 e4m3: rounded to 3 mantissa bits, saturated at 448") {
    test::OnnxBuilder b(21);
    b.input("x", kF32, {int64_t{4}});
    b.input("s", kF32, {});
    b.node("QuantizeLinear", {"x", "s"}, {"q"}, "q8").i("output_dtype", kE4M3);
    b.output("q");
    const Graph g = load(b, "q_fp8_ref.onnx");
    auto r = cpu::run_reference(g, {reals(DType::kFloat32, {4}, {1.0, 1.1, 1000.0, -0.3}), reals(DType::kFloat32, {}, {1.0})});
    REQUIRE(r);
    CHECK(r->outputs[0].r == std::vector<double>{1.0, 1.125, 448.0, -0.3125});
  }
  SECTION("DynamicQuantizeLinear: the range with 0 over 255") {
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{3}});
    b.node("DynamicQuantizeLinear", {"x"}, {"y", "ys", "yz"}, "dq");
    b.output("y");
    b.output("ys");
    b.output("yz");
    const Graph g = load(b, "dynq_ref.onnx");
    auto r = cpu::run_reference(g, {reals(DType::kFloat32, {3}, {-1.0, 0.0, 1.55})});
    REQUIRE(r);
    CHECK(r->outputs[1].r[0] == Approx(2.55 / 255));
    CHECK(r->outputs[2].i[0] == 100);
    CHECK(r->outputs[0].i == std::vector<int64_t>{0, 100, 255});
  }
  // QLinearMatMul of a [rows, 2] uint8 matrix by a [2, 1] one, a_scale of `a_scales` values.
  auto qlinear_matmul = [](int64_t rows, int64_t a_scales, const char* file) {
    test::OnnxBuilder b;
    b.input("a", kU8, {rows, int64_t{2}});
    if (a_scales == 1) {
      b.input("as", kF32, {});
    } else {
      b.input("as", kF32, {a_scales});
    }
    b.input("az", kU8, {});
    b.input("b", kU8, {int64_t{2}, int64_t{1}});
    for (const auto& [name, type] : {std::pair{"bs", kF32}, {"bz", kU8}, {"ys", kF32}, {"yz", kU8}}) b.input(name, type, {});
    b.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"}, "qmm");
    b.output("y");
    return load(b, file);
  };
  SECTION("QLinearMatMul: integer products rescaled and requantized") {
    const Graph g = qlinear_matmul(1, 1, "qlmm_ref.onnx");
    // ((12 - 10) x (7 - 5) + (14 - 10) x (9 - 5)) x 0.5 x 0.25 / 0.1 + 3 = 20 x 1.25 + 3 = 28
    auto r = cpu::run_reference(g, {ints(DType::kUInt8, {1, 2}, {12, 14}), reals(DType::kFloat32, {}, {0.5}),
                                    ints(DType::kUInt8, {}, {10}), ints(DType::kUInt8, {2, 1}, {7, 9}),
                                    reals(DType::kFloat32, {}, {0.25}), ints(DType::kUInt8, {}, {5}),
                                    reals(DType::kFloat32, {}, {0.1}), ints(DType::kUInt8, {}, {3})});
    REQUIRE(r);
    CHECK(r->outputs[0].i == std::vector<int64_t>{28});
  }
  SECTION("QLinearMatMul: a scale neither one value nor one a row is refused, naming it") {
    const Graph g = qlinear_matmul(2, 3, "qlmm_bad.onnx");
    auto r = cpu::run_reference(g, {ints(DType::kUInt8, {2, 2}, {12, 14, 1, 2}), reals(DType::kFloat32, {3}, {0.5, 0.5, 0.5}),
                                    ints(DType::kUInt8, {}, {10}), ints(DType::kUInt8, {2, 1}, {7, 9}),
                                    reals(DType::kFloat32, {}, {0.25}), ints(DType::kUInt8, {}, {5}),
                                    reals(DType::kFloat32, {}, {0.1}), ints(DType::kUInt8, {}, {3})});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("node \"qmm\"") &&
                                      Catch::Contains("a_scale [3] is neither a scalar nor one value per row (2)"));
  }
  // QLinearConv of a [1, 1, 2, 2] uint8 image by two 1x1 int8 filters, scales and zero points per
  // output channel, an int32 bias of `bias` values.
  auto qlinear_conv = [](int64_t bias, const char* file) {
    test::OnnxBuilder b;
    b.input("x", kU8, {int64_t{1}, int64_t{1}, int64_t{2}, int64_t{2}});
    b.input("xs", kF32, {});
    b.input("xz", kU8, {});
    b.input("w", kI8, {int64_t{2}, int64_t{1}, int64_t{1}, int64_t{1}});
    b.input("ws", kF32, {int64_t{2}});
    b.input("wz", kI8, {int64_t{2}});
    b.input("ys", kF32, {});
    b.input("yz", kU8, {});
    b.input("bias", kI32, {bias});
    b.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"}, {"y"}, "qconv");
    b.output("y");
    return load(b, file);
  };
  auto qconv_inputs = [](std::vector<int64_t> bias) {
    const auto n = static_cast<int64_t>(bias.size());
    return std::vector<cpu::HostTensor>{ints(DType::kUInt8, {1, 1, 2, 2}, {10, 20, 30, 40}), reals(DType::kFloat32, {}, {0.5}),
                                        ints(DType::kUInt8, {}, {10}), ints(DType::kInt8, {2, 1, 1, 1}, {2, -3}),
                                        reals(DType::kFloat32, {2}, {0.25, 0.125}), ints(DType::kInt8, {2}, {0, 1}),
                                        reals(DType::kFloat32, {}, {0.25}), ints(DType::kUInt8, {}, {40}),
                                        ints(DType::kInt32, {n}, std::move(bias))};
  };
  SECTION("QLinearConv: integer sums plus the int32 bias, requantized per output channel") {
    const Graph g = qlinear_conv(2, "qlconv_ref.onnx");
    auto r = cpu::run_reference(g, qconv_inputs({5, -6}));
    REQUIRE(r);
    // Channel 0: (x - 10) x (2 - 0) + 5 = 5, 25, 45, 65, times 0.5 x 0.25 / 0.25 = 2.5, 12.5, 22.5,
    // 32.5, rounded half to even, + 40. Channel 1: (x - 10) x (-3 - 1) - 6 = -6, -46, -86, -126,
    // times 0.25 = -1.5, -11.5, -21.5, -31.5, rounded, + 40.
    CHECK(r->outputs[0].i == std::vector<int64_t>{42, 52, 62, 72, 38, 28, 18, 8});
  }
  SECTION("QLinearConv: a bias that is not one value per output channel is refused, naming it") {
    const Graph g = qlinear_conv(3, "qlconv_bad.onnx");
    auto r = cpu::run_reference(g, qconv_inputs({5, -6, 7}));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("node \"qconv\"") &&
                                      Catch::Contains("B [3] is not one int32 per output channel (2)"));
  }
}

namespace {

// A Llama MLP's gate as ONNX Runtime's 4- and 8-bit quantizers write it, at `rows` tokens: x
// [1, rows, K] by a packed N x K weight (blocks of 32: Q4_0 and Q8_0's arithmetic), then SiLU, so
// the fused plan puts an epilogue on the dequantizing GEMM. `zp`: packed uint8 zero points; `bias`.
Graph nbits_mlp(int64_t rows, int64_t bits, bool zp, bool bias) {
  constexpr int64_t K = 96, N = 40, kBlock = 32;
  const int64_t blocks = K / kBlock;
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, rows, K});
  b.initializer("w", kU8, {N, blocks, kBlock * bits / 8});
  b.initializer("s", kF32, {N * blocks});
  std::vector<std::string> in = {"x", "w", "s"};
  if (zp || bias) {
    in.push_back(zp ? "z" : "");
    if (zp) b.initializer("z", kU8, {N * ((blocks * bits + 7) / 8)});
  }
  if (bias) {
    in.push_back("");
    in.push_back("bias");
    b.initializer("bias", kF32, {N});
  }
  matmul_nbits(b, in, K, N, bits, kBlock, "gate", "h");
  b.node("Sigmoid", {"h"}, {"sg"}, "sig");
  b.node("Mul", {"h", "sg"}, {"y"}, "silu");
  b.output("y");
  return load(b, "nbits_mlp_" + std::to_string(rows) + "_" + std::to_string(bits) + (zp ? "z" : "") + (bias ? "b" : "") + ".onnx");
}

Plan fused_plan(const Graph& g) {
  const FusionSpace s(g, test::portable(test::gpu("nvidia-a100-80gb")));
  return s.build(Decision(s.candidates().size(), 1), SchedulerKind::kGreedy);
}

}  // namespace

TEST_CASE("generated dequantize-in-GEMM kernels match the reference on every device backend", "[quantized][conformance]") {
  std::random_device rd;
  for (auto& od : test::devices()) {
    backend::Backend& dev = *od.dev;
    for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{37}}) {     // GEMV-shaped, GEMV-shaped, tiled
      for (int64_t bits : {int64_t{4}, int64_t{8}}) {
        for (int variant = 0; variant < 2; ++variant) {                // plain; zero points and bias
          const Graph g0 = nbits_mlp(rows, bits, variant == 1, variant == 1);
          for (DType dt : {DType::kFloat32, DType::kFloat16}) {
            if (dt == DType::kFloat16 && !dev.info().fp16) continue;
            const Graph g = dt == DType::kFloat32 ? g0 : retype(g0, dt);
            std::vector<std::optional<codegen::MatrixPath>> paths = {std::nullopt};
            if (dt == DType::kFloat16) {
              const codegen::MatrixPath own = codegen::matrix_path_for(dev.info());
              paths = {codegen::MatrixPath::kNone, own == codegen::MatrixPath::kNone ? codegen::MatrixPath::kPortable : own};
            }
            for (const auto& mpath : paths) {
              for (bool fuse : {false, true}) {
                const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
                INFO(od.backend << " / rows " << rows << " / " << bits << " bits" << (variant ? " / zero points, bias" : "")
                                << " / " << dtype_name(dt) << (fuse ? " / fused" : " / eager")
                                << (mpath ? " / matrix path " + std::string(codegen::matrix_path_name(*mpath)) : "")
                                << " / seed " << seed);
                exec::RunOptions o;
                o.seed = seed;
                o.repeat = 1;
                o.poison = true;
                o.fp16_storage = dt == DType::kFloat16;
                o.matrix = mpath;
                const Plan plan = fuse ? fused_plan(g) : test::one_kernel_per_op(g);
                const test::PlanRun r = test::run_plan_against_reference(dev, g, plan, o);
                std::string notes;
                for (const auto& n : r.run.notes) notes += n + "\n";
                INFO(notes);
                for (const auto& k : r.run.kernels) CHECK(k.device);  // the quantized GEMM runs generated
                REQUIRE(r.errors.size() == 1);
                INFO("relative L2 " << r.errors[0]);
                CHECK(r.errors[0] <= (dt == DType::kFloat32 ? 1e-5 : 3e-3));
              }
            }
          }
        }
      }
    }
  }
}

// What a user runs: `gpusim run --check` of a quantized model from the CLI, on Vulkan (lavapipe in
// CI) where present; a QDQ graph on the CPU reference everywhere.
TEST_CASE("gpusim run --check passes for a quantized model on the CPU reference and Vulkan", "[quantized][cli]") {
  const std::string mlp = test::temp_dir() + "/nbits_mlp_5_4zb.onnx";
  (void)nbits_mlp(5, 4, true, true);  // writes it
  if (test::device("vulkan") != nullptr) {
    const test::Run r = test::run_gpusim("run " + mlp + " --backend vulkan --check");
    INFO(r.out);
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Catch::Contains("check    y: relative L2 error") && Catch::Contains("PASS"));
    CHECK_THAT(r.out, Catch::Contains("MatMulNBits") && Catch::Contains("of 8 or 4 bits: any value of their type"));
  }
  test::OnnxBuilder b(21);
  b.input("x", kF32, {int64_t{4}, int64_t{64}});
  b.initializer("wq", kI8, {64, 32});
  b.initializer("ws", kF32, {32});
  b.node("DequantizeLinear", {"wq", "ws"}, {"w"}, "dq_w").i("axis", 1);
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  b.output("y");
  const test::Run r = test::run_gpusim("run " + b.write("qdq_matmul.onnx") + " --backend cpu");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("DequantizeLinear") && Catch::Contains("output   y [4, 32]"));
}

namespace {

// A QDQ linear layer as ONNX Runtime's static quantizer writes it: the activation quantized and
// dequantized (uint8, per tensor), the weight int8 per output channel (axis 1 of [K, N]), a MatMul,
// a bias and ReLU.
Graph qdq_linear(int64_t rows) {
  constexpr int64_t K = 72, N = 48;
  test::OnnxBuilder b(21);
  b.input("x", kF32, {rows, K});
  b.initializer("xs", kF32, {});
  b.initializer("xz", kU8, {});
  b.initializer("wq", kI8, {K, N});
  b.initializer("ws", kF32, {N});
  b.initializer("wz", kI8, {N});
  b.initializer("bias", kF32, {N});
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "q_x");
  b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "dq_x");
  b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, "dq_w").i("axis", 1);
  b.node("MatMul", {"xd", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "add");
  b.node("Relu", {"hb"}, {"y"}, "relu");
  b.output("y");
  return load(b, "qdq_linear_" + std::to_string(rows) + ".onnx");
}

}  // namespace

TEST_CASE("QDQ int8 graphs run generated, the dequantize folded into the GEMM, and match the reference",
          "[quantized][conformance]") {
  std::random_device rd;
  for (int64_t rows : {int64_t{1}, int64_t{29}}) {
    const Graph g = qdq_linear(rows);
    const Plan plan = fused_plan(g);
    // The planner folds the weight's DequantizeLinear into the MatMul (dequantize-into-gemm); the
    // activation's, fed by QuantizeLinear, stays in the elementwise kernel before it.
    int folded = 0;
    for (const PlanKernel& k : plan.kernels) {
      for (const std::string& f : k.fusions) folded += f == "dequantize-into-gemm";
    }
    CHECK(folded == 1);
    // Priced as an 8-bit B: the MatMul kernel reads K x N bytes of weight, not 4 K x N.
    int gemms = 0;
    for (const PlanKernel& k : plan.kernels) {
      if (k.kind != KernelKind::kMainLoop) continue;
      ++gemms;
      const KernelWork w = plan_kernel_work(g, index_graph(g), k);
      CHECK(w.b_bits == 8);
      CHECK(w.dequant_ops > 0);
      CHECK(w.epilogue_bytes < 72 * 48);  // the int8 weight is the GEMM's operand, not an epilogue input
    }
    CHECK(gemms == 1);
    for (auto& od : test::devices()) {
      for (bool fuse : {false, true}) {
        const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
        INFO(od.backend << " / rows " << rows << (fuse ? " / fused" : " / eager") << " / seed " << seed);
        exec::RunOptions o;
        o.seed = seed;
        o.repeat = 1;
        o.poison = true;
        const test::PlanRun r = test::run_plan_against_reference(*od.dev, g, fuse ? plan : test::one_kernel_per_op(g), o);
        std::string notes;
        for (const auto& n : r.run.notes) notes += n + "\n";
        INFO(notes);
        for (const auto& k : r.run.kernels) CHECK(k.device);
        REQUIRE(r.errors.size() == 1);
        INFO("relative L2 " << r.errors[0]);
        CHECK(r.errors[0] <= 1e-5);
      }
    }
  }
}
