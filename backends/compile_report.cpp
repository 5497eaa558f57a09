// Compiled truth: see compile_report.h.
#include "compile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "base/parallel.h"
#include "codegen/codegen.h"
#include "codegen/compiled_figures.h"
#include "gpusim/device_plan.h"
#include "gpusim/kernel_work.h"
#include "gpusim/wording.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/hiprtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_VULKAN
#include "vulkan/spirv_figures.h"
#endif

namespace gpusim::exec {
namespace {

// What one compiler says of one kernel, in the report's terms.
struct Figures {
  int registers = 0, smem_bytes = 0;
  int threads = 0;  // the workgroup's size where the binary states it (SPIR-V); 0: the generator's block
  BinaryFigures binary;
};

using Compile = std::function<Result<Figures>(const backend::KernelSource&)>;

// The memory instruction counts both compilers' figures have (CudaResources, HipResources).
template <typename Resources>
void memory_counts(const Resources& c, BinaryFigures& k) {
  k.ld_global = c.ld_global;
  k.st_global = c.st_global;
  k.ld_shared = c.ld_shared;
  k.st_shared = c.st_shared;
  k.atomics = c.atomics;
}

Compile nvrtc_compile(const std::string& arch, std::string* compiler, Status* available) {
#ifdef GPUSIM_HAVE_CUDA
  auto info = backend::cuda::nvrtc_info();
  if (!info) {
    *available = info.error();
    return {};
  }
  *compiler = "NVRTC " + info->version;
  return [arch](const backend::KernelSource& src) -> Result<Figures> {
    auto c = backend::cuda::cuda_resources(src, arch);
    if (!c) return c.error();
    Figures f;
    f.registers = c->registers;
    f.smem_bytes = c->static_smem_bytes;
    BinaryFigures& k = f.binary;
    k.stack_bytes = c->stack_bytes;
    k.spill_store_bytes = c->spill_store_bytes;
    k.spill_load_bytes = c->spill_load_bytes;
    k.mma = c->mma;
    k.wmma = c->wmma;
    k.ldmatrix = c->ldmatrix;
    k.cp_async = c->cp_async;
    memory_counts(*c, k);
    k.code_unavailable = c->sass_unavailable;
    if (c->sass_read) {  // what runs: the SASS's counts replace the PTX's
      const MachineCodeRange& all = c->sass.all;
      k.code_read = true;
      k.code = c->sass;
      k.disassembler = c->disassembler;
      k.mma = all.matrix;
      k.wmma = 0;
      k.ldmatrix = all.ldsm;
      k.cp_async = all.ldgsts;
      k.ld_global = all.ld_global;
      k.st_global = all.st_global;
      k.ld_shared = all.ld_shared;
      k.st_shared = all.st_shared;
      k.atomics = all.atomics;
    }
    return f;
  };
#else
  (void)arch;
  (void)compiler;
  *available = make_error(ErrorCode::kUnavailable,
                          "this gpusim was built without the CUDA backend (the CUDA toolkit's headers were absent at "
                          "configure time), so it has no NVRTC to compile with");
  return {};
#endif
}

Compile hiprtc_compile(const std::string& arch, std::string* compiler, Status* available) {
#ifdef GPUSIM_HAVE_HIP
  auto info = backend::hip::hiprtc_info();
  if (!info) {
    *available = info.error();
    return {};
  }
  *compiler = "hiprtc (ROCm " + info->version + ")";
  return [arch](const backend::KernelSource& src) -> Result<Figures> {
    auto c = backend::hip::hip_resources(src, arch);
    if (!c) return c.error();
    Figures f;
    f.registers = c->vgprs;
    f.smem_bytes = c->lds_bytes;
    BinaryFigures& k = f.binary;
    k.stack_bytes = c->scratch_bytes;
    k.spilled_registers = c->vgpr_spills + c->sgpr_spills;
    k.instructions_read = !c->disassembler.empty();
    k.wmma = c->wmma;
    k.mfma = c->mfma;
    memory_counts(*c, k);
    if (c->code_read) {  // the machine code's loops, main loop and epilogue (hip/amdgcn.h)
      const MachineCodeRange& all = c->code.all;
      k.code_read = true;
      k.code = c->code;
      k.disassembler = c->disassembler;
      k.ld_global = all.ld_global;
      k.st_global = all.st_global;
      k.ld_shared = all.ld_shared;
      k.st_shared = all.st_shared;
      k.atomics = all.atomics;
    }
    return f;
  };
#else
  (void)arch;
  (void)compiler;
  *available = make_error(ErrorCode::kUnavailable,
                          "this gpusim was built without the HIP backend (the HIP headers were absent at configure "
                          "time), so it has no hiprtc to compile with");
  return {};
#endif
}

Compile spirv_compile(std::string* compiler, Status* available) {
#ifdef GPUSIM_HAVE_VULKAN
  auto cc = backend::vulkan::GlslCompiler::create(true);
  if (!cc) {
    *available = cc.error();
    return {};
  }
  *compiler = cc->describe();
  auto shared = std::make_shared<backend::vulkan::GlslCompiler>(std::move(*cc));
  return [shared](const backend::KernelSource& src) -> Result<Figures> {
    auto words = shared->compile(src);
    if (!words) return words.error();
    auto c = backend::vulkan::reflect_spirv(*words);
    if (!c) {
      return make_error(ErrorCode::kInternal,
                        fmt::format("kernel \"{}\": {} (libshaderc's output; a bug)", src.name, c.error().message));
    }
    Figures f;
    f.smem_bytes = c->workgroup_bytes;
    f.threads = c->threads();
    BinaryFigures& k = f.binary;
    k.registers_read = false;
    k.coop_matrix = c->coop_matrix;
    memory_counts(*c, k);
    return f;
  };
#else
  (void)compiler;
  *available = make_error(ErrorCode::kUnavailable,
                          "this gpusim was built without the Vulkan backend (libshaderc or the Vulkan headers were "
                          "absent at configure time), so it has no GLSL compiler to build SPIR-V with");
  return {};
#endif
}

}  // namespace

Result<CompiledSource> compile_cuda_source(const std::string& text, const std::string& arch, const std::string& where) {
  static constexpr std::string_view kEntry = "__global__ void";
  size_t at = text.find(kEntry);
  if (at == std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: no __global__ function: give a CUDA C++ kernel (the .cu files "
                                  "`gpusim codegen report --sources` writes)",
                                  where));
  }
  // The entry point's name: the identifier after __launch_bounds__(...), if any, before its parameters.
  size_t p = at + kEntry.size();
  auto skip_space = [&] {
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
  };
  skip_space();
  if (text.compare(p, 17, "__launch_bounds__") == 0) {
    const size_t close = text.find(')', p);
    p = close == std::string::npos ? text.size() : close + 1;
    skip_space();
  }
  const size_t b = p;
  while (p < text.size() && (std::isalnum(static_cast<unsigned char>(text[p])) || text[p] == '_')) ++p;
  const size_t e = p;
  skip_space();
  if (b == e || p >= text.size() || text[p] != '(') {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: the __global__ function has no name gpusim can read", where));
  }
  if (!(arch.rfind("sm_", 0) == 0 && arch.size() >= 5)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} is not an NVIDIA architecture; a CUDA source compiles for sm_XY (sm_80, sm_90)",
                                  where, option_ref("arch", arch)));
  }
  CompiledSource out;
  out.kernel = text.substr(b, e - b);
  out.arch = arch;
  Status available = Ok{};
  const Compile compile = nvrtc_compile(arch, &out.compiler, &available);
  if (!available) return available.error();
  backend::KernelSource src;
  src.name = out.kernel;
  src.language = backend::Language::kCudaCpp;
  src.code = text;
  auto f = compile(src);
  if (!f) return make_error(f.error().code, fmt::format("{}: {}", where, f.error().message));
  out.registers = f->registers;
  out.smem_bytes = f->smem_bytes;
  out.binary = f->binary;
  return out;
}

