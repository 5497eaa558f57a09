// The GEMM (MatMul, Gemm, Einsum), convolution and attention generators: kernels' CUDA text
// compiles with NVRTC and their GLSL with the Vulkan backend's compiler, and — on every device
// backend present (lavapipe in CI) — computes what the CPU reference computes, for awkward shapes (1, primes, non-multiples of the
// tile, tile multiples), with every written buffer pre-filled with NaN so a missed element shows.
// Device and compiler checks skip with a WARN where the backend or NVRTC is absent.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>
#include <random>

#include "codegen.h"
#include "executor.h"
#include "gemm_tile.h"
#include "gpusim/onnx_import.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#ifdef GPUSIM_HAVE_HIP
#include "hip/hiprtc_compiler.h"
#endif

using namespace gpusim;
using Catch::Matchers::Contains;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

using test::build_graph;
using test::Compile;
using test::plan_kernel;

// Random inputs (seed 7); each element within 1e-3 + 1e-3 * |reference| (long sums, summed in
// another order than the reference's).
test::KernelCheck gemm_check() {
  test::KernelCheck c;
  c.abs_tol = 1e-3;
  c.rel_tol = 1e-3;
  return c;
}

// Compiles where `what` asks, runs on every device backend present (lavapipe in CI; CUDA/HIP on
// GPUs) against the CPU reference.
void check(const Graph& g, const PlanKernel& pk, Compile what = Compile::kVulkanOnly) {
  test::check_kernel(g, pk, what, gemm_check());
}

// y = MatMul(a [.., M, K], b [.., K, N]) (+ bias, Relu when `epilogue`).
Graph matmul_graph(const std::vector<int64_t>& as, const std::vector<int64_t>& bs, bool epilogue, int64_t n_bias = 0) {
  test::OnnxBuilder b;
  std::vector<test::Dim> ad(as.begin(), as.end()), bd(bs.begin(), bs.end());
  b.input("a", kF32, ad);
  b.input("b", kF32, bd);
  if (epilogue) {
    b.input("bias", kF32, {n_bias});
    b.node("MatMul", {"a", "b"}, {"h"}, "mm");
    b.node("Add", {"h", "bias"}, {"hb"}, "add");
    b.node("Relu", {"hb"}, {"y"}, "relu");
  } else {
    b.node("MatMul", {"a", "b"}, {"y"}, "mm");
  }
  b.output("y");
  return build_graph(b, "mm.onnx");
}

}  // namespace

TEST_CASE("MatMul kernels match the reference for awkward shapes and tiles", "[codegen]") {
  struct Dims {
    int64_t m, n, k;
  };
  const TileConfig deflt{};
  const TileConfig big{128, 64, 8, 256, 2, 1, 1, 1};
  const TileConfig small{32, 32, 16, 64, 1, 1, 1, 1};
  const TileConfig odd{48, 40, 12, 100, 3, 4, 4, 1};  // rounded to powers of two; K split 2 ways (2 k-steps)
  const TileConfig huge{256, 128, 32, 256, 3, 1, 1, 1};  // 128 outputs a thread: more threads
  struct Case {
    Dims d;
    TileConfig tile;
    Compile compile;
  };
  const std::vector<Case> cases = {
      {{1, 1, 1}, deflt, Compile::kCudaAndFp16}, {{7, 13, 61}, big, Compile::kCuda},
      {{61, 127, 7}, small, Compile::kVulkanOnly}, {{64, 64, 64}, deflt, Compile::kVulkanOnly},
      {{127, 61, 13}, odd, Compile::kCuda},       {{13, 7, 1}, big, Compile::kVulkanOnly},
      {{1, 127, 61}, small, Compile::kVulkanOnly}, {{128, 64, 32}, big, Compile::kVulkanOnly},
      {{127, 128, 33}, huge, Compile::kCuda},
  };
  for (const auto& [d, tile, compile] : cases) {
    INFO("M " << d.m << " N " << d.n << " K " << d.k << " tile " << tile.block_m << "x" << tile.block_n << "x"
              << tile.block_k << " stages " << tile.stages);
    const Graph g = matmul_graph({d.m, d.k}, {d.k, d.n}, false);
    check(g, plan_kernel(g, {"mm"}, "mm", tile), compile);
  }
}

TEST_CASE("MatMul with a fused bias and Relu epilogue", "[codegen]") {
  const Graph g = matmul_graph({61, 13}, {13, 7}, true, 7);
  check(g, plan_kernel(g, {"mm", "add", "relu"}, "mm", {64, 64, 16, 256, 2, 1, 1, 1}, {"gemm-epilogue"}),
        Compile::kCudaAndFp16);
}

TEST_CASE("MatMul batching broadcasts and 1-D operands", "[codegen]") {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 7, 13}, {13, 5}},     // B shared across the batch
      {{1, 7, 13}, {3, 13, 5}},     // A broadcast
      {{2, 1, 7, 13}, {3, 13, 1}},  // both broadcast, N = 1
      {{13}, {2, 13, 7}},           // 1-D A
      {{2, 7, 13}, {13}},           // 1-D B
      {{61}, {61}},                 // dot product
  };
  for (const auto& [as, bs] : cases) {
    INFO(shape_str(as) << " x " << shape_str(bs));
    const Graph g = matmul_graph(as, bs, false);
    check(g, plan_kernel(g, {"mm"}, "mm", {32, 32, 8, 64, 2, 1, 1, 1}), as.size() == 1 ? Compile::kCuda : Compile::kVulkanOnly);
  }
}

TEST_CASE("Gemm with transposes alpha beta and broadcast C", "[codegen]") {
  struct G {
    int ta, tb;
    float alpha, beta;
    std::vector<int64_t> c;
  };
  const int64_t M = 13, N = 61, K = 7;
  for (const G& c : {G{0, 0, 1.0f, 1.0f, {N}}, G{1, 0, 0.5f, 2.0f, {M, 1}}, G{0, 1, 1.0f, -1.0f, {}},
                     G{1, 1, 2.0f, 0.5f, {M, N}}, G{0, 1, 1.0f, 1.0f, {1, N}}}) {
    INFO("transA " << c.ta << " transB " << c.tb << " C " << shape_str(c.c));
    test::OnnxBuilder b;
    b.input("a", kF32, c.ta ? std::vector<test::Dim>{K, M} : std::vector<test::Dim>{M, K});
    b.input("b", kF32, c.tb ? std::vector<test::Dim>{N, K} : std::vector<test::Dim>{K, N});
    b.input("c", kF32, std::vector<test::Dim>(c.c.begin(), c.c.end()));
    b.node("Gemm", {"a", "b", "c"}, {"y"}, "gemm").i("transA", c.ta).i("transB", c.tb).f("alpha", c.alpha).f("beta", c.beta);
    b.output("y");
    const Graph g = build_graph(b, "gemm.onnx");
    check(g, plan_kernel(g, {"gemm"}, "gemm", {64, 32, 8, 128, 1, 1, 1, 1}),
          c.ta && c.tb ? Compile::kCudaAndFp16 : Compile::kVulkanOnly);
  }
}

namespace {

// y = MatMul(Transpose(x [13, 7]), w [13, 5]); the transposed xt is a graph output too when `xt_out`.
Graph transpose_matmul_graph(bool xt_out) {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{13}, int64_t{7}});
  b.input("w", kF32, {int64_t{13}, int64_t{5}});
  b.node("Transpose", {"x"}, {"xt"}, "tr").ints("perm", {1, 0});
  b.node("MatMul", {"xt", "w"}, {"y"}, "mm");
  b.output("y");
  if (xt_out) b.output("xt");
  return build_graph(b, xt_out ? "tr_mm_out.onnx" : "tr_mm.onnx");
}

}  // namespace

