// Test support: running generated code on the device backends and comparing what it writes with
// the CPU reference. Two levels:
//  - one generated kernel (check_kernel): codegen::generate for a PlanKernel, NVRTC / fp16 GLSL
//    compile checks where asked, then on every device present a launch with seeded random inputs
//    and every other buffer pre-filled with NaN (an int poison for int buffers), so an element
//    the kernel forgets to write fails the element-wise comparison;
//  - a whole Plan through the executor (run_plan_against_reference): exec::run_plan beside
//    cpu::run_reference with the same weights and seed, giving each output's relative L2 error.
// Plus the plan builders these tests share (named nodes, every device node, one kernel per op).
// Assertions FAIL/REQUIRE inside the current test; device and compiler checks skip with a WARN
// where the backend or NVRTC is absent.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "codegen.h"
#include "executor.h"
#include "gpusim/kernel_work.h"
#include "gpusim/plan.h"
#include "reference.h"
#include "support/devices.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif

namespace gpusim::test {

// ---- plans --------------------------------------------------------------------------------------

// A plan kernel of the named nodes (in graph order), anchored on `anchor`.
inline PlanKernel plan_kernel(const Graph& g, const std::vector<std::string>& names, const std::string& anchor,
                              TileConfig tile = {}, std::vector<std::string> fusions = {}) {
  PlanKernel k;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::string& n : names) {
      if (g.nodes[i].name == n) k.nodes.push_back(static_cast<int>(i));
    }
  }
  REQUIRE(k.nodes.size() == names.size());
  for (size_t p = 0; p < k.nodes.size(); ++p) {
    if (g.nodes[static_cast<size_t>(k.nodes[p])].name == anchor) k.anchor = static_cast<int>(p);
  }
  k.tile = tile;
  k.fusions = std::move(fusions);
  classify_kernel(g, index_graph(g), k);
  return k;
}

// A plan kernel of every node that runs on the device, in graph order, anchored on the first.
inline PlanKernel all_device_nodes(const Graph& g) {
  PlanKernel k;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (runs_on_device(g, g.nodes[i])) k.nodes.push_back(static_cast<int>(i));
  }
  REQUIRE(!k.nodes.empty());
  classify_kernel(g, index_graph(g), k);
  return k;
}

// Eager execution: one plan kernel per node that runs on the device.
inline Plan one_kernel_per_op(const Graph& g) {
  Plan p;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!runs_on_device(g, g.nodes[i])) continue;
    PlanKernel k;
    k.nodes = {static_cast<int>(i)};
    p.kernels.push_back(k);
  }
  classify_kernels(g, p);
  return p;
}

// ---- one generated kernel -----------------------------------------------------------------------

// Which compilers see a kernel beside the device runs (NVRTC takes ~0.2 s a kernel, so callers
// pick representative cases). kVulkanOnly: none; kCuda: the CUDA text with NVRTC (sm_80) in fp32
// storage; kCudaAndFp16: in fp32 and fp16 storage, and the fp16 GLSL with the Vulkan backend's
// compiler where the device has fp16 storage.
enum class Compile { kVulkanOnly, kCuda, kCudaAndFp16 };

inline void check_compiles(const Graph& g, const PlanKernel& pk, Compile what) {
  if (what == Compile::kVulkanOnly) return;
  std::vector<codegen::Storage> storages = {codegen::Storage::kF32};
  if (what == Compile::kCudaAndFp16) storages.push_back(codegen::Storage::kF16);
#ifdef GPUSIM_HAVE_CUDA
  std::string why;
  if (backend::cuda::nvrtc_available(&why)) {
    for (codegen::Storage st : storages) {
      codegen::Options o;
      o.float_storage = st;
      auto k = codegen::generate(g, pk, o);
      REQUIRE(k);
      const backend::KernelSource src = k->source(backend::Language::kCudaCpp);
      std::string log;
      auto bin = backend::cuda::compile_cuda(src, "sm_80", &log);
      INFO(src.code << "\n" << log);
      REQUIRE(bin);
    }
  } else {
    WARN("NVRTC compile check skipped: " << why);
  }
#else
  WARN("NVRTC compile check skipped: the CUDA backend is not built");
#endif
  if (what != Compile::kCudaAndFp16) return;
  if (backend::Backend* dev = device("vulkan")) {
    codegen::Options o;
    o.float_storage = codegen::Storage::kF16;
    auto k = codegen::generate(g, pk, o);
    REQUIRE(k);
    const backend::KernelSource src = k->source(backend::Language::kGlsl);
    INFO(src.code);
    if (dev->info().fp16) {
      REQUIRE(dev->compile(src));
    } else {
      WARN("fp16 GLSL compile check skipped: no fp16 storage on " << dev->info().name);
    }
  }
}

