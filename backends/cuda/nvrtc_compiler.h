// Compiling CUDA C++ kernels with NVRTC, without a GPU: the CUDA backend's compiler, and the
// compile-only entry point with which CI (no device, no driver) checks that every generated kernel
// compiles for the architectures gpusim targets.
//
// NVRTC is loaded with dlopen at first use, never linked: $GPUSIM_NVRTC_LIBRARY if set, then
// libnvrtc.so.13, .so.12, .so.11.2, libnvrtc.so from the loader's search path, then the same names
// under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Kernels that use fp16 include <cuda_fp16.h>,
// which NVRTC reads from the toolkit: the include folder beside the library (../include), then
// $CUDA_HOME/include, the toolkit gpusim was built against, /usr/local/cuda/include.
//
// A target is "sm_XY" (a cubin for that GPU; "sm_90a" for arch-specific features) or "compute_XY"
// (PTX that the driver compiles for any newer GPU). Options: C++17, full-precision math (no
// --use_fast_math: the results are checked against the CPU reference).
//
// Usage:
//   std::string log;
//   auto cubin = gpusim::backend::cuda::compile_cuda(src, "sm_80", &log);
//   if (!cubin) fmt::print("{}\n", cubin.error().message);  // names the kernel, target and log
#pragma once

#include <string>
#include <vector>

#include "backend.h"
#include "sass.h"

namespace gpusim::backend::cuda {

struct NvrtcInfo {
  std::string library;             // the path dlopen found
  std::string version;             // "13.0"
  std::vector<std::string> archs;  // the sm_XY targets it supports, oldest first
  std::string include_dir;         // passed as -I (empty when no toolkit headers were found)
};

// NVRTC's location, version and targets; kUnavailable (naming libnvrtc and the CUDA toolkit) when
// no NVRTC library can be loaded.
Result<NvrtcInfo> nvrtc_info();

// Whether NVRTC can be loaded; otherwise *why (if given) says what is missing and how to install it.
bool nvrtc_available(std::string* why);

// Compiles `src` (Language::kCudaCpp) for `arch` and returns the cubin ("sm_XY") or the PTX text
// ("compute_XY"). *log receives the compiler's messages (warnings too). Errors: kUnavailable (no
// NVRTC), kInvalidArgument (not CUDA source, malformed target), kUnsupported (a target this NVRTC
// cannot compile for), kDevice (the source does not compile: the message names the kernel, the
// target and carries the log).
Result<std::string> compile_cuda(const KernelSource& src, const std::string& arch, std::string* log = nullptr);

// What the compiler built for one kernel on one architecture, without a device: ptxas's resource
// report (--ptxas-options=-v) of the cubin for "sm_XY", static instruction counts from the PTX
// (the lines of each kind in the text, not executions; loops count once), and, where nvdisasm is
// installed (sass.h), the cubin's SASS: what runs, its main loop and epilogue.
struct CudaResources {
  std::string arch;
  int registers = 0;  // per thread
  int stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0;  // per thread
  int static_smem_bytes = 0;  // per block (the source declares it all statically)
  int barriers = 0;
  int mma = 0;        // mma.sync (the warp-level matrix instruction, sm_80+ shapes included)
  int wmma = 0;       // wmma.mma.sync (CUDA's wmma API, lowered to mma by ptxas)
  int ldmatrix = 0;   // ldmatrix
  int cp_async = 0;   // cp.async (asynchronous global-to-shared copies)
  int ld_global = 0, st_global = 0, ld_shared = 0, st_shared = 0;
  int atomics = 0;    // atom.* and red.* on global memory
  // The SASS (sass.h) when nvdisasm read the cubin; else `sass_unavailable` says why not.
  bool sass_read = false;
  MachineCodeFigures sass;
  std::string disassembler, sass_unavailable;
};

// Compiles `src` for `arch` ("sm_XY") and reads the figures above; errors as compile_cuda.
Result<CudaResources> cuda_resources(const KernelSource& src, const std::string& arch);

// Parses ptxas -v output (the program log) into `r` (registers, stack, spills, smem, barriers);
// false when it holds no "Used N registers" line.
bool parse_ptxas_log(const std::string& log, CudaResources& r);
// Counts the instruction kinds of CudaResources in PTX text.
void count_ptx(const std::string& ptx, CudaResources& r);

}  // namespace gpusim::backend::cuda
