// Codegen: the elementwise generator's structure (fusion keeps intermediates in registers, stores
// only what escapes), index arithmetic, and — the CI gate for the CUDA and HIP backends, which
// have no GPU there — every kernel generated for every bundled model, eager and fused, compiled
// with NVRTC (sm_80, sm_90) and hiprtc (gfx90a, gfx1030), and their fp16 GEMMs and convolutions on
// matrix units (wmma with NVRTC, MFMA with hiprtc for gfx90a). Numerics are checked by the
// conformance test.
#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include <cctype>

#include "codegen.h"
#include "dialect.h"
#include "generators.h"
#include "gpusim/scheduler.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/hiprtc_compiler.h"
#endif

using namespace gpusim;
constexpr int kF32 = onnx::TensorProto::FLOAT;

TEST_CASE("codegen: an elementwise chain is one kernel storing only what escapes", "[codegen]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{2}}, test::Dim{int64_t{3}}, test::Dim{int64_t{5}}});
  b.node("Sigmoid", {"x"}, {"s"});
  b.node("Mul", {"x", "s"}, {"m"});
  b.initializer("k", kF32, {3, 1});
  b.node("Mul", {"m", "k"}, {"y"});
  b.node("Neg", {"s"}, {"n"});  // reads s outside the chain kernel
  b.output("y");
  b.output("n");
  const Graph g = test::build_graph(b, "cg_chain.onnx");
  PlanKernel k;
  k.nodes = {0, 1, 2};
  auto r = codegen::generate(g, k);
  REQUIRE(r);
  CHECK(r->cls == "elementwise");
  // x, k, s (read by Neg elsewhere) and y; m stays in a register.
  REQUIRE(r->args.size() == 4);
  int written = 0;
  for (const auto& a : r->args) written += a.written;
  CHECK(written == 2);
  CHECK(r->body.find("(i / 5) % 3") != std::string::npos);  // k [3,1] broadcast over [2,3,5]
  for (auto lang : {backend::Language::kGlsl, backend::Language::kCudaCpp}) {
    const auto src = r->source(lang);
    CHECK(src.buffers == 4);
    CHECK(src.code.find("ST") != std::string::npos);
  }
}

TEST_CASE("codegen: an elementwise kernel takes vector_width elements a step with vector accesses", "[codegen]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{2}}, test::Dim{int64_t{6}}, test::Dim{int64_t{16}}});
  b.initializer("y", kF32, {16});    // contiguous over a step: a vector load
  b.initializer("s", kF32, {6, 1});  // one value per 16-element row: loaded per lane
  b.node("Add", {"x", "y"}, {"a"});
  b.node("Mul", {"a", "s"}, {"m"});
  b.node("Less", {"m", "x"}, {"c"});
  b.output("m");
  b.output("c");
  const Graph g = test::build_graph(b, "cg_vector.onnx");
  PlanKernel k;
  k.nodes = {0, 1, 2};
  for (int vw : {1, 2, 4, 8}) {
    k.tile.vector_width = vw;
    for (auto st : {codegen::Storage::kF32, codegen::Storage::kF16}) {
      INFO("vector_width " << vw << " storage " << codegen::storage_name(st));
      codegen::Options o;
      o.float_storage = st;
      auto r = codegen::generate(g, k, o);
      REQUIRE(r);
      // 192 elements in steps of vw, 256 threads a group.
      CHECK(r->groups[0] == static_cast<uint32_t>((192 / vw + 255) / 256));
      // x, y, s, m, c in first-use order; all but s (and only with vw > 1) in vectors of at most 16 bytes.
      REQUIRE(r->args.size() == 5);
      const int chunk = vw == 1 ? 0 : std::min(vw, st == codegen::Storage::kF16 ? 8 : 4);
      for (size_t a = 0; a < 5; ++a) {
        const bool is_s = a == 2;
        const bool is_c = a == 4;  // bool: int32 storage, 4 bytes
        CHECK(r->args[a].vector == (is_s || vw == 1 ? 0 : is_c ? std::min(vw, 4) : chunk));
      }
      for (auto lang : {backend::Language::kGlsl, backend::Language::kCudaCpp}) {
        const std::string code = r->source(lang).code;
        CHECK((code.find("LDV0(") != std::string::npos) == (vw > 1));
        CHECK(code.find("LDV2(") == std::string::npos);
        CHECK((code.find("STV4(") != std::string::npos) == (vw > 1));
        if (lang == backend::Language::kGlsl) CHECK((code.find("buffer BV0") != std::string::npos) == (vw > 1));
      }
#ifdef GPUSIM_HAVE_CUDA
      if (std::string why; backend::cuda::nvrtc_available(&why)) {
        std::string log;
        const auto src = r->source(backend::Language::kCudaCpp);
        INFO(src.code);
        CHECK(backend::cuda::compile_cuda(src, "sm_80", &log));
        INFO(log);
      }
#endif
#ifdef GPUSIM_HAVE_HIP
      if (std::string why; backend::hip::hiprtc_available(&why) && vw == 8) {
        const auto src = r->source(backend::Language::kCudaCpp);
        INFO(src.code);
        CHECK(backend::hip::compile_hip(src, "gfx90a"));
      }
#endif
    }
  }
  // A width that does not divide the elements falls back to one that does.
  const Graph g6 = [&] {
    test::OnnxBuilder b6;
    b6.input("x", kF32, {test::Dim{int64_t{6}}});
    b6.node("Relu", {"x"}, {"y"});
    b6.output("y");
    return test::build_graph(b6, "cg_vector6.onnx");
  }();
  PlanKernel k6;
  k6.nodes = {0};
  k6.tile.vector_width = 8;
  auto r6 = codegen::generate(g6, k6);
  REQUIRE(r6);
  CHECK(r6->args[0].vector == 2);
  CHECK(r6->body.find("* 2;") != std::string::npos);
}

