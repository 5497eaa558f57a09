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

#include <string>
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

}  // namespace gpusim::backend::hip