TEST_CASE("a Transpose fused into a MatMul is read through strides", "[codegen]") {
  SECTION("2-D") {
    const Graph g = transpose_matmul_graph(false);
    check(g, plan_kernel(g, {"tr", "mm"}, "mm", {}, {"transpose-into-gemm"}), Compile::kCuda);
  }
  SECTION("batched, into B") {
    test::OnnxBuilder b;
    b.input("a", kF32, {int64_t{2}, int64_t{7}, int64_t{13}});
    b.input("x", kF32, {int64_t{2}, int64_t{5}, int64_t{13}});
    b.node("Transpose", {"x"}, {"xt"}, "tr").ints("perm", {0, 2, 1});
    b.node("MatMul", {"a", "xt"}, {"y"}, "mm");
    b.output("y");
    const Graph g = build_graph(b, "mm_tr.onnx");
    check(g, plan_kernel(g, {"tr", "mm"}, "mm", {}, {"transpose-into-gemm"}));
  }
  SECTION("a Transpose whose output is also a graph output is not folded") {
    const Graph g = transpose_matmul_graph(true);
    auto k = codegen::generate(g, plan_kernel(g, {"tr", "mm"}, "mm"));
    REQUIRE_FALSE(k);
    CHECK(k.error().code == ErrorCode::kUnsupported);
    CHECK_THAT(k.error().message, Contains("node \"mm\" (MatMul)") && Contains("needed outside the kernel"));
  }
}

TEST_CASE("a MatMul with one B for every batch is one GEMM over the batch's rows where A's layout allows", "[codegen]") {
  // ViT's attention input: [1, S, E] transposed to [S, 1, E], times a 2-D weight. The cost model
  // prices one GEMM of S rows; the kernel is that GEMM, not S GEMMs of one row.
  auto graph = [](const std::vector<int64_t>& x, const std::vector<int64_t>& perm) {
    test::OnnxBuilder b;
    b.input("x", kF32, std::vector<test::Dim>(x.begin(), x.end()));
    b.input("w", kF32, {x.back(), int64_t{5}});
    b.node("Transpose", {"x"}, {"xt"}, "tr").ints("perm", perm);
    b.node("MatMul", {"xt", "w"}, {"y"}, "mm");
    b.output("y");
    return build_graph(b, "mm_fold.onnx");
  };
  const struct {
    std::vector<int64_t> x, perm;
    const char* gemm;  // the kernel's own description of its loop
  } cases[] = {
      {{1, 9, 13}, {1, 0, 2}, "GEMM 1 x [9 x 5 x 13]"},  // [9, 1, 13]: rows 13 apart, one row a batch
      {{2, 3, 13}, {0, 1, 2}, "GEMM 1 x [6 x 5 x 13]"},  // plain row-major [2, 3, 13]
      {{3, 4, 13}, {1, 0, 2}, "GEMM 4 x [3 x 5 x 13]"},  // [4, 3, 13] with rows 52 apart: stays batched
  };
  for (const auto& c : cases) {
    INFO(shape_str(c.x) << " perm " << shape_str(c.perm));
    const Graph g = graph(c.x, c.perm);
    const PlanKernel pk = plan_kernel(g, {"tr", "mm"}, "mm", {32, 32, 8, 64, 2, 1, 1, 1}, {"transpose-into-gemm"});
    auto k = codegen::generate(g, pk);
    REQUIRE(k);
    CHECK_THAT(k->body, Contains(c.gemm));
    check(g, pk);
  }
}

namespace {

struct ConvCase {
  std::vector<int64_t> x, w;  // input and weight shapes
  int64_t group = 1;
  std::vector<int64_t> strides, pads, dilations;
  std::string auto_pad;
  bool bias = true;
  Compile compile = Compile::kVulkanOnly;
};

Graph conv_graph(const ConvCase& c, bool bn_relu) {
  test::OnnxBuilder b;
  b.input("x", kF32, std::vector<test::Dim>(c.x.begin(), c.x.end()));
  b.input("w", kF32, std::vector<test::Dim>(c.w.begin(), c.w.end()));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    b.input("bias", kF32, {c.w[0]});
    ins.push_back("bias");
  }
  auto n = b.node("Conv", ins, {bn_relu ? "h" : "y"}, "conv");
  n.i("group", c.group);
  if (!c.strides.empty()) n.ints("strides", c.strides);
  if (!c.pads.empty()) n.ints("pads", c.pads);
  if (!c.dilations.empty()) n.ints("dilations", c.dilations);
  if (!c.auto_pad.empty()) n.s("auto_pad", c.auto_pad);
  if (bn_relu) {
    for (const char* p : {"scale", "shift", "mean", "var"}) b.input(p, kF32, {c.w[0]});
    b.node("BatchNormalization", {"h", "scale", "shift", "mean", "var"}, {"bn_out"}, "bn").f("epsilon", 1e-3f);
    b.node("Relu", {"bn_out"}, {"y"}, "relu");
  }
  b.output("y");
  return build_graph(b, "conv.onnx");
}

}  // namespace

