// The Vulkan backend: GLSL compute kernels on any Vulkan 1.1+ device, including Mesa's lavapipe
// (a CPU device, what CI runs on).
//
// How it works (details in vk_backend_impl.h and the files beside it):
// - The loader is dlopen'ed (vk_loader.h); no Vulkan library is linked, so a missing driver is a
//   kUnavailable error at open(), not a failure to start.
// - compile(): GLSL -> SPIR-V with libshaderc, then a compute pipeline. Pipelines are cached in
//   memory by source_hash(), and the driver's VkPipelineCache is kept on disk under
//   $XDG_CACHE_HOME/gpusim/ (else ~/.cache/gpusim/), one file per device and driver, so a later
//   run skips the driver's own compile too.
// - Buffers are storage buffers in device-local memory; where that memory is also host visible
//   (lavapipe, integrated GPUs) upload/download map it, otherwise they go through a staging buffer.
// - launch() records into one command buffer (bind, descriptor set, dispatch, barrier);
//   synchronize() submits it and waits. Timed launches are bracketed by timestamp queries; a
//   queue without timestamps times each timed launch on the host instead (submitted on its own),
//   and info().timer_resolution_ns is 0 to say so. GPUSIM_VULKAN_HOST_TIMERS=1 in the environment
//   asks for host timing on any device (for drivers whose timestamps misbehave).
//
// A backend object is used from one thread at a time; separate objects share nothing.
//
// Usage:
//   auto devs = gpusim::backend::vulkan::list_devices();   // or backend::list_devices("vulkan")
//   auto dev = gpusim::backend::vulkan::open(0);           // kUnavailable: loader/driver/device missing
#pragma once

#include <memory>
#include <vector>

#include "backend.h"

namespace gpusim::backend::vulkan {

// The Vulkan devices present, in the loader's order (open()'s index).
Result<std::vector<DeviceInfo>> list_devices();

// Opens device `index`. kUnavailable when the loader, a driver or the device is missing (the
// message says what to install) or the index is out of range (it lists the devices found).
Result<std::unique_ptr<Backend>> open(int index);

}  // namespace gpusim::backend::vulkan
