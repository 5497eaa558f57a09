// The HIP runtime API, loaded at run time from libamdhip64 (ROCm 5: libamdhip64.so.5; ROCm 6:
// libamdhip64.so.6). Internal to the HIP backend. hip_runtime_api.h (compiled with
// __HIP_PLATFORM_AMD__) gives the types; the table's members are named without the hip prefix.
// Loaded once per process; hipInit runs as part of loading.
#pragma once

#include <hip/hip_runtime_api.h>

#include <string>

#include "gpusim/result.h"

namespace gpusim::backend::hip {

struct HipRuntime {
  std::string library;  // the path dlopen found
  int version = 0;      // hipRuntimeGetVersion: 50221153 for 5.2.21153

  const char* (*GetErrorName)(hipError_t) = nullptr;
  const char* (*GetErrorString)(hipError_t) = nullptr;
  hipError_t (*Init)(unsigned int) = nullptr;
  hipError_t (*RuntimeGetVersion)(int*) = nullptr;
  hipError_t (*GetDeviceCount)(int*) = nullptr;
  hipError_t (*SetDevice)(int) = nullptr;
  hipError_t (*DeviceGetAttribute)(int*, hipDeviceAttribute_t, int) = nullptr;
  hipError_t (*DeviceGetName)(char*, int, hipDevice_t) = nullptr;
  hipError_t (*DeviceTotalMem)(size_t*, hipDevice_t) = nullptr;
  hipError_t (*GetDeviceProperties)(void*, int) = nullptr;  // layout differs across ROCm releases
  hipError_t (*Malloc)(void**, size_t) = nullptr;
  hipError_t (*Free)(void*) = nullptr;
  hipError_t (*MemcpyHtoDAsync)(hipDeviceptr_t, void*, size_t, hipStream_t) = nullptr;
  hipError_t (*MemcpyDtoHAsync)(void*, hipDeviceptr_t, size_t, hipStream_t) = nullptr;
  hipError_t (*StreamCreateWithFlags)(hipStream_t*, unsigned int) = nullptr;
  hipError_t (*StreamDestroy)(hipStream_t) = nullptr;
  hipError_t (*StreamSynchronize)(hipStream_t) = nullptr;
  hipError_t (*ModuleLoadData)(hipModule_t*, const void*) = nullptr;
  hipError_t (*ModuleUnload)(hipModule_t) = nullptr;
  hipError_t (*ModuleGetFunction)(hipFunction_t*, hipModule_t, const char*) = nullptr;
  hipError_t (*FuncGetAttribute)(int*, hipFunction_attribute, hipFunction_t) = nullptr;  // optional
  hipError_t (*ModuleLaunchKernel)(hipFunction_t, unsigned int, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, unsigned int, hipStream_t, void**, void**) = nullptr;
  hipError_t (*EventCreate)(hipEvent_t*) = nullptr;
  hipError_t (*EventDestroy)(hipEvent_t) = nullptr;
  hipError_t (*EventRecord)(hipEvent_t, hipStream_t) = nullptr;
  hipError_t (*EventElapsedTime)(float*, hipEvent_t, hipEvent_t) = nullptr;

  // "hipErrorNoDevice: no ROCm-capable device is detected"
  std::string error(hipError_t e) const;
  // "5.2.21153"
  std::string version_string() const;
};

// The loaded runtime with hipInit done. kUnavailable when libamdhip64 is missing, or when no AMD
// GPU is visible (with what to install and check).
const Result<HipRuntime>& hip_runtime();

}  // namespace gpusim::backend::hip
