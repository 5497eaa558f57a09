// Physical-device queries: DeviceInfo and the features open() enables (see vk_caps.h).
#include "vk_caps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace gpusim::backend::vulkan {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x1022: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x106B: return "Apple";
    case 0x1AE0: return "Google";  // SwiftShader
    case VK_VENDOR_ID_MESA: return "Mesa";
    case VK_VENDOR_ID_CODEPLAY: return "Codeplay";
    case VK_VENDOR_ID_POCL: return "PoCL";
    default: return fmt::format("vendor 0x{:04x}", id);
  }
}

// driverVersion is vendor-encoded: NVIDIA packs 10.8.8.6 bits, Intel's Windows driver 18.14;
// everyone else (Mesa, AMD) uses the VK_MAKE_API_VERSION layout.
std::string driver_version(uint32_t vendor, VkDriverId driver_id, uint32_t v) {
  if (vendor == 0x10DE) {
    return fmt::format("{}.{}.{}.{}", (v >> 22) & 0x3ff, (v >> 14) & 0xff, (v >> 6) & 0xff, v & 0x3f);
  }
  if (driver_id == VK_DRIVER_ID_INTEL_PROPRIETARY_WINDOWS) return fmt::format("{}.{}", v >> 14, v & 0x3fff);
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

}  // namespace