std::vector<std::string> machine_code_gates(const BinaryFigures& b) {
  std::vector<std::string> failed;
  const MachineCodeFigures& c = b.code;
  if (!b.code_read || !c.has_main_loop || c.main_loop.matrix == 0) return failed;
  const MachineCodeRange& m = c.main_loop;
  if (m.ldgsts == 0 && m.loads_in_flight < std::min(4, m.ld_global)) {
    failed.push_back(fmt::format("loads in flight: the main loop's {} global loads wait {} times, at most {} in flight",
                                 m.ld_global, m.load_waits, m.loads_in_flight));
  }
  if (c.epilogue.barriers > 2) {
    failed.push_back(fmt::format("epilogue barriers: {} block barriers after the main loop", c.epilogue.barriers));
  }
  if (c.volatile_loads_in_loops > 0) {
    failed.push_back(fmt::format("volatile loads: {} volatile global loads inside loops", c.volatile_loads_in_loops));
  }
  return failed;
}

std::vector<CompiledKernelRecord> compiled_records(const CompiledReport& r, const std::string& model) {
  std::vector<CompiledKernelRecord> out;
  std::set<std::string> seen;  // repeated blocks of a model compile the same kernel
  for (const CompiledKernel& k : r.kernels) {
    if (!k.skipped.empty() || !k.binary.registers_read || k.compiled.registers <= 0) continue;
    if (!seen.insert(k.figures_key).second) continue;
    CompiledKernelRecord c;
    c.arch = r.arch;
    c.key = k.figures_key;
    c.compiler = r.compiler;
    c.kernel = k.name;
    c.op_class = k.cls;
    c.tile = tile_notation(k.tile);
    c.gpu = r.gpu;
    c.model = model;
    c.threads = k.compiled.threads;
    c.registers = k.compiled.registers;
    c.smem_bytes = static_cast<int>(k.compiled.smem_bytes);
    c.spill_bytes = k.binary.spill_bytes();
    out.push_back(std::move(c));
  }
  return out;
}

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