TEST_CASE("Conv kernels match the reference: implicit GEMM and direct", "[codegen]") {
  const std::vector<ConvCase> cases = {
      {{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, "", true, Compile::kCudaAndFp16},  // implicit GEMM
      {{2, 16, 13, 7}, {32, 8, 3, 3}, 2, {2, 2}, {1, 0, 0, 1}, {}, "", false},    // groups, stride, asymmetric pads
      {{1, 16, 13, 13}, {16, 16, 3, 3}, 1, {}, {}, {2, 2}, "SAME_UPPER"},        // dilation, SAME_UPPER
      {{1, 16, 8, 8}, {16, 16, 2, 2}, 1, {2, 2}, {}, {}, "SAME_LOWER"},          // SAME_LOWER
      {{1, 3, 13, 13}, {16, 3, 7, 7}, 1, {2, 2}, {3, 3, 3, 3}, {}, ""},            // a stem conv
      {{1, 8, 7, 13}, {8, 1, 3, 3}, 8, {1, 1}, {1, 1, 1, 1}, {}, "", true, Compile::kCudaAndFp16},  // depthwise: direct
      {{1, 4, 5, 5}, {3, 4, 1, 1}, 1, {}, {}, {}, "VALID"},                        // tiny: direct kernel
      {{2, 16, 61}, {16, 16, 5}, 1, {}, {2, 2}, {}, ""},                           // 1-D
      {{1, 4, 5, 6, 7}, {16, 4, 3, 3, 3}, 1, {}, {1, 1, 1, 1, 1, 1}, {}, "", true, Compile::kCuda},  // 3-D
      {{1, 1, 1, 1}, {16, 1, 1, 1}, 1, {}, {}, {}, ""},                            // 1x1 everything
  };
  for (const ConvCase& c : cases) {
    INFO("x " << shape_str(c.x) << " w " << shape_str(c.w) << " group " << c.group << " auto_pad " << c.auto_pad);
    const Graph g = conv_graph(c, false);
    check(g, plan_kernel(g, {"conv"}, "conv", {64, 32, 16, 128, 2, 1, 1, 1}), c.compile);
  }
}

TEST_CASE("Conv with a folded BatchNormalization and Relu", "[codegen]") {
  for (const ConvCase& c : {ConvCase{{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, ""},
                            ConvCase{{1, 8, 7, 5}, {8, 1, 3, 3}, 8, {}, {1, 1, 1, 1}, {}, ""}}) {
    INFO("x " << shape_str(c.x) << " w " << shape_str(c.w));
    const Graph g = conv_graph(c, true);
    check(g, plan_kernel(g, {"conv", "bn", "relu"}, "conv", {}, {"batchnorm-fold", "gemm-epilogue"}), Compile::kCuda);
  }
}

namespace {

// Attention over q [B, H, Sq, D], k [B, H, Skv, D] (transposed in the graph) or kt [B, H, D, Skv],
// v [B, H, Skv, Dv]: softmax(q k^T * scale + mask) v, then + residual when `tail`.
Graph attention_graph(int64_t B, int64_t H, int64_t sq, int64_t skv, int64_t d, int64_t dv, bool transpose, bool tail) {
  test::OnnxBuilder b;
  b.input("q", kF32, {B, H, sq, d});
  if (transpose) {
    b.input("k", kF32, {B, H, skv, d});
    b.node("Transpose", {"k"}, {"kt"}, "tr").ints("perm", {0, 1, 3, 2});
  } else {
    b.input("kt", kF32, {B, H, d, skv});
  }
  b.input("scale", kF32, {});
  b.input("mask", kF32, {B, int64_t{1}, sq, skv});
  b.input("v", kF32, {B, H, skv, dv});
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.node("Mul", {"s", "scale"}, {"ss"}, "scale_mul");
  b.node("Add", {"ss", "mask"}, {"sm"}, "mask_add");
  b.node("Softmax", {"sm"}, {"p"}, "softmax").i("axis", -1);
  b.node("MatMul", {"p", "v"}, {tail ? "o" : "y"}, "pv");
  if (tail) {
    b.input("res", kF32, {B, H, sq, dv});
    b.node("Add", {"o", "res"}, {"y"}, "residual");
  }
  b.output("y");
  return build_graph(b, "attention.onnx");
}

std::vector<std::string> attention_nodes(bool transpose, bool tail) {
  std::vector<std::string> n = {"qk", "scale_mul", "mask_add", "softmax", "pv"};
  if (transpose) n.insert(n.begin(), "tr");
  if (tail) n.push_back("residual");
  return n;
}

}  // namespace

TEST_CASE("attention kernels match the reference", "[codegen]") {
  struct A {
    int64_t B, H, sq, skv, d, dv;
    bool transpose, tail;
    TileConfig tile;
    Compile compile;
  };
  for (const A& a : {A{1, 1, 1, 1, 1, 1, true, false, {}, Compile::kVulkanOnly},
                     A{2, 3, 7, 13, 16, 8, true, false, {32, 16, 0, 128, 1, 1, 1, 1}, Compile::kCudaAndFp16},
                     A{1, 2, 61, 61, 8, 8, false, true, {16, 32, 0, 64, 1, 1, 1, 1}, Compile::kCuda},
                     A{1, 1, 13, 127, 32, 16, true, true, {64, 64, 0, 256, 2, 1, 1, 1}, Compile::kVulkanOnly},
                     A{1, 2, 32, 32, 16, 16, true, false, {32, 32, 0, 128, 1, 1, 1, 1}, Compile::kVulkanOnly},
                     // A decode step: one query over a long cache, the keys split over groups
                     // (flash-decoding), the last combining them; uneven shares, and a tail.
                     A{1, 4, 1, 300, 64, 64, true, false, {16, 32, 0, 128, 2, 4, 1, 1}, Compile::kCudaAndFp16},
                     A{2, 2, 3, 257, 32, 16, false, true, {16, 32, 0, 64, 1, 3, 1, 1}, Compile::kCuda}}) {
    INFO("B " << a.B << " H " << a.H << " Sq " << a.sq << " Skv " << a.skv << " D " << a.d << " Dv " << a.dv);
    const Graph g = attention_graph(a.B, a.H, a.sq, a.skv, a.d, a.dv, a.transpose, a.tail);
    const PlanKernel pk = plan_kernel(g, attention_nodes(a.transpose, a.tail), "qk", a.tile, {"attention"});
    check(g, pk, a.compile);
    if (a.tile.split_k > 1) {  // the combine ran: each query block's keys in several groups
      auto k = codegen::generate(g, pk);
      REQUIRE(k);
      CHECK_THAT(k->body, Catch::Contains("keys split " + std::to_string(a.tile.split_k) + " ways"));
    }
  }
}

TEST_CASE("attention patterns the generator does not cover are refused with the reason", "[codegen]") {
  test::OnnxBuilder b;
  b.input("q", kF32, {int64_t{1}, int64_t{7}, int64_t{8}});
  b.input("kt", kF32, {int64_t{1}, int64_t{8}, int64_t{7}});
  b.input("v", kF32, {int64_t{1}, int64_t{7}, int64_t{8}});
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.node("Softmax", {"s"}, {"p"}, "softmax").i("axis", 1);
  b.node("MatMul", {"p", "v"}, {"y"}, "pv");
  b.output("y");
  const Graph g = build_graph(b, "attention_axis.onnx");
  auto k = codegen::generate(g, plan_kernel(g, {"qk", "softmax", "pv"}, "qk", {}, {"attention"}));
  REQUIRE_FALSE(k);
  CHECK(k.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(k.error().message, Contains("node \"softmax\" (Softmax)") && Contains("only over the last axis"));
}

TEST_CASE("GEMM tiles are fitted to the problem and the target's limits", "[codegen]") {
  codegen::GemmLoop L;
  L.m = 1000;
  L.n = 1000;
  L.k = 1000;
  codegen::Options o;
  o.max_threads = 256;
  o.max_shared_bytes = 16 * 1024;
  for (const TileConfig& t : {TileConfig{}, TileConfig{256, 256, 64, 1024, 4, 1, 1, 1}, TileConfig{0, 0, 0, 0, 0, 1, 1, 1},
                              TileConfig{3, 5, 7, 33, 1, 1, 1, 1}}) {
    INFO("tile " << t.block_m << "x" << t.block_n << "x" << t.block_k << " threads " << t.threads);
    const codegen::GemmTile f = codegen::fit_gemm_tile(t, L, o);
    CHECK(f.threads <= 256);
    CHECK(f.shared_bytes() <= o.max_shared_bytes);
    CHECK(f.tm * f.tn <= 64);
    CHECK(f.bm * f.bn == f.threads * f.tm * f.tn);
    CHECK(f.bm % f.tm == 0);
    CHECK(f.bn % f.tn == 0);
  }
  // An empty config gets the default; a small problem shrinks the tile.
  const codegen::GemmTile d = codegen::fit_gemm_tile(TileConfig{}, L, {});
  CHECK((d.bm == 64 && d.bn == 64 && d.bk == 16 && d.threads == 256 && d.tm == 4 && d.tn == 4));
  L.m = 7;
  L.n = 1;
  L.k = 3;
  const codegen::GemmTile s = codegen::fit_gemm_tile(TileConfig{128, 128, 32, 256, 2, 1, 1, 1}, L, {});
  CHECK((s.bm == 8 && s.bn == 1 && s.bk == 4 && s.threads == 8));
  // The generated kernel declares what the limits allow.
  const Graph g = matmul_graph({300, 200}, {200, 100}, false);
  auto k = codegen::generate(g, plan_kernel(g, {"mm"}, "mm", {256, 128, 32, 256, 3, 1, 1, 1}), o);
  REQUIRE(k);
  CHECK(k->shared_bytes <= o.max_shared_bytes);
  CHECK(k->block[0] <= 256u);
}

TEST_CASE("GEMM grids past 65535 groups spread over y", "[codegen]") {
  const Graph g = matmul_graph({66000, 1, 2}, {66000, 2, 1}, false);
  const PlanKernel pk = plan_kernel(g, {"mm"}, "mm");
  auto k = codegen::generate(g, pk);
  REQUIRE(k);
  CHECK(k->groups[0] <= 65535u);
  CHECK(k->groups[1] > 1u);
  test::check_kernel_on_devices(g, pk, gemm_check());
}

TEST_CASE("GEMM and Conv generators refuse what they do not cover with the reason", "[codegen]") {
  SECTION("ConvTranspose") {
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{5}});
    b.input("w", kF32, {int64_t{4}, int64_t{2}, int64_t{3}, int64_t{3}});
    b.node("ConvTranspose", {"x", "w"}, {"y"}, "deconv");
    b.output("y");
    const Graph g = build_graph(b, "deconv.onnx");
    auto k = codegen::generate(g, plan_kernel(g, {"deconv"}, "deconv"));
    REQUIRE_FALSE(k);
    CHECK(k.error().code == ErrorCode::kUnsupported);
    CHECK_THAT(k.error().message, Contains("node \"deconv\" (ConvTranspose)") && Contains("covers Conv only"));
  }
  SECTION("an operand computed inside the kernel by a node that cannot fold") {
    test::OnnxBuilder b;
    b.input("a", kF32, {int64_t{7}, int64_t{13}});
    b.input("b", kF32, {int64_t{13}, int64_t{5}});
    b.node("Relu", {"a"}, {"ar"}, "relu");
    b.node("MatMul", {"ar", "b"}, {"y"}, "mm");
    b.output("y");
    const Graph g = build_graph(b, "relu_mm.onnx");
    auto k = codegen::generate(g, plan_kernel(g, {"relu", "mm"}, "mm"));
    REQUIRE_FALSE(k);
    CHECK_THAT(k.error().message, Contains("node \"mm\" (MatMul)") && Contains("computed inside the same kernel by node \"relu\""));
  }
}

TEST_CASE("attention refuses intermediates needed elsewhere and head dims past shared memory", "[codegen]") {
  SECTION("the scores are a graph output") {
    test::OnnxBuilder b;
    b.input("q", kF32, {int64_t{1}, int64_t{7}, int64_t{8}});
    b.input("kt", kF32, {int64_t{1}, int64_t{8}, int64_t{7}});
    b.input("v", kF32, {int64_t{1}, int64_t{7}, int64_t{8}});
    b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
    b.node("Softmax", {"s"}, {"p"}, "softmax");
    b.node("MatMul", {"p", "v"}, {"y"}, "pv");
    b.output("y");
    b.output("s");
    const Graph g = build_graph(b, "attention_scores_out.onnx");
    auto k = codegen::generate(g, plan_kernel(g, {"qk", "softmax", "pv"}, "qk", {}, {"attention"}));
    REQUIRE_FALSE(k);
    CHECK_THAT(k.error().message, Contains("node \"qk\" (MatMul)") && Contains("intermediate \"s\"") &&
                                      Contains("needed outside the kernel"));
  }
  SECTION("a head dim that does not fit") {
    const Graph g = attention_graph(1, 1, 4, 4, 512, 512, false, false);
    codegen::Options o;
    o.max_shared_bytes = 4096;
    auto k = codegen::generate(g, plan_kernel(g, attention_nodes(false, false), "qk", {}, {"attention"}), o);
    REQUIRE_FALSE(k);
    CHECK_THAT(k.error().message, Contains("head dims 512 and 512") && Contains("the target allows 4096"));
  }
}

TEST_CASE("a fused Transpose read through a Reshape view and attention scores reshaped for the mask", "[codegen]") {
  SECTION("BERT's context layer: Transpose, Reshape, MatMul") {
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{5}});
    b.input("w", kF32, {int64_t{15}, int64_t{13}});
    b.initializer_i64("shape", {3}, {1, 7, 15});
    b.node("Transpose", {"x"}, {"xt"}, "tr").ints("perm", {0, 2, 1, 3});
    b.node("Reshape", {"xt", "shape"}, {"xr"}, "reshape");
    b.node("MatMul", {"xr", "w"}, {"y"}, "mm");
    b.output("y");
    const Graph g = build_graph(b, "tr_reshape_mm.onnx");
    check(g, plan_kernel(g, {"tr", "mm"}, "mm", {}, {"transpose-into-gemm"}), Compile::kCuda);
  }
  SECTION("OPT's scores: [B*H, S, S] viewed as [B, H, S, S] for the mask") {
    const int64_t B = 2, H = 3, S = 13, D = 8;
    test::OnnxBuilder b;
    b.input("q", kF32, {B * H, S, D});
    b.input("kt", kF32, {B * H, D, S});
    b.input("mask", kF32, {B, int64_t{1}, S, S});
    b.input("v", kF32, {B * H, S, D});
    b.initializer_i64("four", {4}, {B, H, S, S});
    b.initializer_i64("three", {3}, {B * H, S, S});
    b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
    b.node("Reshape", {"s", "four"}, {"s4"}, "r1");
    b.node("Add", {"s4", "mask"}, {"sm"}, "mask_add");
    b.node("Reshape", {"sm", "three"}, {"s3"}, "r2");
    b.node("Softmax", {"s3"}, {"p"}, "softmax").i("axis", -1);
    b.node("MatMul", {"p", "v"}, {"y"}, "pv");
    b.output("y");
    const Graph g = build_graph(b, "opt_attention.onnx");
    check(g, plan_kernel(g, {"qk", "mask_add", "softmax", "pv"}, "qk", {16, 16, 0, 64, 1, 1, 1, 1}, {"attention"}),
          Compile::kCuda);
  }
}