TEST_CASE("codegen: broadcast index arithmetic", "[codegen]") {
  CHECK(codegen::broadcast_index({2, 3, 5}, {2, 3, 5}, "i") == "i");
  CHECK(codegen::broadcast_index({2, 3, 5}, {5}, "i") == "((i % 5))");
  CHECK(codegen::broadcast_index({2, 3, 5}, {}, "i") == "0");
  CHECK(codegen::broadcast_index({2, 3, 5}, {2, 1, 5}, "i") == "((i % 5) + (i / 15) * 5)");
  CHECK(codegen::float_lit(0.5) == "0.5f");
  CHECK(codegen::float_lit(-2) == "(-2.0f)");
  CHECK(codegen::float_lit(1e-5) == "9.99999975e-06f");
}

TEST_CASE("codegen: an op without a generator is refused naming the node", "[codegen][errors]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{4}}});
  b.node("RandomUniformLike", {"x"}, {"y"}, "rng");
  b.output("y");
  const Graph g = test::build_graph(b, "cg_refuse.onnx");
  PlanKernel k;
  k.nodes = {0};
  auto r = codegen::generate(g, k);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(r.error().message, Catch::Contains("node \"rng\" (RandomUniformLike)") && Catch::Contains("host"));
}

namespace {

using Sources = std::map<uint64_t, backend::KernelSource>;

// Every distinct kernel source codegen produces for a model, eager and with every fusion taken;
// and the fp16 GEMM and convolution kernels on the wmma (CUDA) and MFMA (HIP) matrix paths.
void collect(const Graph& g, Sources& out, Sources& wmma, Sources& mfma, int& unsupported) {
  const FusionSpace s(g, test::portable(test::gpu("nvidia-a100-80gb")));
  const GraphIndex idx = index_graph(g);
  for (const Plan& p : {s.eager(), s.build(Decision(s.candidates().size(), 1), SchedulerKind::kGreedy)}) {
    for (const PlanKernel& k : p.kernels) {
      auto r = codegen::generate(g, idx, k);
      if (!r) {
        ++unsupported;
        continue;
      }
      backend::KernelSource src = r->source(backend::Language::kCudaCpp);
      out.emplace(backend::source_hash(src), std::move(src));
      const bool streams = r->cls == "elementwise" || r->cls == "reduction" || r->cls == "normalization";
      if (streams && k.tile.vector_width > 1) {  // the fp16 vector accesses (packed __half2) too
        codegen::Options o;
        o.float_storage = codegen::Storage::kF16;
        if (auto h = codegen::generate(g, idx, k, o)) {
          backend::KernelSource hs = h->source(backend::Language::kCudaCpp);
          out.emplace(backend::source_hash(hs), std::move(hs));
        }
      }
      if (r->cls != "gemm" && r->cls != "conv") continue;
      for (auto [path, set] : {std::pair{codegen::MatrixPath::kWmma, &wmma}, std::pair{codegen::MatrixPath::kMfma, &mfma}}) {
        codegen::Options o;
        o.float_storage = codegen::Storage::kF16;
        o.matrix = path;
        auto m = codegen::generate(g, idx, k, o);
        if (!m || m->matrix != path) continue;  // a direct (depthwise) convolution has no GEMM loop
        backend::KernelSource ms = m->source(backend::Language::kCudaCpp);
        set->emplace(backend::source_hash(ms), std::move(ms));
      }
    }
  }
}

// The kernel's structure: its text with every number replaced by N. Kernels that differ only in
// baked-in shapes, strides and constants share a structure; generators that pick different code
// for different shapes (depthwise vs implicit GEMM, tile variants) give different structures.
std::string structure(const std::string& code) {
  std::string out;
  out.reserve(code.size());
  for (size_t i = 0; i < code.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(code[i]))) {
      while (i + 1 < code.size() && (std::isdigit(static_cast<unsigned char>(code[i + 1])) || code[i + 1] == '.' ||
                                     code[i + 1] == 'e' || code[i + 1] == 'f' || code[i + 1] == 'u')) {
        ++i;
      }
      out += 'N';
    } else {
      out += code[i];
    }
  }
  return out;
}

