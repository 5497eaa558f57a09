// What a Vulkan physical device offers gpusim: its DeviceInfo (for list_devices and info()) and
// the details open() needs to create a logical device (queue family, which optional features to
// enable, limits).
//
// The features are queried through vkGetPhysicalDeviceFeatures2 with VkPhysicalDeviceVulkan11/12
// Features on a 1.2+ device, or the older 16-bit-storage and VK_KHR_shader_float16_int8 structs on
// a 1.1 device; DeviceInfo::fp16 needs both fp16 arithmetic (shaderFloat16) and 16-bit storage
// buffers (storageBuffer16BitAccess), as the fp16 GLSL kernels use both.
//
// Usage (internal to backends/vulkan):
//   DeviceCaps caps = query_caps(inst, inst.physical_devices[i], i);
//   if (!caps.unusable.empty()) ... kUnavailable with caps.unusable
#pragma once

#include <string>

#include "backend.h"
#include "vk_loader.h"

namespace gpusim::backend::vulkan {

struct DeviceCaps {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  DeviceInfo info;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t api_version = 0;  // the device's, capped at the instance's
  uint32_t queue_family = UINT32_MAX;  // a compute queue family (UINT32_MAX: none)
  uint32_t timestamp_valid_bits = 0;   // of that family; 0: no device timers (host timing instead)

  // Optional features present, which open() enables.
  bool shader_float64 = false;
  bool shader_int64 = false;
  bool shader_int16 = false;
  bool storage_buffer_16bit = false;
  bool uniform_and_storage_buffer_16bit = false;
  bool shader_float16 = false;
  bool shader_int8 = false;
  bool storage_buffer_8bit = false;  // 1.2 devices only
  // On a 1.1 device fp16 arithmetic comes from this extension, which must then be enabled.
  bool ext_float16_int8 = false;
  std::string driver_name;  // VkPhysicalDeviceDriverProperties (1.2 or VK_KHR_driver_properties)
  // Why gpusim cannot use the device (older than Vulkan 1.1, no compute queue); "" when it can.
  // Such a device is still listed, so list_devices() and open() agree on indices.
  std::string unusable;
};

DeviceCaps query_caps(const Instance& inst, VkPhysicalDevice pd, int index);

}  // namespace gpusim::backend::vulkan
