// The on-disk copy of a device's VkPipelineCache, so the driver's compile of a kernel (the slow
// part on lavapipe, which runs LLVM) is paid once per machine rather than once per run.
//
// One file per device and driver: $XDG_CACHE_HOME/gpusim/vulkan-<device>-<driver>-<cache uuid>.bin
// (else ~/.cache/gpusim/). Reading checks the Vulkan cache header (vendor, device, UUID) itself
// rather than trusting every driver to reject a foreign blob; writing goes to a temporary file
// then renames it, so concurrent runs never see half a file. Where no directory is writable,
// nothing is persisted and nothing is said: the cache is an optimisation only.
//
// Usage (internal to backends/vulkan):
//   std::string path = disk_cache_path(caps);               // "" when there is no cache directory
//   std::vector<char> blob = read_disk_cache(path, caps.props);
//   ... vkCreatePipelineCache(initialData = blob) ... vkGetPipelineCacheData ...
//   write_disk_cache(path, data);
#pragma once

#include <string>
#include <vector>

#include "vk_caps.h"

namespace gpusim::backend::vulkan {

std::string disk_cache_path(const DeviceCaps& caps);
// Empty when the file is missing, unreadable, or not a cache for this device.
std::vector<char> read_disk_cache(const std::string& path, const VkPhysicalDeviceProperties& props);
void write_disk_cache(const std::string& path, const std::vector<char>& data);

}  // namespace gpusim::backend::vulkan