using InputValues = std::map<std::string, std::vector<double>>;  // input name -> values (repeated to fill)

struct KernelCheck {
  // Inputs not named here are random: floats in [-1, 1] (an input named "var", a
  // BatchNormalization variance, in [0.1, 1.1]), ints in {0, 1, 2}.
  InputValues values;
  // An element passes when |got - reference| <= abs_tol + rel_tol * |reference|.
  double abs_tol = 1e-4;
  double rel_tol = 2e-4;
  uint64_t seed = 7;
};

constexpr int32_t kIntPoison = -1234567891;

// Generates the kernel for `dev`'s limits and runs it (GLSL on Vulkan, CUDA C++ elsewhere); every
// graph output it writes must match the CPU reference element by element, and it must write one.
inline void check_kernel_on_device(backend::Backend& dev, const Graph& g, const PlanKernel& pk,
                                   const KernelCheck& c = {}) {
  codegen::Options o;
  o.max_threads = dev.info().max_threads_per_group;
  o.max_shared_bytes = dev.info().max_shared_bytes;
  auto k = codegen::generate(g, pk, o);
  REQUIRE(k);
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<cpu::HostTensor> inputs;
  for (TensorId t : g.inputs) {
    const Tensor& tt = g.tensor(t);
    cpu::HostTensor h;
    h.dtype = tt.dtype;
    h.shape = tt.shape;
    h.allocate();
    const auto it = c.values.find(tt.name);
    const bool positive = tt.name == "var";
    for (int64_t e = 0; e < h.elements(); ++e) {
      const auto u = static_cast<size_t>(e);
      double v = 0;
      if (it != c.values.end()) {
        v = it->second[u % it->second.size()];
      } else if (h.is_real()) {
        const double r = uni(rng);
        v = static_cast<double>(static_cast<float>(positive ? 0.1 + std::fabs(r) : r));
      } else {
        v = static_cast<double>(rng() % 3);
      }
      if (h.is_real()) h.r[u] = v;
      else h.i[u] = static_cast<int64_t>(v);
    }
    inputs.push_back(std::move(h));
  }
  auto ref = cpu::run_reference(g, inputs);
  REQUIRE(ref);
  const GraphIndex idx = index_graph(g);
  std::vector<backend::Buffer> bufs;
  for (const codegen::Arg& a : k->args) {
    const bool is_int = a.storage == codegen::Storage::kI32;
    // Scratch (split-K partial sums and counters) starts at zero, as the executor allocates it.
    const bool scratch = a.scratch != codegen::Scratch::kNone;
    std::vector<double> data(static_cast<size_t>(a.elements), scratch ? 0.0 : std::numeric_limits<double>::quiet_NaN());
    bool known = a.written;
    for (size_t i = 0; i < g.inputs.size() && !scratch; ++i) {
      if (idx.root[static_cast<size_t>(g.inputs[i])] != a.tensor) continue;
      for (size_t e = 0; e < data.size(); ++e) data[e] = inputs[i].real(static_cast<int64_t>(e));
      known = true;
    }
    if (const auto* v = scratch ? nullptr : &g.tensor(a.tensor).value; v && *v && !a.written) {
      for (size_t e = 0; e < data.size() && static_cast<int64_t>(e) < (*v)->size(); ++e) {
        data[e] = (*v)->as_real(static_cast<int64_t>(e));
      }
      known = true;
    }
    INFO("buffer of " << (scratch ? std::string("scratch") : g.tensor(a.tensor).name));
    REQUIRE(known);  // a buffer the kernel reads is an input or a constant
    auto b = dev.allocate(static_cast<uint64_t>(std::max<int64_t>(a.elements, 1)) * 4);
    REQUIRE(b);
    std::vector<float> f(data.size());
    std::vector<int32_t> n(data.size());
    for (size_t e = 0; e < data.size(); ++e) {
      f[e] = static_cast<float>(data[e]);
      n[e] = std::isnan(data[e]) ? kIntPoison : static_cast<int32_t>(data[e]);
    }
    REQUIRE(dev.upload(*b, is_int ? static_cast<const void*>(n.data()) : f.data(), data.size() * 4));
    bufs.push_back(*b);
  }
  const backend::KernelSource src =
      k->source(dev.info().backend == "vulkan" ? backend::Language::kGlsl : backend::Language::kCudaCpp);
  INFO(dev.info().backend << " kernel:\n" << src.code);
  auto h = dev.compile(src);
  REQUIRE(h);
  REQUIRE(dev.launch(*h, k->groups, bufs, false));
  REQUIRE(dev.synchronize());
  int compared = 0;
  for (size_t ai = 0; ai < k->args.size(); ++ai) {
    const codegen::Arg& a = k->args[ai];
    if (!a.written || a.scratch != codegen::Scratch::kNone) continue;
    for (size_t oi = 0; oi < g.outputs.size(); ++oi) {
      if (idx.root[static_cast<size_t>(g.outputs[oi])] != a.tensor) continue;
      const cpu::HostTensor& want = ref->outputs[oi];
      REQUIRE(want.elements() == a.elements);
      std::vector<double> got(static_cast<size_t>(a.elements));
      if (a.storage == codegen::Storage::kI32) {
        std::vector<int32_t> d(got.size());
        REQUIRE(dev.download(bufs[ai], d.data(), d.size() * 4));
        for (size_t e = 0; e < d.size(); ++e) got[e] = d[e];
      } else {
        std::vector<float> d(got.size());
        REQUIRE(dev.download(bufs[ai], d.data(), d.size() * 4));
        for (size_t e = 0; e < d.size(); ++e) got[e] = d[e];
      }
      double worst = 0;
      int64_t worst_at = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        const double w = want.real(static_cast<int64_t>(e));
        double err = std::fabs(got[e] - w) / (c.abs_tol + c.rel_tol * std::fabs(w));
        if (std::isinf(w) && got[e] == w) err = 0;
        if (!(err <= worst)) {
          worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
          worst_at = static_cast<int64_t>(e);
          if (std::isnan(err)) break;
        }
      }
      INFO("output " << g.tensor(g.outputs[oi]).name << " element " << worst_at << " of " << got.size() << ": got "
                     << got[static_cast<size_t>(worst_at)] << ", reference " << want.real(worst_at));
      CHECK(worst <= 1.0);
      ++compared;
    }
  }
  CHECK(compared > 0);
  for (const auto& b : bufs) dev.release(b);
}

