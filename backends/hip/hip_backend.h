// The HIP backend: AMD GPUs through the HIP runtime (libamdhip64, loaded at run time), kernels
// compiled by hiprtc (hiprtc_compiler.h) into code objects for the device's gfx target, launched on
// one stream and timed with HIP event pairs. The kernel text is the CUDA backend's.
//
// Kernel parameters are the buffers' device pointers in order; the block is KernelSource::block;
// kernels declare their shared memory statically. Compiled kernels are cached in memory by source
// hash and on disk (kernel_disk_cache.h) by source hash, target and ROCm version.
//
// A backend object is used by one thread at a time; it selects its device on that thread at every
// call.
//
// Usage:
//   auto dev = gpusim::backend::hip::open(0);   // or backend::open("hip", 0)
//   if (!dev) { fmt::print("{}\n", dev.error().message); return; }  // kUnavailable: what to install
#pragma once

#include <memory>
#include <vector>

#include "backend.h"

namespace gpusim::backend::hip {

// The AMD GPUs the HIP runtime sees. kUnavailable when libamdhip64 is missing or no GPU is visible.
Result<std::vector<DeviceInfo>> list_devices();

// Opens device `index` (0-based, as HIP numbers them). kUnavailable when the runtime, a device or
// hiprtc is missing, or `index` is out of range.
Result<std::unique_ptr<Backend>> open(int index);

}  // namespace gpusim::backend::hip
