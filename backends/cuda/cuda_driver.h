// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1"), then every entry point through
// cuGetProcAddress, asked for the ABI version gpusim was written against (CUDA 12.0), so a newer
// driver hands out the matching variant (cuMemAlloc_v2, cuStreamDestroy_v2, ...) and a header
// upgrade never silently changes a signature. Internal to the CUDA backend.
//
// cuda.h supplies the types only (it renames the functions with macros, so the table's members are
// named without the cu prefix). Loaded once per process; cuInit runs as part of loading.
#pragma once

#include <cuda.h>

#include <string>

#include "gpusim/result.h"

namespace gpusim::backend::cuda {

struct CudaDriver {
  std::string library;  // the path dlopen found
  int version = 0;      // cuDriverGetVersion: 12040 for CUDA 12.4

  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*Init)(unsigned int) = nullptr;
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*DeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*MemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*ModuleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**) = nullptr;
  CUresult (*ModuleUnload)(CUmodule) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*FuncGetAttribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                           unsigned int, unsigned int, CUstream, void**, void**) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned int) = nullptr;
  CUresult (*StreamDestroy)(CUstream) = nullptr;
  CUresult (*StreamSynchronize)(CUstream) = nullptr;
  CUresult (*EventCreate)(CUevent*, unsigned int) = nullptr;
  CUresult (*EventDestroy)(CUevent) = nullptr;
  CUresult (*EventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*EventQuery)(CUevent) = nullptr;
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent) = nullptr;

  // "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
  std::string error(CUresult r) const;
  // "12.4"
  std::string version_string() const;
};

// The loaded driver, with cuInit done. kUnavailable when libcuda.so.1 is missing (install the
// NVIDIA driver), too old, or cuInit fails (no device, driver/kernel-module mismatch).
const Result<CudaDriver>& cuda_driver();

}  // namespace gpusim::backend::cuda
