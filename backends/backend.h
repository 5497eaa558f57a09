// The backend registry and the helpers backends share. The interface itself (DeviceInfo,
// KernelSource, Backend) is public: include/gpusim/backend_plugin.h, which a third party
// implements and registers (register_backend). One implementation per API here, each in its own
// folder behind its own CMake option (backends/vulkan, backends/cuda, backends/hip).
//
// Vendor libraries are loaded with dlopen at run time, so one gpusim binary runs on machines with
// and without each driver: a backend whose SDK headers were absent at build time is not built
// (built_backends() does not list it); one whose driver is absent at run time fails open() with
// ErrorCode::kUnavailable and a message naming the library and the package that provides it.
//
// Usage:
//   auto dev = gpusim::backend::open("vulkan", 0);
//   if (!dev) { fmt::print(stderr, "{}\n", dev.error().message); return; }
//   auto buf = (*dev)->allocate(n * 4);
//   auto k = (*dev)->compile(src);                      // src: backend::KernelSource
//   auto t = (*dev)->launch(*k, {groups, 1, 1}, {*buf}, /*timed=*/true);
//   (*dev)->synchronize();
//   double us = (*dev)->read_timers()->at(*t);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpusim/backend_plugin.h"
#include "gpusim/result.h"

namespace gpusim::backend {

// Shared memory a CUDA kernel may declare statically. The generated kernels declare theirs
// statically (SHARED arrays); more needs dynamic shared memory and an opt-in attribute, which they
// do not use. So a CUDA device's tiles, and an NVIDIA profile's (codegen::target_options), fit in this.
inline constexpr uint64_t kCudaStaticSharedBytes = 48 * 1024;

// The device backends gpusim has, built into this binary or not ("vulkan", "cuda", "hip"), and the
// registered plugins: the one list every option that names a device backend is checked against.
bool is_device_backend(const std::string& name);

// Device backends compiled into this binary ("vulkan", "cuda", "hip"), whether or not a driver is
// present: the real devices. Not "null" (always there, no device) nor plugins (registered_backends()).
std::vector<std::string> built_backends();

// The devices a backend sees now; kUnavailable (with what to install) where its driver is missing.
Result<std::vector<DeviceInfo>> list_devices(const std::string& backend);

// Opens device `index` of `backend`. Errors: kInvalidArgument (unknown or not built; lists the
// built ones), kUnavailable (driver missing, no device, index out of range; says what to do).
Result<std::unique_ptr<Backend>> open(const std::string& backend, int index = 0);

// 64-bit FNV-1a of a kernel's language, entry name, text, buffer count and block: the compile caches' key.
uint64_t source_hash(const KernelSource& src);

// For Backend::prepare: the sources of `lang` with code, once per source_hash, that `done(hash)`
// does not already cover, each with its hash.
std::vector<std::pair<uint64_t, const KernelSource*>> sources_to_prepare(std::span<const KernelSource> sources,
                                                                         Language lang,
                                                                         const std::function<bool(uint64_t)>& done);

}  // namespace gpusim::backend