// Many kernels in one translation unit, so a compiler's fixed start-up cost (NVRTC ~30 ms, hiprtc
// ~200 ms) is paid once per batch instead of once per kernel: the shared prelude once, then each
// kernel in its own namespace with its entry point renamed and its macros undefined after it.
// A batch of wmma kernels starts with the prelude that includes the warp matrix header.
backend::KernelSource batch(const std::vector<const backend::KernelSource*>& ks, size_t first, size_t count,
                            codegen::MatrixPath path) {
  const std::string prem = codegen::prelude(backend::Language::kCudaCpp, true, codegen::MatrixPath::kWmma);
  const std::string pre = codegen::prelude(backend::Language::kCudaCpp, true);
  const std::string pre32 = codegen::prelude(backend::Language::kCudaCpp, false);
  backend::KernelSource out;
  out.name = fmt::format("batch_{}", first);
  out.language = backend::Language::kCudaCpp;
  out.code = path == codegen::MatrixPath::kWmma ? prem : pre;
  for (size_t i = first; i < std::min(ks.size(), first + count); ++i) {
    const backend::KernelSource& k = *ks[i];
    const std::string& p = k.code.rfind(prem, 0) == 0 ? prem : k.code.rfind(pre, 0) == 0 ? pre : pre32;
    std::string text = k.code.substr(p.size());
    const std::string entry = ") " + k.name + "(";
    if (auto at = text.find(entry); at != std::string::npos) text.replace(at, entry.size(), ") " + k.name + fmt::format("_{}(", i));
    out.code += fmt::format("namespace k{} {{\n{}\n}}\n", i, text);
    // Undefine the kernel's macros (LDk/STk, BLOCK_*, any its generator defined).
    size_t pos = 0;
    while ((pos = text.find("#define ", pos)) != std::string::npos) {
      pos += 8;
      size_t end = pos;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
      out.code += "#undef " + text.substr(pos, end - pos) + "\n";
    }
  }
  return out;
}

}  // namespace

// How much of the bundled models' generated code a test compiles: every kernel, one kernel per
// structure, or a fixed sample of those structures (every 4th, plus every matrix-unit structure).
enum class Coverage { kEvery, kStructures, kSample };

