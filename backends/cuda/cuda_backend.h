// The CUDA backend: NVIDIA GPUs through the driver API (libcuda.so.1, loaded at run time), kernels
// compiled by NVRTC (nvrtc_compiler.h) into cubins for the device's compute capability, launched
// on one stream of the device's primary context and timed with CUDA event pairs.
//
// Kernel parameters are the buffers' device pointers in order; the block is KernelSource::block;
// kernels declare their shared memory statically (no dynamic shared memory). Compiled kernels are
// cached in memory by source hash and on disk (kernel_disk_cache.h) by source hash, target and
// NVRTC version. Where NVRTC cannot target the device (a GPU newer than the toolkit), the kernel is
// compiled to PTX for the newest target NVRTC has and the driver finishes the compilation.
//
// A backend object is used by one thread at a time; it makes its context current on that thread at
// every call.
//
// Usage:
//   auto dev = gpusim::backend::cuda::open(0);   // or backend::open("cuda", 0)
//   if (!dev) { fmt::print("{}\n", dev.error().message); return; }  // kUnavailable: what to install
#pragma once

#include <memory>
#include <vector>

#include "backend.h"

namespace gpusim::backend::cuda {

// The NVIDIA GPUs the driver sees. kUnavailable when libcuda.so.1 is missing or cuInit fails.
Result<std::vector<DeviceInfo>> list_devices();

// Opens device `index` (0-based, as CUDA numbers them). kUnavailable when the driver, a device or
// NVRTC is missing, or `index` is out of range.
Result<std::unique_ptr<Backend>> open(int index);

}  // namespace gpusim::backend::cuda
