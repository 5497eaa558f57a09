// Compiled truth (issue 33): what the compiler builds for each kernel of a plan, read without a
// device, against what the cost model assumes. Per kernel: the generated CUDA text compiled with
// NVRTC for an NVIDIA GPU's architecture (registers a thread, spills and static shared memory from
// ptxas's report; matrix-unit, ldmatrix, cp.async, global and shared memory instructions counted in
// the PTX) or with hiprtc for an AMD one (VGPRs, spills, LDS and scratch from the code object's
// metadata; MFMA/WMMA and memory instructions in its disassembly), or, for a GPU gpusim reaches
// through Vulkan, the GLSL text compiled to SPIR-V with libshaderc (the workgroup's size, its
// shared memory and its instruction mix from the module; no registers or spills, which the
// driver chooses on the device: the model's estimate stands in for them), the blocks a unit keeps
// resident with those figures and with the cost model's own estimates (kernel_cost.h:
// assumed_residency of the tile without compiled figures), and flags for each mismatch, spill, or
// matrix instruction missing where the price assumes matrix units. With store_figures the figures
// go into the kernel cache (codegen/compiled_figures.h), where the cost model finds them.
//
// Usage:
//   auto r = gpusim::exec::compile_report(graph, session.target(gpu, gpusim::TileSpace::kGenerated), {});
//   for (const auto& k : r->kernels) ... k.assumed.ctas_per_unit, k.compiled.ctas_per_unit, k.flags
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/measurement.h"
#include "gpusim/plan.h"
#include "gpusim/result.h"
#include "gpusim/target.h"
#include "machine_code.h"