void compile_all(Coverage coverage) {
  const bool every = coverage == Coverage::kEvery;
  Sources sources, wmma, mfma;
  int unsupported = 0;
  for (const char* m : {"resnet50.onnx", "mobilenet_v2.onnx", "vit_b_16.onnx", "bert_base_seq128.onnx",
                        "gpt2_prefill_seq512.onnx", "sd15_vae_decoder_512.onnx", "sd15_unet_64x64.onnx"}) {
    collect(test::bundled_model(m), sources, wmma, mfma, unsupported);
  }
  const size_t all = sources.size(), all_matrix = wmma.size() + mfma.size();
  if (!every) {  // one kernel per structure
    // Matrix kernels by the structure of their main loop: their epilogues are the SIMT kernels'
    // text, compiled there.
    for (Sources* set : {&sources, &wmma, &mfma}) {
      std::set<std::string> seen;
      for (auto it = set->begin(); it != set->end();) {
        const std::string& code = it->second.code;
        const std::string key = structure(set == &sources ? code : code.substr(0, code.find("float acc_v")));
        it = seen.insert(key).second ? std::next(it) : set->erase(it);
      }
    }
  }
  if (coverage == Coverage::kSample) {  // SIMT structures: every 4th, in the sources' fixed order
    size_t i = 0;
    for (auto it = sources.begin(); it != sources.end();) it = i++ % 4 == 0 ? std::next(it) : sources.erase(it);
  }
  WARN(all << " distinct generated kernels (eager and fully fused plans of 7 models), compiling "
           << sources.size()
           << (every ? "" : coverage == Coverage::kSample ? " (a quarter of the structures)" : " (one per structure)")
           << "; " << unsupported
           << " plan kernels have no generator and run on the host or unfused; " << all_matrix
           << " fp16 matrix-unit kernels, compiling " << wmma.size() << " wmma and " << mfma.size() << " MFMA");
  CHECK(sources.size() > (every ? 2000u : coverage == Coverage::kSample ? 12u : 50u));
  CHECK(!wmma.empty());
  CHECK(!mfma.empty());
  // What a target compiles: a set of sources and the matrix path of its batches' prelude.
  struct Target {
    std::string name;
    std::function<Result<std::string>(const backend::KernelSource&)> compile;
    const Sources* set;
    codegen::MatrixPath path;
  };
  std::vector<Target> targets;
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; backend::cuda::nvrtc_available(&why)) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      auto nvrtc = [arch](const backend::KernelSource& s) { return backend::cuda::compile_cuda(s, arch); };
      targets.push_back({std::string("nvrtc ") + arch, nvrtc, &sources, codegen::MatrixPath::kNone});
      targets.push_back({std::string("nvrtc wmma ") + arch, nvrtc, &wmma, codegen::MatrixPath::kWmma});
    }
  } else {
    WARN("NVRTC unavailable, CUDA kernels not compiled: " << why);
  }
#else
  WARN("the CUDA backend is not built: CUDA kernels not compiled");
#endif
#ifdef GPUSIM_HAVE_HIP
  if (std::string why; backend::hip::hiprtc_available(&why)) {
    // CDNA2 and RDNA2. The issue asks for gfx1100 (RDNA3); Debian 12's ROCm 5.2 does not know it
    // (its comgr aborts), so RDNA is covered by gfx1030 until a newer ROCm is packaged. MFMA is
    // CDNA's: gfx90a only.
    for (const char* arch : {"gfx90a", "gfx1030"}) {
      auto hiprtc = [arch](const backend::KernelSource& s) { return backend::hip::compile_hip(s, arch); };
      targets.push_back({std::string("hiprtc ") + arch, hiprtc, &sources, codegen::MatrixPath::kNone});
    }
    targets.push_back({"hiprtc mfma gfx90a", [](const backend::KernelSource& s) { return backend::hip::compile_hip(s, "gfx90a"); },
                       &mfma, codegen::MatrixPath::kMfma});
  } else {
    WARN("hiprtc unavailable, HIP kernels not compiled: " << why);
  }
#else
  WARN("the HIP backend is not built: HIP kernels not compiled");
#endif
  constexpr size_t kBatch = 48;
  for (const Target& t : targets) {
    std::vector<const backend::KernelSource*> list;
    for (const auto& [h, s] : *t.set) list.push_back(&s);
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::vector<std::string> failures;
    auto work = [&] {
      for (size_t b = next++; b * kBatch < list.size(); b = next++) {
        if (t.compile(batch(list, b * kBatch, kBatch, t.path))) continue;
        // A batch failed: compile its kernels one by one to name the culprits.
        for (size_t i = b * kBatch; i < std::min(list.size(), (b + 1) * kBatch); ++i) {
          if (auto r = t.compile(*list[i]); !r) {
            std::lock_guard<std::mutex> l(mu);
            failures.push_back(r.error().message);
          }
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned k = 0; k < 2; ++k) pool.emplace_back(work);
    for (auto& th : pool) th.join();
    INFO(t.name << ": " << failures.size() << " of " << list.size() << " failed; first: "
                << (failures.empty() ? std::string("-") : failures.front()));
    CHECK(failures.empty());
  }
}

// The default tier compiles a quarter of the SIMT structures (about 40 s on two cores); the slow
// tier all of them (about 150 s).
TEST_CASE("codegen: a sample of the bundled models' kernel structures compiles with NVRTC and hiprtc", "[compile]") {
  compile_all(Coverage::kSample);
}

TEST_CASE("codegen: every kernel structure of the bundled models compiles with NVRTC and hiprtc", "[compile][slow]") {
  compile_all(Coverage::kStructures);
}

// All ~3,500 kernels: about ten minutes on two cores. Hidden from the default run (and from CI's
// ctest); run it with `gpusim_tests "[.compile-all]"` after changing a generator.
TEST_CASE("codegen: every kernel of the bundled models compiles with NVRTC and hiprtc", "[.compile-all]") {
  compile_all(Coverage::kEvery);
}