TEST_CASE("two-operand Einsum runs as a GEMM", "[codegen]") {
  struct E {
    std::string eq;
    std::vector<int64_t> a, b;
  };
  for (const E& e : {E{"bhid,bhjd->bhij", {2, 3, 7, 8}, {2, 3, 13, 8}}, E{"ij,jk", {7, 13}, {13, 5}},
                     E{"...ij,...jk->...ik", {2, 1, 7, 13}, {3, 13, 5}}, E{"ibk,bkj->bji", {7, 2, 13}, {2, 13, 5}},
                     E{"ij,j->i", {61, 13}, {13}}, E{"i,i->", {127}, {127}}, E{"ij,kj->ik", {7, 1}, {5, 1}}}) {
    INFO(e.eq << " " << shape_str(e.a) << " " << shape_str(e.b));
    test::OnnxBuilder b;
    b.input("a", kF32, std::vector<test::Dim>(e.a.begin(), e.a.end()));
    b.input("b", kF32, std::vector<test::Dim>(e.b.begin(), e.b.end()));
    b.node("Einsum", {"a", "b"}, {"y"}, "einsum").s("equation", e.eq);
    b.output("y");
    const Graph g = build_graph(b, "einsum.onnx");
    check(g, plan_kernel(g, {"einsum"}, "einsum", {32, 32, 8, 64, 2, 1, 1, 1}),
          e.eq == "bhid,bhjd->bhij" ? Compile::kCuda : Compile::kVulkanOnly);
  }
}

TEST_CASE("matrix-unit GEMM tiles are fitted to the problem and the target's limits", "[codegen][matrix]") {
  codegen::GemmLoop L;
  L.m = 1000;
  L.n = 1000;
  L.k = 1000;
  for (codegen::MatrixPath path : {codegen::MatrixPath::kWmma, codegen::MatrixPath::kMfma, codegen::MatrixPath::kPortable}) {
    codegen::Options o;
    o.float_storage = codegen::Storage::kF16;
    o.matrix = path;
    o.max_threads = 256;
    o.max_shared_bytes = 16 * 1024;
    const int lanes = path == codegen::MatrixPath::kMfma ? 64 : 32;
    for (const TileConfig& t : {TileConfig{}, TileConfig{256, 256, 64, 1024, 4, 1, 1, 1}, TileConfig{0, 0, 0, 0, 0, 1, 1, 1},
                                TileConfig{3, 5, 7, 33, 1, 1, 1, 1}, TileConfig{128, 128, 32, 256, 3, 1, 1, 1}}) {
      INFO(codegen::matrix_path_name(path) << " tile " << t.block_m << "x" << t.block_n << "x" << t.block_k
                                           << " threads " << t.threads);
      const codegen::MmaTile f = codegen::fit_mma_tile(t, L, o);
      CHECK(f.lanes == lanes);
      CHECK(f.threads() <= 256);
      CHECK(f.shared_bytes() <= o.max_shared_bytes);
      CHECK(f.fm * f.fn * 256 / lanes <= 128);
      CHECK(f.bm == 16 * f.wr * f.fm);
      CHECK(f.bn == 16 * f.wc * f.fn);
      CHECK((f.bk % 16 == 0 && f.bk >= 16));
      CHECK(f.lda() % 8 == 0);  // wmma's leading dimension: a multiple of 16 bytes
      CHECK(f.ldb() % 8 == 0);
    }
  }
  codegen::Options o;
  o.float_storage = codegen::Storage::kF16;
  o.matrix = codegen::MatrixPath::kWmma;
  // An empty config (256 threads): 64x64x32 over eight warps in a 4x2 grid of 1x2 fragments.
  const codegen::MmaTile d = codegen::fit_mma_tile(TileConfig{}, L, o);
  CHECK((d.bm == 64 && d.bn == 64 && d.bk == 32 && d.wr == 4 && d.wc == 2 && d.fm == 1 && d.fn == 2 && d.threads() == 256));
  const codegen::MmaTile d128 = codegen::fit_mma_tile(TileConfig{0, 0, 0, 128, 1, 1, 1, 1}, L, o);
  CHECK((d128.wr == 2 && d128.wc == 2 && d128.fm == 2 && d128.fn == 2 && d128.threads() == 128));
  // The simulator's favourite H200 tile keeps its shape: 8 warps of 4x2 fragments, double-buffered.
  const codegen::MmaTile big = codegen::fit_mma_tile(TileConfig{128, 128, 32, 256, 3, 1, 1, 1}, L, o);
  CHECK((big.bm == 128 && big.bn == 128 && big.threads() == 256 && big.stages == 2 && big.fm * big.fn == 8));
  // A tiny problem gets one fragment and one warp.
  L.m = 7;
  L.n = 1;
  L.k = 3;
  const codegen::MmaTile s = codegen::fit_mma_tile(TileConfig{128, 128, 32, 256, 2, 1, 1, 1}, L, o);
  CHECK((s.bm == 16 && s.bn == 16 && s.bk == 16 && s.threads() == 32 && s.fm == 1 && s.fn == 1));
}

