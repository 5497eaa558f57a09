// dlopen of the Vulkan loader, the dispatch tables and the instance (see vk_loader.h).
#include "vk_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace gpusim::backend::vulkan {

Instance::~Instance() {
  if (instance != VK_NULL_HANDLE && fns.vkDestroyInstance != nullptr) fns.vkDestroyInstance(instance, nullptr);
  // The loader stays loaded for the life of the process: drivers (lavapipe among them) keep state
  // past vkDestroyInstance, and unloading them under it leaves that memory unattributable (and
  // some drivers crash in their own destructors at exit when unloaded early).
}

namespace {

// Casts a looked-up PFN_vkVoidFunction to the entry point's own pointer type.
template <typename Fn>
void assign(Fn& dst, PFN_vkVoidFunction src) {
  dst = reinterpret_cast<Fn>(src);
}

Error unavailable(const std::string& what) {
  return make_error(ErrorCode::kUnavailable, fmt::format("Vulkan is unavailable: {}; {}", what, kInstallHint));
}

}  // namespace

Result<std::unique_ptr<Instance>> create_instance() {
  auto inst = std::make_unique<Instance>();
  // libvulkan.so.1 is the loader's runtime name (Debian: libvulkan1); the unversioned name only
  // exists with the -dev package, so it is the fallback.
  std::string dl_errors;
  for (const char* name : {"libvulkan.so.1", "libvulkan.so"}) {
    inst->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (inst->library != nullptr) break;
    const char* e = dlerror();
    dl_errors += fmt::format("{}dlopen(\"{}\"): {}", dl_errors.empty() ? "" : "; ", name, e ? e : "failed");
  }
  if (inst->library == nullptr) return unavailable(fmt::format("the Vulkan loader was not found ({})", dl_errors));

  inst->get_instance_proc_addr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(inst->library, "vkGetInstanceProcAddr"));
  if (inst->get_instance_proc_addr == nullptr) {
    return unavailable("the Vulkan loader library has no vkGetInstanceProcAddr (a broken libvulkan.so.1)");
  }
  auto gipa = inst->get_instance_proc_addr;
#define GPUSIM_VK_LOAD_GLOBAL(name) assign(inst->g.name, gipa(VK_NULL_HANDLE, #name));
  GPUSIM_VK_GLOBAL_FNS(GPUSIM_VK_LOAD_GLOBAL)
#undef GPUSIM_VK_LOAD_GLOBAL
  if (inst->g.vkCreateInstance == nullptr) return unavailable("the Vulkan loader has no vkCreateInstance");
  // vkEnumerateInstanceVersion is missing only from Vulkan 1.0 loaders.
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (inst->g.vkEnumerateInstanceVersion != nullptr) inst->g.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    return unavailable(fmt::format("the Vulkan loader is version {}.{}, gpusim needs 1.1 or later",
                                   VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version)));
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "gpusim";
  app.applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0);
  app.pEngineName = "gpusim";
  app.engineVersion = VK_MAKE_API_VERSION(0, 0, 1, 0);
  // The highest version gpusim is written for; a 1.1 or 1.2 device is used at its own version.
  app.apiVersion = VK_API_VERSION_1_3;
  inst->api_version = app.apiVersion;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  VkResult r = inst->g.vkCreateInstance(&ci, nullptr, &inst->instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return unavailable("the Vulkan loader found no driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  }
  if (r != VK_SUCCESS) {
    inst->instance = VK_NULL_HANDLE;
    return unavailable(fmt::format("vkCreateInstance failed: {}", result_name(r)));
  }

#define GPUSIM_VK_LOAD_INSTANCE(name)                              \
  assign(inst->fns.name, gipa(inst->instance, #name));             \
  if (inst->fns.name == nullptr) {                                 \
    return unavailable("the Vulkan loader has no " #name);         \
  }
  GPUSIM_VK_INSTANCE_FNS(GPUSIM_VK_LOAD_INSTANCE)
#undef GPUSIM_VK_LOAD_INSTANCE

  uint32_t count = 0;
  r = inst->fns.vkEnumeratePhysicalDevices(inst->instance, &count, nullptr);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    return unavailable(fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r)));
  }
  inst->physical_devices.resize(count);
  r = inst->fns.vkEnumeratePhysicalDevices(inst->instance, &count, inst->physical_devices.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    return unavailable(fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r)));
  }
  inst->physical_devices.resize(count);
  if (inst->physical_devices.empty()) return unavailable("the Vulkan loader found no device");
  return inst;
}

Status load_device_fns(const Instance& inst, VkDevice device, DeviceFns& out) {
  auto gdpa = inst.fns.vkGetDeviceProcAddr;
#define GPUSIM_VK_LOAD_DEVICE(name)                                                                        \
  assign(out.name, gdpa(device, #name));                                                                   \
  if (out.name == nullptr) {                                                                               \
    return make_error(ErrorCode::kUnavailable, "the Vulkan driver has no " #name "; update the driver (" + \
                                                   std::string(kInstallHint) + ")");                       \
  }
  GPUSIM_VK_DEVICE_FNS(GPUSIM_VK_LOAD_DEVICE)
#undef GPUSIM_VK_LOAD_DEVICE
  return Ok{};
}

std::string result_name(VkResult r) {
  switch (r) {
#define GPUSIM_VK_CASE(x) \
  case x:                 \
    return #x;
    GPUSIM_VK_CASE(VK_SUCCESS)
    GPUSIM_VK_CASE(VK_NOT_READY)
    GPUSIM_VK_CASE(VK_TIMEOUT)
    GPUSIM_VK_CASE(VK_INCOMPLETE)
    GPUSIM_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    GPUSIM_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    GPUSIM_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    GPUSIM_VK_CASE(VK_ERROR_DEVICE_LOST)
    GPUSIM_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    GPUSIM_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    GPUSIM_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    GPUSIM_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    GPUSIM_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    GPUSIM_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    GPUSIM_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    GPUSIM_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    GPUSIM_VK_CASE(VK_ERROR_UNKNOWN)
    GPUSIM_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    GPUSIM_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    GPUSIM_VK_CASE(VK_ERROR_FRAGMENTATION)
    GPUSIM_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    GPUSIM_VK_CASE(VK_PIPELINE_COMPILE_REQUIRED)
    GPUSIM_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef GPUSIM_VK_CASE
    default:
      return fmt::format("VkResult {}", static_cast<int>(r));
  }
}

}  // namespace gpusim::backend::vulkan