Result<std::string> hip_arch_of(const GpuProfile& gpu) {
  const std::string& a = gpu.architecture;
  const size_t at = a.find("gfx");
  if (at != std::string::npos) {
    size_t end = at + 3;
    while (end < a.size() && std::isxdigit(static_cast<unsigned char>(a[end]))) ++end;
    if (end > at + 3) return a.substr(at, end - at);
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("GPU {} ({}) names no AMD target in its architecture (\"{}\"): the compiled report "
                                "reads hiprtc's figures for a gfxNNN target; name one, or give {}",
                                gpu.name, gpu.vendor, a, option_ref("arch", "gfxNNN")));
}

Result<CompiledReport> compile_report(const Graph& g, const Target& target, const CompileReportOptions& o) {
  const GpuProfile& gpu = target.gpu();
  if (target.space != TileSpace::kGenerated) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("the compiled report compiles the tiles codegen builds; {} is the library menu: "
                                  "give {}",
                                  target.describe(), option_ref("tiles", "generated")));
  }
  const std::string vendor = codegen::profile_vendor(gpu);
  const bool amd = vendor == "amd";
  std::string arch = o.arch;
  if (arch.empty()) {
    if (amd || vendor == "nvidia") {
      auto a = amd ? hip_arch_of(gpu) : cuda_arch_of(gpu);
      if (!a) return a.error();
      arch = *a;
    } else {
      arch = "spirv";  // Intel, Apple, ...: the Vulkan backend runs their kernels
    }
  }
  const bool cuda = arch.rfind("sm_", 0) == 0 && arch.size() >= 5 &&
                    std::all_of(arch.begin() + 3, arch.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  const bool hip = arch.rfind("gfx", 0) == 0 && arch.size() >= 6;
  const bool spirv = arch == "spirv";
  if (!cuda && !hip && !spirv) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: \"{}\" is not a real architecture; the compiled figures are read for one, "
                                  "sm_XY for NVIDIA (sm_80, sm_90, ...), gfxNNN for AMD (gfx90a, gfx1030, ...) or "
                                  "spirv for Vulkan",
                                  option_ref("arch"), arch));
  }
  const DeviceModel& d = target.device;
  bool fp16 = false;
  for (const Tensor& t : g.tensors) fp16 = fp16 || t.dtype == DType::kFloat16;
  codegen::Options opts = codegen::target_options(d, fp16);
  if (spirv && opts.matrix != codegen::MatrixPath::kNone) {
    // The plan's tiles are fitted to the GPU's CUDA or HIP matrix path, which GLSL has no form of.
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: GPU {}'s kernels are generated for {} (its {} backend), which SPIR-V has no "
                                  "form of; give {} for {}, or name a GPU without that matrix path for spirv",
                                  option_ref("arch", "spirv"), gpu.name, codegen::matrix_path_name(opts.matrix),
                                  amd ? "HIP" : "CUDA", option_ref("arch", amd ? "gfxNNN" : "sm_XY"), gpu.name));
  }
  if (cuda && opts.tf32 && !fp16 && std::atoi(arch.c_str() + 3) < 80) {
    // The target's options follow the profile (an Ampere or newer GPU); the architecture asked predates TF32.
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: GPU {}'s fp32 GEMMs and convolutions are generated with wmma's TF32 "
                                  "fragments, which {} does not have (sm_80 and newer do); give {} of sm_80 or "
                                  "newer, or leave out {}",
                                  option_ref("allow_tf32"), gpu.name, option_ref("arch", arch), option_ref("arch"),
                                  option_ref("allow_tf32")));
  }
  if (!spirv && hip != amd) {
    // The kernels are generated for the GPU's own matrix path (wmma on NVIDIA, MFMA on CDNA).
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} is an {} architecture, and GPU {} is {}'s: its kernels are generated for "
                                  "it; give {} for {}, or a profile of the other vendor",
                                  option_ref("arch"), arch, hip ? "AMD" : "NVIDIA", gpu.name, gpu.vendor,
                                  option_ref("arch", amd ? "gfxNNN" : (vendor == "nvidia" ? "sm_XY" : "spirv")), gpu.name));
  }
  CompiledReport r;
  Status available = Ok{};
  const Compile compile = cuda  ? nvrtc_compile(arch, &r.compiler, &available)
                          : hip ? hiprtc_compile(arch, &r.compiler, &available)
                                : spirv_compile(&r.compiler, &available);
  if (!available) return available.error();
  r.gpu = gpu.name;
  r.arch = arch;
  const GraphIndex idx = index_graph(g);
  const Plan plan = o.plan ? *o.plan : eager_plan(g, target, idx);
  r.kernels.resize(plan.kernels.size());
  std::vector<backend::KernelSource> sources(plan.kernels.size());
  std::vector<std::string> keys(plan.kernels.size());
  codegen::CompiledFigureTable figures(arch);
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel& pk = plan.kernels[i];
    CompiledKernel& k = r.kernels[i];
    k.index = static_cast<int>(i);
    k.tile = pk.tile;
    if (!pk.nodes.empty()) k.node = g.nodes[static_cast<size_t>(pk.nodes.front())].name;
    const KernelWork w = plan_kernel_work(g, idx, pk);
    const KernelCost planned = kernel_cost(w, pk.tile, d);
    k.priced_on_matrix_units = planned.matrix_units;
    k.planned_us = planned.total_us;
    const TileConfig built = codegen::TargetCapability(opts).built(w, pk.tile);
    k.chain = built.chain;
    k.built_us = built.chain.known() ? kernel_cost(w, built, d).total_us : planned.total_us;
    // The model's own estimate, not a compiled figure an earlier report stored for the tile.
    TileConfig estimated = pk.tile;
    estimated.registers = 0;
    k.assumed = assumed_residency(w, estimated, d);
    keys[i] = codegen::compiled_figures_key(w, pk.tile, opts);
    k.figures_key = keys[i];
    auto gen = codegen::generate(g, idx, pk, opts);
    if (!gen) {
      k.skipped = gen.error().message;
      continue;
    }
    k.name = gen->name;
    k.cls = gen->cls;
    k.matrix_path = std::string(codegen::matrix_path_name(gen->matrix));
    k.compiled.threads = static_cast<int>(gen->block[0] * gen->block[1] * gen->block[2]);
    sources[i] = gen->source(spirv ? backend::Language::kGlsl : backend::Language::kCudaCpp);
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
  std::vector<Result<Figures>> res(sources.size(), make_error(ErrorCode::kInternal, ""));
  base::for_each_index(unique.size(), o.threads, [&](size_t u) { res[unique[u]] = compile(sources[unique[u]]); });
  for (size_t i = 0; i < sources.size(); ++i) {
    CompiledKernel& k = r.kernels[i];
    if (sources[i].code.empty()) continue;
    const auto& got = res[same[i]];
    if (!got) return got.error();
    k.binary = got->binary;
    if (o.keep_sources) k.source = sources[i].code;
    const int threads = got->threads > 0 ? got->threads : k.compiled.threads;
    k.compiled = residency(d, threads, k.binary.registers_read ? got->registers : k.assumed.registers, got->smem_bytes);
    if (got->registers > 0) figures.put(keys[i], {got->registers, got->smem_bytes, k.binary.spill_bytes(), r.compiler});
    ++r.compiled;
    if (k.compiled.ctas_per_unit == k.assumed.ctas_per_unit) {
      ++r.occupancy_as_assumed;
    } else {
      k.flags.push_back("occupancy");
    }
    if (k.binary.spill_bytes() > 0) {
      k.flags.push_back("spills");
      ++r.spilling;
    }
    if (k.binary.instructions_read && k.priced_on_matrix_units && k.binary.matrix_instructions() == 0) {
      k.flags.push_back("no matrix instructions");
      ++r.missing_matrix;
    }
    if (k.binary.code_read) {
      r.disassembler = k.binary.disassembler;
    } else if (r.code_unavailable.empty()) {
      r.code_unavailable = k.binary.code_unavailable;
    }
    if (k.binary.code_read && k.binary.code.has_main_loop && k.binary.code.main_loop.matrix > 0) {
      ++r.matrix_kernels;
      k.gate_failures = machine_code_gates(k.binary);
      if (k.gate_failures.empty()) {
        ++r.gates_passed;
      } else {
        k.flags.push_back("machine code");
      }
    }
  }
  if (o.store_figures && spirv) {
    r.figures_not_stored = "SPIR-V states no registers (the driver chooses them when it builds the pipeline on the "
                           "device), and registers are what the table adds to the model's own figures";
  } else if (o.store_figures) {
    auto stored = codegen::store_compiled_figures(figures);
    if (stored) {
      r.figures_path = stored->string();
    } else {
      r.figures_not_stored = stored.error().message;
    }
  }
  return r;
}

}  // namespace gpusim::exec