namespace {

// The fp16 kernel of plan kernel `pk` on matrix path `path`, in the language of its target.
backend::KernelSource matrix_source(const Graph& g, const PlanKernel& pk, codegen::MatrixPath path) {
  codegen::Options o;
  o.float_storage = codegen::Storage::kF16;
  o.matrix = path;
  auto k = codegen::generate(g, pk, o);
  REQUIRE(k);
  CHECK(k->matrix == path);
  const backend::KernelSource src = k->source(backend::Language::kCudaCpp);
  CHECK(src.needs_matrix_units == (path != codegen::MatrixPath::kPortable));
  CHECK(src.shared_bytes <= 48u * 1024);
  return src;
}

// Runs plan kernel `pk` alone in fp16 through the executor on `path` and compares with the CPU reference.
void run_fp16(backend::Backend& dev, const Graph& g32, const PlanKernel& pk, codegen::MatrixPath path) {
  const Graph g = retype(g32, DType::kFloat16);
  Plan plan;
  plan.kernels.push_back(pk);
  exec::RunOptions o;
  o.seed = 11;
  o.repeat = 1;
  o.fp16_storage = true;
  o.matrix = path;
  const test::PlanRun r = test::run_plan_against_reference(dev, g, plan, o);
  for (const auto& k : r.run.kernels) CHECK(k.device);
  for (double e : r.errors) CHECK(e <= 5e-3);
}

// The wmma text compiled with NVRTC for each of `archs`, the MFMA text with hiprtc for gfx90a,
// where each compiler is (a WARN says which is not).
void compile_matrix_texts(const backend::KernelSource& wmma, const backend::KernelSource& mfma,
                          std::initializer_list<const char*> archs) {
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; backend::cuda::nvrtc_available(&why)) {
    for (const char* arch : archs) {
      std::string log;
      INFO(arch << "\n" << wmma.code);
      CHECK(backend::cuda::compile_cuda(wmma, arch, &log));
      INFO(log);
    }
  } else {
    WARN("NVRTC unavailable, wmma kernels not compiled: " << why);
  }
#else
  (void)wmma;
  (void)archs;
#endif
#ifdef GPUSIM_HAVE_HIP
  if (std::string why; backend::hip::hiprtc_available(&why)) {
    std::string log;
    auto bin = backend::hip::compile_hip(mfma, "gfx90a", &log);
    INFO(mfma.code << "\n" << log);
    CHECK(bin);
  } else {
    WARN("hiprtc unavailable, MFMA kernels not compiled: " << why);
  }
#else
  (void)mfma;
#endif
}

}  // namespace

namespace {

// A MatMul case of the matrix-unit tests: A's and B's shapes and the tile asked for.
struct MatrixCase {
  std::vector<int64_t> a, b;
  TileConfig tile;
};

}  // namespace

TEST_CASE("fp16 GEMMs and convolutions on matrix units: wmma and MFMA compile and the portable path matches the reference",
          "[codegen][matrix]") {
  const std::vector<MatrixCase> mms = {
      {{9, 1}, {1, 1}, {}},                                             // K and N of one: one padded fragment
      {{11, 61}, {61, 13}, {128, 128, 32, 256, 3, 1, 1, 1}},             // primes, double-buffered, shrunk tile
      {{127, 33}, {33, 64}, {64, 32, 16, 64, 1, 1, 1, 1}},               // k past one 16-deep slice
      {{2, 3, 17, 19}, {2, 3, 19, 5}, {32, 64, 64, 128, 2, 1, 1, 1}},    // batched
      {{130, 96}, {96, 80}, {128, 64, 32, 256, 2, 1, 1, 1}},             // several tiles, a ragged edge
  };
  std::vector<std::pair<Graph, PlanKernel>> kernels;
  for (const MatrixCase& c : mms) {
    Graph g = matmul_graph(c.a, c.b, true, c.b.back());
    const PlanKernel pk = plan_kernel(g, {"mm", "add", "relu"}, "mm", c.tile);
    kernels.emplace_back(std::move(g), pk);
  }
  for (const ConvCase& c : {ConvCase{{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, ""},
                            ConvCase{{2, 16, 13, 7}, {32, 8, 3, 3}, 2, {2, 2}, {1, 0, 0, 1}, {}, "", false},
                            ConvCase{{1, 24, 5, 7}, {40, 24, 1, 1}, 1, {}, {}, {}, ""}}) {
    Graph g = conv_graph(c, false);
    const PlanKernel pk = plan_kernel(g, {"conv"}, "conv", {64, 64, 32, 128, 2, 1, 1, 1});
    kernels.emplace_back(std::move(g), pk);
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& [g32, pk] = kernels[i];
    INFO("case " << i);
    const Graph g = retype(g32, DType::kFloat16);
    const backend::KernelSource wmma = matrix_source(g, pk, codegen::MatrixPath::kWmma);
    CHECK(wmma.code.find("nvcuda::wmma::mma_sync") != std::string::npos);
    CHECK(wmma.code.find("#include <mma.h>") != std::string::npos);
    const backend::KernelSource mfma = matrix_source(g, pk, codegen::MatrixPath::kMfma);
    CHECK(mfma.code.find("__builtin_amdgcn_mfma_f32_16x16x16f16") != std::string::npos);
    compile_matrix_texts(wmma, mfma, {"sm_80", "sm_90"});
    for (auto& d : test::devices()) {
      if (!d.dev->info().fp16) {
        WARN(d.backend << ": no fp16 storage on " << d.dev->info().name << "; matrix kernels not run");
        continue;
      }
      const codegen::MatrixPath own = codegen::matrix_path_for(d.dev->info());
      for (codegen::MatrixPath path : {codegen::MatrixPath::kPortable, own}) {
        if (path == codegen::MatrixPath::kNone) continue;
        INFO(d.backend << " on matrix path " << codegen::matrix_path_name(path));
        run_fp16(*d.dev, g32, pk, path);
      }
    }
  }
}

TEST_CASE("fp32 GEMMs and convolutions on matrix units as TF32 (wmma) and fp32 (MFMA) compile and the portable path matches the reference",
          "[codegen][matrix][tf32]") {
  const std::vector<MatrixCase> mms = {
      {{11, 61}, {61, 13}, {128, 128, 32, 256, 2, 1, 1, 1}},           // primes, double-buffered, shrunk tile
      {{127, 33}, {33, 64}, {64, 32, 16, 64, 1, 1, 1, 1}},             // k past one slice of every depth
      {{2, 3, 17, 19}, {2, 3, 19, 5}, {32, 64, 64, 128, 2, 1, 1, 1}},  // batched
      {{9, 300}, {300, 70}, {16, 32, 16, 64, 2, 8, 4, 1}},             // split K 8 ways: the slices summed in the epilogue
  };
  std::vector<std::pair<Graph, PlanKernel>> kernels;
  for (const MatrixCase& c : mms) {
    Graph g = matmul_graph(c.a, c.b, true, c.b.back());
    kernels.emplace_back(g, plan_kernel(g, {"mm", "add", "relu"}, "mm", c.tile));
  }
  for (const ConvCase& c : {ConvCase{{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, ""},
                            ConvCase{{2, 16, 13, 7}, {32, 8, 3, 3}, 2, {2, 2}, {1, 0, 0, 1}, {}, "", false}}) {
    Graph g = conv_graph(c, false);
    kernels.emplace_back(g, plan_kernel(g, {"conv"}, "conv", {64, 64, 32, 128, 2, 1, 1, 1}));
  }
  auto source = [](const Graph& g, const PlanKernel& pk, codegen::MatrixPath path, bool tf32) {
    codegen::Options o;
    o.matrix = path;
    o.tf32 = tf32;
    o.fp32_matrix = !tf32;
    auto k = codegen::generate(g, pk, o);
    REQUIRE(k);
    CHECK(k->matrix == path);
    return k->source(backend::Language::kCudaCpp);
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& [g, pk] = kernels[i];
    INFO("case " << i);
    const backend::KernelSource wmma = source(g, pk, codegen::MatrixPath::kWmma, true);
    CHECK(wmma.code.find("nvcuda::wmma::precision::tf32") != std::string::npos);
    CHECK(wmma.code.find("__float_to_tf32") != std::string::npos);
    const backend::KernelSource mfma = source(g, pk, codegen::MatrixPath::kMfma, false);
    CHECK(mfma.code.find("__builtin_amdgcn_mfma_f32_16x16x4f32") != std::string::npos);
    compile_matrix_texts(wmma, mfma, {"sm_80", "sm_90"});  // TF32 fragments need sm_80
    for (auto& d : test::devices()) {
      for (const bool tf32 : {true, false}) {
        INFO(d.backend << " on the portable path, " << (tf32 ? "TF32" : "fp32") << " operands");
        Plan plan;
        plan.kernels.push_back(pk);
        exec::RunOptions o;
        o.seed = 11;
        o.repeat = 1;
        o.matrix = codegen::MatrixPath::kPortable;
        o.allow_tf32 = tf32;
        const test::PlanRun r = test::run_plan_against_reference(*d.dev, g, plan, o);
        for (const auto& k : r.run.kernels) CHECK(k.device);
        if (!r.compared) continue;  // the null device computes nothing
        // TF32 keeps 10 mantissa bits of each operand (relative 2^-11 each); fp32 is exact but for
        // the order of the sums.
        for (double e : r.errors) CHECK(e <= (tf32 ? 2e-3 : 1e-5));
        if (tf32) {
          bool nonzero = false;
          for (double e : r.errors) nonzero = nonzero || e > 1e-6;
          CHECK(nonzero);  // the operands were rounded: TF32 ran, not fp32
        }
      }
    }
  }
}

namespace {

// A Softmax over rows and a fused elementwise chain: the row and elementwise generators.
Graph rows_graph() {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{37}, int64_t{300}});
  b.node("Softmax", {"x"}, {"s"}, "softmax").i("axis", -1);
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y");
  return build_graph(b, "capability_rows.onnx");
}

}  // namespace