namespace gpusim::exec {

using backend::MachineCodeFigures;
using backend::MachineCodeRange;

// What the compiler reports of one kernel's binary beyond its registers and shared memory (those
// are in CompiledKernel::compiled): ptxas's report and the PTX, or the AMD code object's metadata
// and its disassembly.
struct BinaryFigures {
  int stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0;  // a thread's
  int spilled_registers = 0;      // AMD: VGPRs and SGPRs spilled (the code object's counts)
  // false for SPIR-V: registers and spills are the driver's to choose on the device, so the
  // compiled residency uses the model's register estimate and the spill figures above are not known.
  bool registers_read = true;
  bool instructions_read = true;  // false: no disassembler for the target, the counts below are not known
  int mma = 0, wmma = 0, mfma = 0, coop_matrix = 0, ldmatrix = 0, cp_async = 0, ld_global = 0, st_global = 0,
      ld_shared = 0, st_shared = 0, atomics = 0;
  int matrix_instructions() const { return mma + wmma + mfma + coop_matrix; }
  // The machine code (machine_code.h) where a disassembler read it (NVIDIA: nvdisasm's SASS, and
  // then the counts above are the SASS's: mma counts HMMA and the like, ldmatrix LDSM, cp_async
  // LDGSTS); else `code_unavailable` says why and the counts above are the PTX's.
  bool code_read = false;
  MachineCodeFigures code;
  std::string disassembler, code_unavailable;
  // A thread's bytes to local memory and back (AMD: spilled registers, 4 bytes each); 0: no spill.
  int spill_bytes() const { return spill_store_bytes + spill_load_bytes + 4 * spilled_registers; }
};

struct CompiledKernel {
  int index = 0;                 // in the plan
  std::string name;              // the generated entry point
  std::string node;              // its first node's name (what `gpusim run` names the kernel)
  std::string cls;               // codegen's class ("gemm", "conv", "elementwise", ...)
  TileConfig tile;
  std::string matrix_path;       // "wmma", "mfma", "portable" or "none"
  std::string figures_key;       // codegen's compiled_figures_key: the kernel cache's and the store's key
  bool priced_on_matrix_units = false;  // kernel_cost's matrix_units
  Residency assumed, compiled;   // compiled: the block's threads, the binary's registers and static shared memory
  BinaryFigures binary;
  std::vector<std::string> flags;  // "occupancy", "spills", "no matrix instructions"
  // The machine-code gates a matrix-path kernel failed (machine_code_gates), empty when it passed
  // them or is not on a matrix path or its code was not read.
  std::vector<std::string> gate_failures;
  // The cost model's price of the kernel (µs, launch included, on the profile's GPU): as the
  // planner priced its tile (planned_us), and as built (built_us): a GEMM-like tile with the chain
  // of the kernel the generator builds for it (`chain`; TargetCapability::built), priced as
  // gpusim's own kernel (core/sim/README.md, "gpusim's own kernels"). Equal for the other classes.
  KernelChain chain;
  double planned_us = 0, built_us = 0;
  std::string skipped;             // why it was not compiled (no generator: it runs on the host)
  std::string source;              // the text compiled (CompileReportOptions::keep_sources): CUDA C++, or GLSL for SPIR-V
};

struct CompiledReport {
  std::string gpu, arch, compiler;  // compiler: "NVRTC 13.0", "hiprtc (ROCm 5.2.21153)", "libshaderc (Vulkan 1.2, SPIR-V 1.6 rev 1)"
  std::vector<CompiledKernel> kernels;
  int compiled = 0, occupancy_as_assumed = 0, spilling = 0, missing_matrix = 0;
  // Kernels whose main loop runs on matrix instructions (their machine code read), and those of
  // them that pass every machine-code gate; code_unavailable: why no machine code was read.
  int matrix_kernels = 0, gates_passed = 0;
  std::string disassembler, code_unavailable;
  // CompileReportOptions::store_figures: the file the compiled figures went to (codegen/
  // compiled_figures.h), or why they were not stored.
  std::string figures_path, figures_not_stored;
};

struct CompileReportOptions {
  std::string arch;           // `arch`: "sm_XY", "gfxNNN" or "spirv"; empty: the profile's own (spirv for a GPU neither NVIDIA nor AMD)
  std::optional<Plan> plan;   // empty: the target's eager plan
  int threads = 0;            // compiles in parallel (0: the machine's cores)
  bool keep_sources = false;  // keep each kernel's CUDA C++ text in CompiledKernel::source
  // Add each kernel's compiled figures (registers, shared memory, spills) to the kernel cache's
  // table for the architecture, which generated targets price those kernels with from then on.
  bool store_figures = false;
};

// The machine-code gates of a kernel whose main loop runs on matrix instructions (issue 51), each
// failed one as "name: what was found":
//   loads in flight   the main loop keeps at least min(4, its global loads) in flight at once, or
//                     copies asynchronously (cp.async)
//   epilogue barriers at most 2 block barriers after the main loop (a split-K arrival's two), none
//                     per output fragment
//   volatile loads    no volatile (strong) global load inside a loop: a split-K reduction reads its
//                     partial sums with loads in flight
// Empty for a kernel not on a matrix path or whose code was not read.
std::vector<std::string> machine_code_gates(const BinaryFigures& b);

// One CUDA C++ kernel's text (a file `gpusim codegen report --sources` wrote, or any kernel with an
// extern "C" __global__ entry point) compiled with NVRTC for `arch` ("sm_XY"): its registers,
// shared memory, spills and instruction counts, and its machine code where nvdisasm reads it.
// `where` names the text in errors. kInvalidArgument without an entry point or for another arch;
// kUnavailable without NVRTC; kDevice when it does not compile (the log attached).
struct CompiledSource {
  std::string kernel, arch, compiler;
  int registers = 0, smem_bytes = 0;
  BinaryFigures binary;
};
Result<CompiledSource> compile_cuda_source(const std::string& text, const std::string& arch, const std::string& where);

// The report's compiled figures as measurement-store records (MeasurementStore::put_compiled), one
// per distinct kernel with compiler-stated registers (none for SPIR-V); `model` names the graph.
std::vector<CompiledKernelRecord> compiled_records(const CompiledReport& r, const std::string& model);

// The architecture NVRTC compiles for a profile: "sm_XY" from its "(CC X.Y)"; kInvalidArgument
// naming the profile when it has none (not an NVIDIA GPU).
Result<std::string> cuda_arch_of(const GpuProfile& gpu);

// The AMD target hiprtc compiles for a profile: "gfxNNN" from its architecture ("CDNA2 (gfx90a)");
// kInvalidArgument naming the profile when it has none.
Result<std::string> hip_arch_of(const GpuProfile& gpu);

// `g` in the float type its kernels store (retype it first for fp16), on a generated `target` (the
// tiles codegen builds: what predict prices and run executes). An sm_XY architecture compiles with
// NVRTC (ptxas's report, the PTX's instructions), a gfxNNN one with hiprtc (the code object's
// metadata, the disassembly's instructions where llvm-objdump is installed), spirv with libshaderc
// (the module's reflection; for GPUs whose generated kernels have no CUDA or HIP matrix path, as
// the Vulkan backend runs them). kInvalidArgument for a library target, an `arch` that is none of
// these, spirv for a GPU whose kernels use wmma or MFMA, or an NVIDIA or AMD GPU with no architecture;
// kUnavailable without the compiler; kUnsupported for a target the installed compiler does not
// know; a kernel that fails to compile fails the report (a codegen bug), naming it.
Result<CompiledReport> compile_report(const Graph& g, const Target& target, const CompileReportOptions& o);

}  // namespace gpusim::exec