inline void check_kernel_on_devices(const Graph& g, const PlanKernel& pk, const KernelCheck& c = {}) {
  for (auto& d : devices()) check_kernel_on_device(*d.dev, g, pk, c);
}

// Generates the kernel with the default options (which must succeed), compiles it as `what`
// asks, and runs it on every device backend present (lavapipe in CI; CUDA/HIP on GPUs).
inline void check_kernel(const Graph& g, const PlanKernel& pk, Compile what = Compile::kVulkanOnly,
                         const KernelCheck& c = {}) {
  INFO(g.nodes[static_cast<size_t>(pk.nodes[static_cast<size_t>(pk.anchor)])].op_type);
  REQUIRE(codegen::generate(g, pk));
  check_compiles(g, pk, what);
  check_kernel_on_devices(g, pk, c);
}

// ---- a whole plan through the executor ----------------------------------------------------------

struct PlanRun {
  exec::RunResult run;
  std::vector<double> errors;  // relative L2 error of each graph output against the reference
  bool compared = false;       // false on the null device, which computes nothing

  // The largest error; NaN (an unwritten or mismatched output) wins. 0 when nothing was compared.
  double worst() const {
    double w = 0;
    for (double e : errors) w = std::isnan(e) ? e : std::max(w, e);
    return w;
  }
};

// Runs `plan` on `dev` with `o` (o.poison fills what kernels write with NaN first) and, where the
// device computes (not the null backend), the CPU reference with the same weights and seed.
inline PlanRun run_plan_against_reference(backend::Backend& dev, const Graph& g, const Plan& plan,
                                          const exec::RunOptions& o) {
  auto r = exec::run_plan(dev, g, plan, {}, o);
  {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
  }
  PlanRun out;
  if (dev.info().backend != "null") {
    cpu::RunOptions ro;
    ro.weights = o.weights;
    ro.seed = o.seed;
    auto ref = cpu::run_reference(g, {}, ro);
    {
      INFO((ref ? std::string() : ref.error().message));
      REQUIRE(ref);
    }
    REQUIRE(r->outputs.size() == ref->outputs.size());
    for (size_t k = 0; k < ref->outputs.size(); ++k) out.errors.push_back(exec::relative_l2(r->outputs[k], ref->outputs[k]));
    out.compared = true;
  }
  out.run = std::move(*r);
  return out;
}

}  // namespace gpusim::test