TEST_CASE("the capability query answers the tile codegen builds, for every menu tile and target", "[codegen][capability]") {
  // Targets: an H100's CUDA generator in fp32 and in fp16 (wmma), and a small device (256
  // threads, 16 KiB shared memory: tiles shrink).
  const DeviceModel h100 = make_device(test::gpu("nvidia-h100-sxm"));
  codegen::Options small;
  small.max_threads = 256;
  small.max_shared_bytes = 16 * 1024;
  DeviceModel h100_tf32 = h100;
  h100_tf32.allow_tf32 = true;
  const DeviceModel mi250x = make_device(test::gpu("amd-mi250x"));
  const std::vector<std::pair<std::string, codegen::Options>> targets = {
      {"h100 fp32", codegen::target_options(h100, false)},
      {"h100 fp16", codegen::target_options(h100, true)},
      {"h100 fp32 tf32", codegen::target_options(h100_tf32, false)},
      {"mi250x fp32", codegen::target_options(mi250x, false)},
      {"small", small}};
  CHECK_FALSE(targets[0].second.tf32);
  CHECK(targets[2].second.tf32);
  CHECK(targets[3].second.fp32_matrix);
  CHECK(targets[0].second.matrix == codegen::MatrixPath::kWmma);  // used only with fp16 storage
  CHECK(targets[1].second.max_threads == 1024);
  struct Case {
    Graph g;
    PlanKernel pk;
  };
  std::vector<Case> cases;
  for (auto [as, bs] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{300, 200}, {200, 100}},
                        {{7, 13}, {13, 61}}, {{4, 64, 512}, {4, 512, 1024}}}) {
    Graph g = matmul_graph(as, bs, false);
    cases.push_back({g, plan_kernel(g, {"mm"}, "mm")});
  }
  {
    Graph g = conv_graph({{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, ""}, false);
    cases.push_back({g, plan_kernel(g, {"conv"}, "conv")});
  }
  {
    Graph g = attention_graph(1, 2, 61, 127, 32, 16, true, false);
    cases.push_back({g, plan_kernel(g, attention_nodes(true, false), "qk", {}, {"attention"})});
    Graph decode = attention_graph(1, 8, 1, 2048, 64, 64, true, false);  // a decode step's one query
    cases.push_back({decode, plan_kernel(decode, attention_nodes(true, false), "qk", {}, {"attention"})});
  }
  {
    Graph g = rows_graph();
    cases.push_back({g, plan_kernel(g, {"softmax"}, "softmax")});
    cases.push_back({g, plan_kernel(g, {"relu"}, "relu")});
  }
  int differed = 0;
  bool split_attention = false;
  for (const auto& [name, opts] : targets) {
    const codegen::TargetCapability cap(opts);
    for (const Case& c : cases) {
      const bool attention = !c.pk.fusions.empty();
      const KernelWork w = group_work(c.g, index_graph(c.g), c.pk.nodes, c.pk.anchor, attention);
      for (const TileConfig& asked : tile_menu(w, h100)) {
        INFO(name << ": " << c.g.nodes[static_cast<size_t>(c.pk.nodes[static_cast<size_t>(c.pk.anchor)])].op_type
                  << " asked " << tile_notation(asked));
        const TileConfig built = cap.generated(w, asked);
        INFO("built " << tile_notation(built));
        CHECK(cap.generated(w, built) == built);  // fitting a fitted tile changes nothing
        differed += !(built == asked);
        // The kernel codegen writes for the asked tile is the one it writes for the built tile:
        // the planner prices exactly what runs.
        PlanKernel a = c.pk, b = c.pk;
        a.tile = asked;
        b.tile = built;
        auto ka = codegen::generate(c.g, a, opts);
        auto kb = codegen::generate(c.g, b, opts);
        REQUIRE(ka);
        REQUIRE(kb);
        CHECK(ka->body == kb->body);
        CHECK(ka->decls == kb->decls);
        CHECK(ka->block == kb->block);
        CHECK(ka->shared_bytes == kb->shared_bytes);
        CHECK(kb->shared_bytes <= opts.max_shared_bytes);
        // The kernel has the built tile's shape: its threads a group, and for GEMM-like and
        // attention kernels one group per block_m x block_n output tile (per block_m queries;
        // split_k groups a tile where K is split),
        // and a SIMT GEMM's shared memory is its stages of A and B tiles.
        const uint32_t threads = kb->block[0] * kb->block[1] * kb->block[2];
        const int64_t groups = int64_t{kb->groups[0]} * kb->groups[1] * kb->groups[2];
        auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
        if (w.cls != OpClass::kReduction && w.cls != OpClass::kNormalization) CHECK(threads == static_cast<uint32_t>(built.threads));
        // The shared memory the cost model prices the tile's occupancy with is the kernel's: exact
        // for matrix-unit and attention tiles, and for SIMT tiles at most the two floats of
        // padding a k-row a layout can add.
        if (w.cls == OpClass::kGemm || w.cls == OpClass::kConv || w.cls == OpClass::kAttention) {
          REQUIRE(built.smem_bytes > 0);
          CHECK(kb->shared_bytes <= static_cast<uint64_t>(built.smem_bytes));
          CHECK(static_cast<uint64_t>(built.smem_bytes) - kb->shared_bytes <= static_cast<uint64_t>(built.stages * built.block_k * 8));
          CHECK(assumed_residency(w, built, h100).smem_bytes == built.smem_bytes);
          if (w.cls == OpClass::kAttention || kb->matrix != codegen::MatrixPath::kNone) {
            CHECK(kb->shared_bytes == static_cast<uint64_t>(built.smem_bytes));
          }
          // What the main loop runs on is what the kernel does, and what it is priced on.
          const bool tf32_text = kb->body.find("tf32") != std::string::npos || kb->decls.find("precision::tf32") != std::string::npos;
          if (w.cls == OpClass::kAttention || kb->matrix == codegen::MatrixPath::kNone || gemv_shaped(built)) {
            CHECK(built.main_loop == MainLoop::kVector);
          } else {
            CHECK(built.main_loop == (tf32_text ? MainLoop::kTf32 : MainLoop::kMatrix));
            CHECK((built.main_loop == MainLoop::kTf32) == (opts.tf32 && w.dtype == DType::kFloat32));
          }
        } else {
          CHECK(built.smem_bytes == 0);
        }
        if (w.cls == OpClass::kGemm || w.cls == OpClass::kConv) {
          CHECK(groups == w.batch * ceil_div(w.m, built.block_m) * ceil_div(w.n, built.block_n) * built.split_k);
          if (gemv_shaped(built)) {  // the threads' partial sums (and the split flag)
            CHECK(kb->shared_bytes == static_cast<uint64_t>(built.threads * built.block_m * 4 + (built.split_k > 1 ? 4 : 0)));
            CHECK(built.main_loop == MainLoop::kVector);
          } else if (opts.float_storage == codegen::Storage::kF32 && kb->matrix == codegen::MatrixPath::kNone) {  // A and B tiles, rows padded by at most one
            const auto tiles = static_cast<uint64_t>(built.stages * built.block_k * 4);
            CHECK(kb->shared_bytes >= tiles * static_cast<uint64_t>(built.block_m + built.block_n));
            CHECK(kb->shared_bytes <= tiles * static_cast<uint64_t>(built.block_m + built.block_n + 2));
          }
        } else if (w.cls == OpClass::kAttention) {
          CHECK(groups == w.batch * ceil_div(w.m, built.block_m) * built.split_k);
          split_attention = split_attention || built.split_k > 1;
        }
      }
    }
  }
  CHECK(differed > 0);  // the menus ask for stages, blocks and threads the targets fit
  CHECK(split_attention);  // a decode step's keys split over groups, as the menu asks
}

