// Loading libamdhip64 and resolving the HIP runtime API with dlsym.
#include "hip_runtime.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <type_traits>
#include <vector>

namespace gpusim::backend::hip {

namespace {

constexpr const char* kNoDeviceFix =
    "install ROCm's kernel driver (amdgpu-dkms, or a kernel with amdgpu and KFD), check that /dev/kfd exists and "
    "that this user is in the render and video groups, and that HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES do not "
    "hide the GPUs (rocminfo lists what ROCm sees)";

Result<HipRuntime> load_runtime() {
  std::vector<std::string> names;
  if (const char* p = std::getenv("GPUSIM_HIP_LIBRARY"); p != nullptr && *p != '\0') names.emplace_back(p);
  for (const char* n : {"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"}) {
    names.emplace_back(n);
  }
  void* handle = nullptr;
  std::string tried;
  for (const auto& n : names) {
    handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (handle == nullptr) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("the HIP runtime libamdhip64 was not found (tried {}); install ROCm's HIP runtime "
                                  "(Debian: libamdhip64-5; ROCm: hip-runtime-amd) and the amdgpu driver",
                                  tried));
  }
  HipRuntime h;
  std::string missing;
  auto get = [&](const char* name, auto& fn, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  get("hipGetErrorName", h.GetErrorName, true);
  get("hipGetErrorString", h.GetErrorString, true);
  get("hipInit", h.Init, true);
  get("hipRuntimeGetVersion", h.RuntimeGetVersion, true);
  get("hipGetDeviceCount", h.GetDeviceCount, true);
  get("hipSetDevice", h.SetDevice, true);
  get("hipDeviceGetAttribute", h.DeviceGetAttribute, true);
  get("hipDeviceGetName", h.DeviceGetName, true);
  get("hipDeviceTotalMem", h.DeviceTotalMem, true);
  // ROCm 6 renamed the entry point with the layout; both layouts start with name[256] and hold
  // gcnArchName, which is all gpusim reads (hip_backend.cpp finds it by content).
  get("hipGetDevicePropertiesR0600", h.GetDeviceProperties, false);
  if (h.GetDeviceProperties == nullptr) get("hipGetDeviceProperties", h.GetDeviceProperties, true);
  get("hipMalloc", h.Malloc, true);
  get("hipFree", h.Free, true);
  get("hipMemcpyHtoDAsync", h.MemcpyHtoDAsync, true);
  get("hipMemcpyDtoHAsync", h.MemcpyDtoHAsync, true);
  get("hipStreamCreateWithFlags", h.StreamCreateWithFlags, true);
  get("hipStreamDestroy", h.StreamDestroy, true);
  get("hipStreamSynchronize", h.StreamSynchronize, true);
  get("hipModuleLoadData", h.ModuleLoadData, true);
  get("hipModuleUnload", h.ModuleUnload, true);
  get("hipModuleGetFunction", h.ModuleGetFunction, true);
  get("hipFuncGetAttribute", h.FuncGetAttribute, false);
  get("hipModuleLaunchKernel", h.ModuleLaunchKernel, true);
  get("hipEventCreate", h.EventCreate, true);
  get("hipEventDestroy", h.EventDestroy, true);
  get("hipEventRecord", h.EventRecord, true);
  get("hipEventElapsedTime", h.EventElapsedTime, true);
  Dl_info where{};
  h.library = (h.Init != nullptr && dladdr(reinterpret_cast<void*>(h.Init), &where) != 0 && where.dli_fname)
                  ? where.dli_fname
                  : "libamdhip64";
  if (!missing.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("{} does not provide {}; install a current ROCm HIP runtime", h.library, missing));
  }
  if (h.RuntimeGetVersion(&h.version) != hipSuccess) h.version = 0;
  if (hipError_t e = h.Init(0); e != hipSuccess) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("no AMD GPU visible to the HIP runtime ({}, ROCm {}; hipInit: {}); {}", h.library,
                                  h.version_string(), h.error(e), kNoDeviceFix));
  }
  int count = 0;
  if (hipError_t e = h.GetDeviceCount(&count); e != hipSuccess || count == 0) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("no AMD GPU visible to the HIP runtime ({}, ROCm {}; hipGetDeviceCount: {}); {}",
                                  h.library, h.version_string(), e != hipSuccess ? h.error(e) : "0 devices",
                                  kNoDeviceFix));
  }
  return h;
}

}  // namespace

std::string HipRuntime::error(hipError_t e) const {
  const char* name = GetErrorName != nullptr ? GetErrorName(e) : nullptr;
  const char* text = GetErrorString != nullptr ? GetErrorString(e) : nullptr;
  if (name == nullptr) return fmt::format("HIP error {}", static_cast<int>(e));
  if (text == nullptr || std::string_view(text) == name) return name;
  return fmt::format("{} ({})", name, text);
}

std::string HipRuntime::version_string() const {
  if (version <= 0) return "unknown";
  return fmt::format("{}.{}.{}", version / 10000000, (version / 100000) % 100, version % 100000);
}

const Result<HipRuntime>& hip_runtime() {
  static const Result<HipRuntime> runtime = load_runtime();
  return runtime;
}

}  // namespace gpusim::backend::hip
