// Loading libcuda.so.1 and resolving the driver API through cuGetProcAddress.
#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>

namespace gpusim::backend::cuda {

namespace {

// The driver ABI the table's signatures follow. Asking cuGetProcAddress for this version returns
// the variant with exactly these signatures, on this driver and on every later one.
constexpr int kAbiVersion = 12000;

// cuGetProcAddress_v2 (CUDA 12+) reports a CUdriverProcAddressQueryResult, an enum whose success
// value is 0; it is declared int here so that the backend also builds against CUDA 11 headers.
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t, int*);
constexpr int kProcAddressSuccess = 0;
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

Result<CudaDriver> load_driver() {
  // Only the versioned name: the toolkit's stubs/libcuda.so (for linking) must never be picked up.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("the NVIDIA driver library libcuda.so.1 was not found ({}); install the NVIDIA "
                                  "driver (libcuda.so.1: the nvidia-driver / libcuda1 package, or CUDA's "
                                  "cuda-drivers) on a machine with an NVIDIA GPU",
                                  why != nullptr ? why : "dlopen failed"));
  }
  CudaDriver d;
  Dl_info where{};
  void* init_sym = dlsym(handle, "cuInit");
  d.library = (init_sym != nullptr && dladdr(init_sym, &where) != 0 && where.dli_fname) ? where.dli_fname : "libcuda.so.1";

  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(handle, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcAddressV1>(dlsym(handle, "cuGetProcAddress"));
  d.DriverGetVersion = reinterpret_cast<decltype(d.DriverGetVersion)>(dlsym(handle, "cuDriverGetVersion"));
  if ((v2 == nullptr && v1 == nullptr) || d.DriverGetVersion == nullptr) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("{} has no cuGetProcAddress: the NVIDIA driver is older than CUDA 11.3; install a "
                                  "current NVIDIA driver",
                                  d.library));
  }
  if (d.DriverGetVersion(&d.version) != CUDA_SUCCESS) d.version = 0;
  const int ask = d.version > 0 ? std::min(d.version, kAbiVersion) : kAbiVersion;

  std::string missing;
  auto get = [&](const char* name, auto& fn) {
    void* p = nullptr;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (v2 != nullptr) {
      int status = kProcAddressSuccess;
      r = v2(name, &p, ask, CU_GET_PROC_ADDRESS_DEFAULT, &status);
      if (status != kProcAddressSuccess) r = CUDA_ERROR_NOT_FOUND;
    } else {
      r = v1(name, &p, ask, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    if (r != CUDA_SUCCESS || p == nullptr) {
      missing += (missing.empty() ? "" : ", ") + std::string(name);
      p = nullptr;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  get("cuGetErrorName", d.GetErrorName);
  get("cuGetErrorString", d.GetErrorString);
  get("cuInit", d.Init);
  get("cuDeviceGetCount", d.DeviceGetCount);
  get("cuDeviceGet", d.DeviceGet);
  get("cuDeviceGetName", d.DeviceGetName);
  get("cuDeviceGetAttribute", d.DeviceGetAttribute);
  get("cuDeviceTotalMem", d.DeviceTotalMem);
  get("cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain);
  get("cuDevicePrimaryCtxRelease", d.DevicePrimaryCtxRelease);
  get("cuCtxSetCurrent", d.CtxSetCurrent);
  get("cuMemAlloc", d.MemAlloc);
  get("cuMemFree", d.MemFree);
  get("cuMemcpyHtoDAsync", d.MemcpyHtoDAsync);
  get("cuMemcpyDtoHAsync", d.MemcpyDtoHAsync);
  get("cuModuleLoadDataEx", d.ModuleLoadDataEx);
  get("cuModuleUnload", d.ModuleUnload);
  get("cuModuleGetFunction", d.ModuleGetFunction);
  get("cuFuncGetAttribute", d.FuncGetAttribute);
  get("cuLaunchKernel", d.LaunchKernel);
  get("cuStreamCreate", d.StreamCreate);
  get("cuStreamDestroy", d.StreamDestroy);
  get("cuStreamSynchronize", d.StreamSynchronize);
  get("cuEventCreate", d.EventCreate);
  get("cuEventDestroy", d.EventDestroy);
  get("cuEventRecord", d.EventRecord);
  get("cuEventQuery", d.EventQuery);
  get("cuEventElapsedTime", d.EventElapsedTime);
  if (!missing.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("{} (CUDA {}) does not provide {}; install a current NVIDIA driver", d.library,
                                  d.version_string(), missing));
  }

  if (CUresult r = d.Init(0); r != CUDA_SUCCESS) {
    // Compared as numbers: CUDA_ERROR_STUB_LIBRARY (34) is missing from older headers.
    const int code = static_cast<int>(r);
    std::string fix = "check nvidia-smi and the kernel log (dmesg) for the driver's state";
    if (code == 100) {  // CUDA_ERROR_NO_DEVICE
      fix = "no NVIDIA GPU is visible: check nvidia-smi, and that CUDA_VISIBLE_DEVICES does not hide the devices";
    } else if (code == 34) {  // CUDA_ERROR_STUB_LIBRARY
      fix = "this is the toolkit's stub library, not the driver: install the NVIDIA driver and remove the stubs "
            "folder from LD_LIBRARY_PATH";
    } else if (code == 803 || code == 804) {  // SYSTEM_DRIVER_MISMATCH, COMPAT_NOT_SUPPORTED_ON_DEVICE
      fix = "the driver library does not match the loaded kernel module: reboot after a driver update, or remove "
            "the CUDA compat package from LD_LIBRARY_PATH";
    }
    return make_error(ErrorCode::kUnavailable, fmt::format("cuInit failed in {} (CUDA {}): {}; {}", d.library,
                                                           d.version_string(), d.error(r), fix));
  }
  return d;
}

}  // namespace

std::string CudaDriver::error(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName == nullptr || GetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (GetErrorString == nullptr || GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (name == nullptr) return fmt::format("CUDA error {}", static_cast<int>(r));
  return text != nullptr ? fmt::format("{} ({})", name, text) : std::string(name);
}

std::string CudaDriver::version_string() const {
  if (version <= 0) return "unknown";
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

const Result<CudaDriver>& cuda_driver() {
  static const Result<CudaDriver> driver = load_driver();
  return driver;
}

}  // namespace gpusim::backend::cuda