TEST_CASE("split-K GEMMs and convolutions: each slice a group, the last of a tile sums them and runs the epilogue",
          "[codegen][split]") {
  // The split codegen builds: asked clamped to the k-steps (and 64), then no empty slice; fitting a
  // fitted split returns it.
  CHECK(generated_split_k(4, 64, 8) == 4);
  CHECK(generated_split_k(8, 80, 8) == 5);   // 10 k-steps: 2 a slice gives 5 slices
  CHECK(generated_split_k(16, 13, 8) == 2);  // 2 k-steps
  CHECK(generated_split_k(0, 100, 8) == 1);
  CHECK(generated_split_k(200, 100000, 8) == 64);
  for (int64_t steps = 1; steps <= 70; ++steps) {
    for (int asked = 1; asked <= 70; ++asked) {
      const int s = generated_split_k(asked, steps * 16, 16);
      INFO("k-steps " << steps << " asked " << asked);
      CHECK(generated_split_k(s, steps * 16, 16) == s);
      const int64_t per = (steps + s - 1) / s;
      CHECK((s - 1) * per < steps);  // no empty slice
    }
  }

  struct MmCase {
    std::vector<int64_t> a, b;
    TileConfig tile;
    Compile compile;
  };
  const std::vector<MmCase> mms = {
      // a classifier at batch 1: GEMV-shaped (70 columns of 32 threads, K in 5 slices of 64)
      {{1, 300}, {300, 70}, {1, 32, 8, 32, 2, 8, 4, 1}, Compile::kCudaAndFp16},
      // nine rows, one more than a GEMV-shaped tile takes: the tiled loop, double-buffered
      {{9, 300}, {300, 70}, {16, 32, 8, 64, 2, 8, 4, 1}, Compile::kCudaAndFp16},
      // ragged slices (13 k-steps in 4 slices of 4, 4, 4, 1), one stage, several tiles
      {{37, 100}, {100, 45}, {32, 32, 8, 64, 1, 4, 1, 1}, Compile::kCuda},
      // batched and broadcast, more slices asked than k-steps
      {{2, 3, 17, 19}, {2, 3, 19, 5}, {16, 16, 8, 64, 2, 16, 1, 1}, Compile::kVulkanOnly},
  };
  for (const MmCase& c : mms) {
    INFO("a " << shape_str(c.a) << " b " << shape_str(c.b) << " split " << c.tile.split_k);
    const Graph g = matmul_graph(c.a, c.b, true, c.b.back());
    const PlanKernel pk = plan_kernel(g, {"mm", "add", "relu"}, "mm", c.tile);
    auto k = codegen::generate(g, pk);
    REQUIRE(k);
    const backend::KernelSource src = k->source(backend::Language::kCudaCpp);
    CHECK(src.code.find("SPLIT_ARRIVE(tile)") != std::string::npos);
    int scratch = 0;
    for (const codegen::Arg& a : k->args) scratch += a.scratch != codegen::Scratch::kNone ? 1 : 0;
    CHECK(scratch == 2);
    CHECK(k->args.back().scratch == codegen::Scratch::kCounters);
    check(g, pk, c.compile);
  }
  // Nine rows: 3 tiles of 32 columns x 8 slices; a classifier's row: 70 columns x 5 slices.
  {
    const Graph g = matmul_graph({9, 300}, {300, 70}, false);
    auto k = codegen::generate(g, plan_kernel(g, {"mm"}, "mm", {16, 32, 8, 64, 2, 8, 4, 1}));
    REQUIRE(k);
    CHECK(k->groups[0] * k->groups[1] == 3u * 8u);
    auto one = codegen::generate(g, plan_kernel(g, {"mm"}, "mm", {16, 32, 8, 64, 2, 1, 4, 1}));
    REQUIRE(one);
    CHECK(one->groups[0] * one->groups[1] == 3u);
    for (const codegen::Arg& a : one->args) CHECK(a.scratch == codegen::Scratch::kNone);
    const Graph row = matmul_graph({1, 300}, {300, 70}, false);
    auto v = codegen::generate(row, plan_kernel(row, {"mm"}, "mm", {1, 32, 8, 32, 2, 8, 4, 1}));
    REQUIRE(v);
    CHECK(v->groups[0] * v->groups[1] == 70u * 5u);
  }
  // A convolution with a bias, K = 16 x 9 in 6 slices.
  const ConvCase cc{{1, 16, 7, 13}, {32, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, "", true, Compile::kCudaAndFp16};
  const Graph conv = conv_graph(cc, false);
  const PlanKernel conv_pk = plan_kernel(conv, {"conv"}, "conv", {32, 32, 8, 128, 2, 6, 1, 1});
  check(conv, conv_pk, cc.compile);
  // The matrix kernels split too: wmma and MFMA texts compile (where NVRTC and hiprtc are).
  const Graph mm = matmul_graph({9, 300}, {300, 70}, true, 70);
  for (const auto& [g32, pk] : {std::pair{mm, plan_kernel(mm, {"mm", "add", "relu"}, "mm", {16, 32, 16, 64, 2, 8, 1, 1})},
                                std::pair{conv, conv_pk}}) {
    const Graph g = retype(g32, DType::kFloat16);
    const backend::KernelSource wmma = matrix_source(g, pk, codegen::MatrixPath::kWmma);
    CHECK(wmma.code.find("SPLIT_ARRIVE(tile)") != std::string::npos);
    const backend::KernelSource mfma = matrix_source(g, pk, codegen::MatrixPath::kMfma);
    compile_matrix_texts(wmma, mfma, {"sm_80"});
  }
}

TEST_CASE("split-K kernels through the executor in fp32 and fp16 and a second launch gives the same bits", "[codegen][split]") {
  // Three rows (GEMV-shaped) and twelve (the tiled loop).
  for (const int64_t m : {3, 12}) {
    const Graph g32 = matmul_graph({m, 200}, {200, 40}, true, 40);
    const PlanKernel pk = plan_kernel(g32, {"mm", "add", "relu"}, "mm", {16, 32, 16, 64, 2, 5, 1, 1});
    Plan plan;
    plan.kernels.push_back(pk);
    for (auto& d : test::devices()) {
      INFO(d.backend << " rows " << m);
      exec::RunOptions o;
      o.seed = 5;
      o.repeat = 1;
      const test::PlanRun r = test::run_plan_against_reference(*d.dev, g32, plan, o);
      for (const auto& k : r.run.kernels) CHECK(k.device);
      for (double e : r.errors) CHECK(e <= 1e-5);
      if (d.dev->info().fp16) run_fp16(*d.dev, g32, pk, codegen::MatrixPath::kPortable);

      // The same kernel launched twice on the same scratch, the output wiped between: the last group
      // of each tile set its counter back to 0, and the slices are summed in a fixed order.
      backend::Backend& dev = *d.dev;
      auto k = codegen::generate(g32, pk);
      REQUIRE(k);
      std::vector<backend::Buffer> bufs;
      size_t out = 0;
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
      for (size_t ai = 0; ai < k->args.size(); ++ai) {
        const codegen::Arg& a = k->args[ai];
        auto b = dev.allocate(static_cast<uint64_t>(a.elements) * 4);
        REQUIRE(b);
        std::vector<float> data(static_cast<size_t>(a.elements));
        if (a.scratch != codegen::Scratch::kNone) {
          std::fill(data.begin(), data.end(), 0.0f);  // int zeros too
        } else if (a.written) {
          std::fill(data.begin(), data.end(), std::numeric_limits<float>::quiet_NaN());
          out = ai;
        } else {
          for (float& v : data) v = uni(rng);
        }
        REQUIRE(dev.upload(*b, data.data(), data.size() * 4));
        bufs.push_back(*b);
      }
      auto h = dev.compile(k->source(dev.info().language));
      REQUIRE(h);
      std::vector<std::vector<float>> got;
      for (int run = 0; run < 2; ++run) {
        std::vector<float> nan(static_cast<size_t>(k->args[out].elements), std::numeric_limits<float>::quiet_NaN());
        REQUIRE(dev.upload(bufs[out], nan.data(), nan.size() * 4));
        REQUIRE(dev.launch(*h, k->groups, bufs, false));
        REQUIRE(dev.synchronize());
        got.emplace_back(nan.size());
        REQUIRE(dev.download(bufs[out], got.back().data(), got.back().size() * 4));
      }
      for (float v : got[0]) REQUIRE(!std::isnan(v));
      CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
      for (const auto& b : bufs) dev.release(b);
    }
  }
}

TEST_CASE("GEMV-shaped kernels for GEMMs and convolutions of at most 8 rows match the reference", "[codegen][gemv]") {
  // The tile: all of M (as a power of two), a warp of 32 threads a column, fewer columns where N is
  // narrower; none past 8 rows; fitting a fitted tile changes nothing.
  codegen::GemmLoop L;
  L.m = 5;
  L.n = 1000;
  L.k = 4096;
  const codegen::Options o;
  const auto t = codegen::fit_gemv_tile(TileConfig{128, 128, 32, 256, 2, 4, 4, 1}, L, o);
  REQUIRE(t);
  CHECK((t->bm == 8 && t->bn == 8 && t->lanes == 32 && t->threads == 256 && t->split == 4));
  L.n = 3;
  const auto narrow = codegen::fit_gemv_tile(TileConfig{}, L, o);
  REQUIRE(narrow);
  CHECK((narrow->bn == 4 && narrow->lanes == 64));
  L.m = 9;
  CHECK_FALSE(codegen::fit_gemv_tile(TileConfig{}, L, o));
  codegen::Options tiny;
  tiny.max_threads = 16;  // fewer than a warp: the tiled loop
  L.m = 1;
  CHECK_FALSE(codegen::fit_gemv_tile(TileConfig{}, L, tiny));
  CHECK(gemv_shaped(TileConfig{1, 8, 32, 256, 1, 1, 4, 1}));
  CHECK_FALSE(gemv_shaped(TileConfig{8, 32, 8, 256, 1, 1, 4, 1}));  // 256 outputs on 256 threads: tiled

  // B read along n (MatMul's [K, N]), scalar: a classifier row, with a bias and Relu, whole and
  // split; rows that are not a power of two; a batch of broadcast GEMMs.
  SECTION("MatMul") {
    struct Case {
      std::vector<int64_t> a, b;
      TileConfig tile;
    };
    for (const Case& c : {Case{{1, 300}, {300, 70}, {128, 64, 8, 256, 2, 1, 4, 1}},
                          Case{{1, 300}, {300, 70}, {128, 64, 8, 256, 2, 4, 4, 1}},
                          Case{{5, 129}, {129, 33}, {32, 32, 8, 64, 1, 1, 1, 1}},
                          Case{{2, 3, 7, 19}, {2, 3, 19, 5}, {32, 32, 8, 128, 1, 2, 1, 1}}}) {
      INFO("a " << shape_str(c.a) << " b " << shape_str(c.b) << " split " << c.tile.split_k);
      const Graph g = matmul_graph(c.a, c.b, true, c.b.back());
      const PlanKernel pk = plan_kernel(g, {"mm", "add", "relu"}, "mm", c.tile);
      auto k = codegen::generate(g, pk);
      REQUIRE(k);
      CHECK_THAT(k->body, Contains("GEMV-shaped GEMM"));
      check(g, pk, Compile::kCudaAndFp16);
    }
  }
  // B read along k (a Gemm with transB, as PyTorch exports a Linear): vector loads of B and A.
  SECTION("Gemm transB") {
    for (const int64_t m : {1, 4}) {
      const int64_t n = 45, kk = 256;
      test::OnnxBuilder b;
      b.input("a", kF32, {m, kk});
      b.input("w", kF32, {n, kk});
      b.input("c", kF32, {n});
      b.node("Gemm", {"a", "w", "c"}, {"y"}, "gemm").i("transB", 1);
      b.output("y");
      const Graph g = build_graph(b, "gemv.onnx");
      for (const int split : {1, 3}) {
        INFO("rows " << m << " split " << split);
        const PlanKernel pk = plan_kernel(g, {"gemm"}, "gemm", {64, 64, 8, 256, 1, split, 4, 1});
        auto k = codegen::generate(g, pk);
        REQUIRE(k);
        CHECK_THAT(k->body, Contains("loads of 4 along k"));
        check(g, pk, Compile::kCudaAndFp16);
      }
    }
  }
  // A convolution with four output pixels: implicit GEMM of 4 rows (im2col gathers of A).
  SECTION("Conv") {
    const ConvCase cc{{1, 32, 3, 3}, {16, 32, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {}, "", true, Compile::kCudaAndFp16};
    const Graph g = conv_graph(cc, true);
    const PlanKernel pk = plan_kernel(g, {"conv", "bn", "relu"}, "conv", {64, 32, 16, 128, 2, 2, 4, 1}, {"batchnorm-fold", "gemm-epilogue"});
    auto k = codegen::generate(g, pk);
    REQUIRE(k);
    CHECK_THAT(k->body, Contains("GEMV-shaped GEMM 1 x [4 x 16 x 288]"));
    check(g, pk, cc.compile);
    // fp16 storage on the portable matrix path (GEMV-shaped whatever the path), on every device.
    for (auto& d : test::devices()) {
      if (d.dev->info().fp16) run_fp16(*d.dev, g, pk, codegen::MatrixPath::kPortable);
    }
  }
}

// The chain of codegen's GEMM-like tiles by its design (gemm_tile.h: design_chain), which the cost
// model prices them by: loads go out in rounds of kLoadRound while staging ahead is off; a split
// adds its arrival and its slices; an epilogue staged through the block its barriers.
TEST_CASE("the generator's design chain follows its loads", "[codegen]") {
  using codegen::design_chain;
  using codegen::kLoadRound;
  // 64x64x32, 128 threads: 16 gathers of A and two 8-wide vectors of B a thread, a k-step.
  KernelChain c = design_chain(64, 64, 32, 128, 32, 1, 8, 1, 4, 0);
  CHECK(c.loads_ahead == (codegen::stages_tile_loads(32, 32, 128) ? 1 : 0));
  CHECK(c.load_rounds == (c.loads_ahead ? 1 : (16 + kLoadRound - 1) / kLoadRound + 1));
  CHECK(c.epilogue_rounds == 0);
  CHECK(c.epilogue_barriers == 0);
  // 256x64x32, 256 threads, 64 accumulators: 32 gathers a thread never stage.
  c = design_chain(256, 64, 32, 256, 64, 1, 8, 1, 8, 0);
  CHECK(c.loads_ahead == 0);
  CHECK(c.load_rounds == 32 / kLoadRound + 1);
  CHECK_FALSE(codegen::stages_tile_loads(40, 64, 256));
  // K split 4 ways: the arrival's two round trips and the 32 values of a thread, slices in flight;
  // two block barriers a fragment where the epilogue stages through the block (portable, MFMA).
  c = design_chain(64, 64, 32, 128, 32, 1, 8, 4, 4, 2);
  CHECK(c.epilogue_rounds == 2 + 32);
  CHECK(c.epilogue_barriers == 2 + 4 * 2);
}