DeviceCaps query_caps(const Instance& inst, VkPhysicalDevice pd, int index) {
  const InstanceFns& f = inst.fns;
  DeviceCaps c;
  c.physical = pd;
  f.vkGetPhysicalDeviceProperties(pd, &c.props);
  f.vkGetPhysicalDeviceMemoryProperties(pd, &c.memory);
  c.api_version = std::min(c.props.apiVersion, inst.api_version);
  DeviceInfo& d = c.info;
  d.backend = "vulkan";
  d.language = Language::kGlsl;
  d.index = index;
  d.name = c.props.deviceName;
  d.vendor = vendor_name(c.props.vendorID);
  d.arch = fmt::format("vulkan {}.{}", VK_API_VERSION_MAJOR(c.api_version), VK_API_VERSION_MINOR(c.api_version));
  d.is_cpu = c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (c.api_version < VK_API_VERSION_1_1) {
    c.unusable = fmt::format("Vulkan device {} ({}) supports Vulkan {}.{} only, gpusim needs 1.1 or later; update "
                             "its driver",
                             index, d.name, VK_API_VERSION_MAJOR(c.api_version), VK_API_VERSION_MINOR(c.api_version));
    return c;
  }
  const bool v12 = c.api_version >= VK_API_VERSION_1_2;

  std::set<std::string> exts;
  {
    uint32_t n = 0;
    f.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> props(n);
    f.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, props.data());
    props.resize(n);
    for (const auto& e : props) exts.insert(e.extensionName);
  }
  const bool ext_driver_props = exts.count(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME) > 0;
  c.ext_float16_int8 = !v12 && exts.count(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME) > 0;
  // Matched by name: the KHR extension is newer than the headers Debian 12 ships.
  d.matrix_units = exts.count("VK_KHR_cooperative_matrix") > 0 || exts.count("VK_NV_cooperative_matrix") > 0;

  // Properties: subgroups (1.1 core) and the driver's name (1.2 core, or the KHR extension).
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &subgroup;
  if (v12 || ext_driver_props) subgroup.pNext = &driver;
  f.vkGetPhysicalDeviceProperties2(pd, &props2);
  const std::string version = driver_version(c.props.vendorID, driver.driverID, c.props.driverVersion);
  if (driver.driverName[0] != '\0') {
    c.driver_name = driver.driverName;
    d.driver = driver.driverInfo[0] != '\0' ? fmt::format("{} {} (driver version {})", driver.driverName,
                                                          driver.driverInfo, version)
                                            : fmt::format("{} (driver version {})", driver.driverName, version);
  } else {
    d.driver = fmt::format("driver version {}", version);
  }
  d.subgroup_size = static_cast<int>(subgroup.subgroupSize);

  // Features.
  VkPhysicalDeviceFeatures2 feats2{};
  feats2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  VkPhysicalDeviceVulkan11Features v11f{};
  v11f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features v12f{};
  v12f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  if (v12) {
    feats2.pNext = &v11f;
    v11f.pNext = &v12f;
  } else {
    feats2.pNext = &storage16;
    if (c.ext_float16_int8) storage16.pNext = &f16i8;
  }
  f.vkGetPhysicalDeviceFeatures2(pd, &feats2);
  c.shader_float64 = feats2.features.shaderFloat64 == VK_TRUE;
  c.shader_int64 = feats2.features.shaderInt64 == VK_TRUE;
  c.shader_int16 = feats2.features.shaderInt16 == VK_TRUE;
  if (v12) {
    c.storage_buffer_16bit = v11f.storageBuffer16BitAccess == VK_TRUE;
    c.uniform_and_storage_buffer_16bit = v11f.uniformAndStorageBuffer16BitAccess == VK_TRUE;
    c.shader_float16 = v12f.shaderFloat16 == VK_TRUE;
    c.shader_int8 = v12f.shaderInt8 == VK_TRUE;
    c.storage_buffer_8bit = v12f.storageBuffer8BitAccess == VK_TRUE;
  } else {
    c.storage_buffer_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;
    c.uniform_and_storage_buffer_16bit = storage16.uniformAndStorageBuffer16BitAccess == VK_TRUE;
    c.shader_float16 = c.ext_float16_int8 && f16i8.shaderFloat16 == VK_TRUE;
    c.shader_int8 = c.ext_float16_int8 && f16i8.shaderInt8 == VK_TRUE;
  }
  d.fp16 = c.shader_float16 && c.storage_buffer_16bit;
  d.fp64 = c.shader_float64;
  d.int64 = c.shader_int64;

  // Limits.
  const VkPhysicalDeviceLimits& lim = c.props.limits;
  d.max_threads_per_group = static_cast<int>(lim.maxComputeWorkGroupInvocations);
  d.max_shared_bytes = lim.maxComputeSharedMemorySize;
  d.max_groups = {lim.maxComputeWorkGroupCount[0], lim.maxComputeWorkGroupCount[1], lim.maxComputeWorkGroupCount[2]};
  d.compute_units = 0;  // core Vulkan does not say
  d.max_buffer_bytes = c.props.limits.maxStorageBufferRange;
  for (uint32_t i = 0; i < c.memory.memoryHeapCount; ++i) {
    if (c.memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      d.memory_bytes = std::max<uint64_t>(d.memory_bytes, c.memory.memoryHeaps[i].size);
    }
  }

  // The queue: the first compute family with timestamps, else the first compute family.
  uint32_t nq = 0;
  f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> families(nq);
  f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, families.data());
  families.resize(nq);
  for (uint32_t i = 0; i < nq; ++i) {
    const auto& q = families[i];
    if (!(q.queueFlags & VK_QUEUE_COMPUTE_BIT) || q.queueCount == 0) continue;
    if (c.queue_family == UINT32_MAX || (c.timestamp_valid_bits == 0 && q.timestampValidBits > 0)) {
      c.queue_family = i;
      c.timestamp_valid_bits = q.timestampValidBits;
    }
  }
  // A queue's timestampValidBits is authoritative (timestampComputeAndGraphics only promises it is
  // non-zero on every compute queue); without device timers launches are timed on the host, which
  // timer_resolution_ns = 0 reports.
  const bool device_timers = c.timestamp_valid_bits > 0 && lim.timestampPeriod > 0;
  d.timer_resolution_ns = device_timers ? static_cast<double>(lim.timestampPeriod) : 0.0;
  if (c.queue_family == UINT32_MAX) {
    c.unusable = fmt::format("Vulkan device {} ({}) has no compute queue, which gpusim needs", index, d.name);
  }
  return c;
}

}  // namespace gpusim::backend::vulkan
