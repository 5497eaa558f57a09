// Compiling kernels for AMD GPUs with hiprtc, without a GPU: the HIP backend's compiler, and the
// compile-only entry point with which CI checks that every generated kernel compiles for the AMD
// architectures gpusim targets.
//
// The source is the same CUDA C++ text the CUDA backend compiles (backends/codegen/dialect.cpp);
// hiprtc defines CUDA's built-ins (threadIdx, __syncthreads, __shared__, __half) and
// __HIPCC_RTC__, under which fp16 kernels include <hip/hip_fp16.h> instead of <cuda_fp16.h>.
//
// hiprtc is loaded with dlopen at first use: from libamdhip64 (ROCm 5: libamdhip64.so.5, which
// exports hiprtc*), else libhiprtc (ROCm 6: libhiprtc.so.6); $GPUSIM_HIPRTC_LIBRARY overrides.
// Two quirks of ROCm 5.2's hiprtc are handled here: its built-in header already holds hip_fp16.h
// without its include guard, so including the file again redefines __half (compile_hip defines the
// guard, and drops it again for a hiprtc that does not need it); and its code-object manager
// crashes the process on a target it does not know (gfx1100, gfx942 in ROCm 5.2), so the target is
// checked against comgr's list of ISAs first.
//
// Usage:
//   auto code = gpusim::backend::hip::compile_hip(src, "gfx90a");
//   if (!code) fmt::print("{}\n", code.error().message);  // names the kernel, the target and the log
#pragma once

#include "machine_code.h"

#include <string>
#include <string_view>
#include <vector>

#include "backend.h"

namespace gpusim::backend::hip {

struct HiprtcInfo {
  std::string library;             // the path dlopen found
  std::string version;             // the HIP runtime's version, "5.2.21153"
  std::vector<std::string> archs;  // the gfx targets the code-object manager knows (empty: unknown)
};

// hiprtc's location, version and targets; kUnavailable (naming libamdhip64/libhiprtc and the
// package that provides them) when hiprtc cannot be loaded.
Result<HiprtcInfo> hiprtc_info();

// Whether hiprtc can be loaded; otherwise *why (if given) says what is missing and how to install it.
bool hiprtc_available(std::string* why);

// Compiles `src` (Language::kCudaCpp) for `arch` ("gfx90a", "gfx1100", also with target features,
// "gfx90a:xnack-") and returns the code object. *log receives the compiler's messages. Errors:
// kUnavailable (no hiprtc), kInvalidArgument (not CUDA C++, malformed target), kUnsupported (a
// target this ROCm's compiler does not know), kDevice (the source does not compile: the message
// names the kernel, the target and carries the log).
Result<std::string> compile_hip(const KernelSource& src, const std::string& arch, std::string* log = nullptr);

// What the compiler built for one kernel on one AMD target, without a device: the code object's
// metadata note (NT_AMDGPU_METADATA, the figures the runtime and occupancy use) and, where an LLVM
// disassembler is installed (llvm-objdump; $GPUSIM_LLVM_OBJDUMP names one), static instruction
// counts of its machine code (the lines of each kind, not executions; loops count once).
struct HipResources {
  std::string arch;
  // .vgpr_count: the vector registers a lane holds as occupancy counts them (on gfx90a and gfx94x
  // the unified file: architectural VGPRs aligned to 4 plus AGPRs; on gfx908 the larger of the two).
  int vgprs = 0;
  int agprs = 0, sgprs = 0;                // .agpr_count, .sgpr_count
  int vgpr_spills = 0, sgpr_spills = 0;    // registers spilled (.vgpr_spill_count, .sgpr_spill_count)
  int scratch_bytes = 0;                   // .private_segment_fixed_size: private memory a lane
  int lds_bytes = 0;                       // .group_segment_fixed_size: static LDS a workgroup
  int wavefront = 0;                       // .wavefront_size
  std::string disassembler;                // empty: not installed, the counts below are not read
  int mfma = 0, wmma = 0;                  // v_mfma_*, v_wmma_* (matrix units: CDNA, RDNA3)
  int ld_global = 0, st_global = 0, ld_shared = 0, st_shared = 0, atomics = 0;
  // The machine code's loops, main loop and epilogue (amdgcn.h), where the disassembly was read.
  bool code_read = false;
  MachineCodeFigures code;
};

// Compiles `src` for `arch` ("gfx90a") and reads the figures above; errors as compile_hip.
Result<HipResources> hip_resources(const KernelSource& src, const std::string& arch);

// Reads kernel `kernel`'s figures from a code object (an AMDGPU ELF). kInvalidArgument naming
// what is wrong when it is not one, has no metadata note, or does not hold the kernel.
Result<HipResources> read_code_object(std::string_view elf, const std::string& kernel);
// Counts the instruction kinds of HipResources in llvm-objdump's disassembly.
void count_amdgcn(const std::string& disassembly, HipResources& r);

}  // namespace gpusim::backend::hip
