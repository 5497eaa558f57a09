// Compiled truth: see compile_report.h.
#include "compile_report.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

#include "base/parallel.h"
#include "codegen/codegen.h"
#include "gpusim/device_plan.h"
#include "gpusim/kernel_work.h"
#include "gpusim/wording.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif

namespace gpusim::exec {

Result<std::string> cuda_arch_of(const GpuProfile& gpu) {
  const std::string& a = gpu.architecture;
  const size_t at = a.find("CC ");
  if (at != std::string::npos) {
    size_t i = at + 3;
    std::string major, minor;
    while (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) major += a[i++];
    if (i < a.size() && a[i] == '.') ++i;
    while (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) minor += a[i++];
    if (!major.empty() && !minor.empty()) return "sm_" + major + minor;
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("GPU {} ({}) has no CUDA compute capability in its architecture (\"{}\"): the "
                                "compiled report reads NVRTC's figures, for NVIDIA GPUs; name one, or give {}",
                                gpu.name, gpu.vendor, a, option_ref("arch", "sm_XY")));
}

Result<CompiledReport> compile_report(const Graph& g, const Target& target, const CompileReportOptions& o) {
  const GpuProfile& gpu = target.gpu();
  if (target.space != TileSpace::kGenerated) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("the compiled report compiles the tiles codegen builds; {} is the library menu: "
                                  "give {}",
                                  target.describe(), option_ref("tiles", "generated")));
  }
  std::string arch = o.arch;
  if (arch.empty()) {
    auto a = cuda_arch_of(gpu);
    if (!a) return a.error();
    arch = *a;
  } else if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: \"{}\" is not a real architecture; the compiled figures are read for one, "
                                  "sm_XY (sm_80, sm_90, ...)",
                                  option_ref("arch"), arch));
  }
#ifndef GPUSIM_HAVE_CUDA
  (void)g;
  return make_error(ErrorCode::kUnavailable,
                    "this gpusim was built without the CUDA backend (the CUDA toolkit's headers were absent at "
                    "configure time), so it has no NVRTC to compile with");
#else
  auto info = backend::cuda::nvrtc_info();
  if (!info) return info.error();
  CompiledReport r;
  r.gpu = gpu.name;
  r.arch = arch;
  r.compiler = "NVRTC " + info->version;
  const DeviceModel& d = target.device;
  bool fp16 = false;
  for (const Tensor& t : g.tensors) fp16 = fp16 || t.dtype == DType::kFloat16;
  const codegen::Options opts = codegen::target_options(d, fp16);
  const GraphIndex idx = index_graph(g);
  const Plan plan = o.plan ? *o.plan : eager_plan(g, target, idx);
  r.kernels.resize(plan.kernels.size());
  std::vector<backend::KernelSource> sources(plan.kernels.size());
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel& pk = plan.kernels[i];
    CompiledKernel& k = r.kernels[i];
    k.index = static_cast<int>(i);
    k.tile = pk.tile;
    const KernelWork w = plan_kernel_work(g, idx, pk);
    k.priced_on_matrix_units = kernel_cost(w, pk.tile, d).matrix_units;
    k.assumed = assumed_residency(w, pk.tile, d);
    auto gen = codegen::generate(g, idx, pk, opts);
    if (!gen) {
      k.skipped = gen.error().message;
      continue;
    }
    k.name = gen->name;
    k.cls = gen->cls;
    k.matrix_path = std::string(codegen::matrix_path_name(gen->matrix));
    k.compiled.threads = static_cast<int>(gen->block[0] * gen->block[1] * gen->block[2]);
    sources[i] = gen->source(backend::Language::kCudaCpp);
  }
  // Each distinct text once (repeated blocks of a model generate the same kernels), in parallel.
  std::map<uint64_t, size_t> first;
  std::vector<size_t> unique;
  std::vector<size_t> same(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].code.empty()) continue;
    const auto [it, added] = first.emplace(backend::source_hash(sources[i]), i);
    same[i] = it->second;
    if (added) unique.push_back(i);
  }
  std::vector<Result<backend::cuda::CudaResources>> res(sources.size(), make_error(ErrorCode::kInternal, ""));
  base::for_each_index(unique.size(), o.threads,
                       [&](size_t u) { res[unique[u]] = backend::cuda::cuda_resources(sources[unique[u]], arch); });
  for (size_t i = 0; i < sources.size(); ++i) {
    CompiledKernel& k = r.kernels[i];
    if (sources[i].code.empty()) continue;
    const auto& got = res[same[i]];
    if (!got) return got.error();
    const backend::cuda::CudaResources& c = *got;
    k.compiled = residency(d, k.compiled.threads, c.registers, c.static_smem_bytes);
    k.stack_bytes = c.stack_bytes;
    k.spill_store_bytes = c.spill_store_bytes;
    k.spill_load_bytes = c.spill_load_bytes;
    k.mma = c.mma;
    k.wmma = c.wmma;
    k.ldmatrix = c.ldmatrix;
    k.cp_async = c.cp_async;
    k.ld_global = c.ld_global;
    k.st_global = c.st_global;
    k.ld_shared = c.ld_shared;
    k.st_shared = c.st_shared;
    k.atomics = c.atomics;
    ++r.compiled;
    if (k.compiled.ctas_per_unit == k.assumed.ctas_per_unit) {
      ++r.occupancy_as_assumed;
    } else {
      k.flags.push_back("occupancy");
    }
    if (k.spill_store_bytes > 0 || k.spill_load_bytes > 0) {
      k.flags.push_back("spills");
      ++r.spilling;
    }
    if (k.priced_on_matrix_units && k.mma + k.wmma == 0) {
      k.flags.push_back("no matrix instructions");
      ++r.missing_matrix;
    }
  }
  return r;
#endif
}

}  // namespace gpusim::exec
