// Loading Vulkan at run time: the loader library, its entry points, and an instance.
//
// Why: gpusim links no vendor library, so one binary runs with or without a Vulkan driver (see
// backends/backend.h). The loader (libvulkan.so.1) is opened with dlopen; only
// vkGetInstanceProcAddr comes from dlsym, every other entry point is asked of the loader through
// it (global and instance level) or through vkGetDeviceProcAddr (device level, which skips the
// loader's trampoline). The Vulkan headers are used for types only (VK_NO_PROTOTYPES).
//
// The entry points gpusim uses are listed once, in the X-macros below; each list becomes a struct
// of function pointers (a dispatch table), filled and checked in one place. Nothing here is
// global: each Instance owns its dlopen handle (dlopen counts references) and its tables, so two
// backends, or two threads each with one, never share mutable state.
//
// Usage (internal to backends/vulkan):
//   auto inst = create_instance();           // kUnavailable: no loader, or no driver
//   if (!inst) return inst.error();
//   for (VkPhysicalDevice pd : (*inst)->physical_devices) ...
//   DeviceFns d; if (auto s = load_device_fns(**inst, device, d); !s) ...
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusim/result.h"

namespace gpusim::backend::vulkan {

// Asked of vkGetInstanceProcAddr with a null instance.
#define GPUSIM_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)           \
  X(vkEnumerateInstanceVersion)

// Asked of vkGetInstanceProcAddr with the instance.
#define GPUSIM_VK_INSTANCE_FNS(X)             \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

// Asked of vkGetDeviceProcAddr with the device.
#define GPUSIM_VK_DEVICE_FNS(X)     \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkDeviceWaitIdle)               \
  X(vkQueueSubmit)                  \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkGetPipelineCacheData)         \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkResetCommandPool)             \
  X(vkAllocateCommandBuffers)       \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCmdResetQueryPool)            \
  X(vkCmdWriteTimestamp)            \
  X(vkCreateQueryPool)              \
  X(vkDestroyQueryPool)             \
  X(vkGetQueryPoolResults)          \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)

#define GPUSIM_VK_DECLARE_FN(name) PFN_##name name = nullptr;

struct GlobalFns {
  GPUSIM_VK_GLOBAL_FNS(GPUSIM_VK_DECLARE_FN)
};
struct InstanceFns {
  GPUSIM_VK_INSTANCE_FNS(GPUSIM_VK_DECLARE_FN)
};
struct DeviceFns {
  GPUSIM_VK_DEVICE_FNS(GPUSIM_VK_DECLARE_FN)
};

// The loader library, a VkInstance on it, and the instance's physical devices. Destroying it
// destroys the instance, then closes the library; destroy every VkDevice made from it first.
class Instance {
 public:
  Instance() = default;
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance();

  void* library = nullptr;  // dlopen handle
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  GlobalFns g;
  InstanceFns fns;
  VkInstance instance = VK_NULL_HANDLE;
  uint32_t api_version = 0;  // the version the instance was created for
  std::vector<VkPhysicalDevice> physical_devices;
};

// The message gpusim gives wherever Vulkan is missing: what to install.
inline constexpr const char* kInstallHint =
    "install the Vulkan loader (Debian: libvulkan1) and a driver (mesa-vulkan-drivers provides lavapipe, a CPU "
    "device)";

// dlopens the loader, creates an instance and lists its physical devices. kUnavailable, naming the
// missing piece and kInstallHint, when there is no loader, no driver or no device.
Result<std::unique_ptr<Instance>> create_instance();

// Fills `out` from vkGetDeviceProcAddr; kUnavailable naming the first entry point the driver lacks.
Status load_device_fns(const Instance& inst, VkDevice device, DeviceFns& out);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... (the enum's name, or the number for one not listed).
std::string result_name(VkResult r);

}  // namespace gpusim::backend::vulkan
