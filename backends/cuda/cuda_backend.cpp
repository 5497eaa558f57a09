// The CUDA backend: device discovery, the context, NVRTC-compiled modules; buffers, launches and
// event timers are GpuBackend's (gpu_common.h), over the driver calls in CudaApi.
#include "cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "cuda_driver.h"
#include "gpu_common.h"
#include "kernel_disk_cache.h"
#include "nvrtc_compiler.h"

namespace gpusim::backend::cuda {

namespace {

// Bumped when compile_cuda's options change, so the disk cache never serves a binary built otherwise.
constexpr const char* kOptionsTag = "std=c++17;v1";

int attribute(const CudaDriver& d, CUdevice dev, CUdevice_attribute a, int fallback) {
  int v = 0;
  return d.DeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : fallback;
}

Result<DeviceInfo> describe(const CudaDriver& d, int index, CUdevice* out_dev) {
  CUdevice dev = 0;
  if (CUresult r = d.DeviceGet(&dev, index); r != CUDA_SUCCESS) {
    return make_error(ErrorCode::kUnavailable, fmt::format("CUDA device {}: cuDeviceGet failed: {}", index, d.error(r)));
  }
  if (out_dev != nullptr) *out_dev = dev;
  DeviceInfo info;
  info.backend = "cuda";
  info.index = index;
  char name[256] = {};
  if (d.DeviceGetName(name, static_cast<int>(sizeof name) - 1, dev) == CUDA_SUCCESS) info.name = name;
  if (info.name.empty()) info.name = fmt::format("CUDA device {}", index);
  info.vendor = "NVIDIA";
  info.driver = fmt::format("CUDA driver {}", d.version_string());
  if (auto n = nvrtc_info()) info.driver += fmt::format(", NVRTC {}", n->version);
  const int major = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  const int minor = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  info.arch = fmt::format("sm_{}{}", major, minor);
  size_t total = 0;
  if (d.DeviceTotalMem(&total, dev) == CUDA_SUCCESS) info.memory_bytes = total;
  info.compute_units = attribute(d, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
  info.subgroup_size = attribute(d, dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
  info.max_threads_per_group = attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
  // The static limit: kernels declare their shared memory statically, and more than 48 KiB needs
  // dynamic shared memory and an opt-in attribute, which the generated kernels do not use.
  info.max_shared_bytes = std::min(static_cast<uint64_t>(attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152)),
                                   kCudaStaticSharedBytes);
  info.max_groups = {static_cast<uint32_t>(attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647)),
                     static_cast<uint32_t>(attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535)),
                     static_cast<uint32_t>(attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535))};
  const int cc = major * 10 + minor;
  info.fp16 = cc >= 53;
  info.fp64 = true;
  info.int64 = true;
  info.matrix_units = cc >= 70;
  info.timer_resolution_ns = 500;  // cuEventElapsedTime: "a resolution of around 0.5 microseconds"
  return info;
}

// The NVRTC target for a device: its own sm_XY when NVRTC has it, else PTX for the newest older
// target NVRTC has (the driver compiles PTX for newer GPUs), else sm_XY (compile reports why not).
std::string choose_target(const DeviceInfo& info, const NvrtcInfo& n) {
  const int cc = std::stoi(info.arch.substr(3));
  int best = 0;
  for (const auto& a : n.archs) {
    const int v = std::stoi(a.substr(3));
    if (v == cc) return info.arch;
    if (v < cc) best = std::max(best, v);
  }
  if (best > 0) return fmt::format("compute_{}", best);
  return info.arch;
}

// The driver calls GpuBackend makes, in its terms (see gpu_common.h).
struct CudaApi {
  using Code = CUresult;
  using Ptr = CUdeviceptr;
  using Stream = CUstream;
  using Event = CUevent;
  using Module = CUmodule;
  using Function = CUfunction;
  static constexpr const char* kName = "CUDA";
  static constexpr CUresult kSuccess = CUDA_SUCCESS;
  static constexpr CUresult kNotReady = CUDA_ERROR_NOT_READY;
  static constexpr const char* kUnusableFix =
      "an error in a kernel leaves the context unusable: fix the kernel, then open the device again";

  const CudaDriver* d = nullptr;

  std::string error(CUresult r) const { return d->error(r); }
  CUresult alloc(CUdeviceptr* p, uint64_t n) const { return d->MemAlloc(p, n); }
  CUresult free(CUdeviceptr p) const { return d->MemFree(p); }
  CUresult upload(CUdeviceptr p, const void* src, uint64_t n, CUstream s) const { return d->MemcpyHtoDAsync(p, src, n, s); }
  CUresult download(void* dst, CUdeviceptr p, uint64_t n, CUstream s) const { return d->MemcpyDtoHAsync(dst, p, n, s); }
  CUresult synchronize(CUstream s) const { return d->StreamSynchronize(s); }
  CUresult destroy_stream(CUstream s) const { return d->StreamDestroy(s); }
  CUresult unload(CUmodule m) const { return d->ModuleUnload(m); }
  CUresult create_event(CUevent* e) const { return d->EventCreate(e, CU_EVENT_DEFAULT); }
  CUresult destroy_event(CUevent e) const { return d->EventDestroy(e); }
  CUresult record(CUevent e, CUstream s) const { return d->EventRecord(e, s); }
  CUresult elapsed(float* ms, CUevent a, CUevent b) const { return d->EventElapsedTime(ms, a, b); }
  CUresult launch(CUfunction fn, std::array<uint32_t, 3> g, std::array<uint32_t, 3> b, CUstream s, void** params) const {
    return d->LaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], 0, s, params, nullptr);
  }
  static CUdeviceptr offset(CUdeviceptr p, uint64_t bytes) { return p + bytes; }
};

class CudaBackend final : public gpu::GpuBackend<CudaApi> {
 public:
  CudaBackend(const CudaDriver& d, DeviceInfo info, CUdevice dev, NvrtcInfo nvrtc)
      : GpuBackend(CudaApi{&d}, std::move(info)), d_(d), dev_(dev), nvrtc_(std::move(nvrtc)),
        target_(choose_target(info_, nvrtc_)) {}

  ~CudaBackend() override {
    if (ctx_ == nullptr) return;
    d_.CtxSetCurrent(ctx_);
    teardown();
    d_.CtxSetCurrent(nullptr);
    d_.DevicePrimaryCtxRelease(dev_);
  }

  Status init() {
    if (CUresult r = d_.DevicePrimaryCtxRetain(&ctx_, dev_); r != CUDA_SUCCESS) {
      ctx_ = nullptr;
      return fail(ErrorCode::kUnavailable, "cannot create a context", r,
                  "the device may be in exclusive-process mode and in use, or out of memory (nvidia-smi)");
    }
    if (auto s = bind(); !s) return s;
    if (CUresult r = d_.StreamCreate(&stream_, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) {
      stream_ = nullptr;
      return fail(ErrorCode::kUnavailable, "cannot create a stream", r, "");
    }
    return Ok{};
  }

 private:
  Status bind() const override {
    if (CUresult r = d_.CtxSetCurrent(ctx_); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, "cannot make the context current", r, "");
    }
    return Ok{};
  }

  // Where src's binary lives in the disk cache: {sub, file}.
  std::pair<std::string, std::string> cache_place(uint64_t hash) const {
    const bool ptx = target_.rfind("compute_", 0) == 0;
    return {"cuda/" + target_, kernel_cache_key(hash, target_, "nvrtc-" + nvrtc_.version + ";" + nvrtc_.include_dir,
                                                kOptionsTag) +
                                   (ptx ? ".ptx" : ".cubin")};
  }

  Result<std::string> binary(const KernelSource& src, uint64_t hash, bool* from_cache) override {
    const auto [sub, file] = cache_place(hash);
    if (auto cached = kernel_cache_load(sub, file)) {
      *from_cache = true;
      return std::move(*cached);
    }
    auto compiled = compile_cuda(src, target_);
    if (!compiled) return compiled.error();
    kernel_cache_store(sub, file, *compiled);
    *from_cache = false;
    return compiled;
  }

  Result<Loaded> load(const KernelSource& src, uint64_t hash) override {
    bool from_cache = false;
    std::string image;
    if (auto p = take_prepared(hash)) {
      image = std::move(p->first);
      from_cache = p->second;
    } else {
      auto b = binary(src, hash, &from_cache);
      if (!b) return b.error();
      image = std::move(*b);
    }
    CUmodule module = nullptr;
    Status loaded = load_module(image, &module);
    if (!loaded && from_cache) {  // a cached binary this driver cannot load: compile afresh
      auto compiled = compile_cuda(src, target_);
      if (!compiled) return compiled.error();
      from_cache = false;
      loaded = load_module(*compiled, &module);
      if (loaded) {
        const auto [sub, file] = cache_place(hash);
        kernel_cache_store(sub, file, *compiled);
      }
    }
    if (!loaded) return make_error(loaded.error().code, fmt::format("kernel \"{}\": {}", src.name, loaded.error().message));

    CUfunction fn = nullptr;
    if (CUresult r = d_.ModuleGetFunction(&fn, module, src.name.c_str()); r != CUDA_SUCCESS) {
      d_.ModuleUnload(module);
      return fail(ErrorCode::kDevice,
                  fmt::format("kernel \"{}\": the compiled module has no entry point of that name", src.name), r,
                  "declare the kernel extern \"C\" __global__ so that its name is not mangled");
    }
    const uint64_t threads = uint64_t{src.block[0]} * src.block[1] * src.block[2];
    int max_threads = 0;
    if (d_.FuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) == CUDA_SUCCESS &&
        max_threads > 0 && threads > static_cast<uint64_t>(max_threads)) {
      int regs = 0;
      d_.FuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
      d_.ModuleUnload(module);
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("kernel \"{}\" on {}: uses {} registers per thread, so a block can have at most {} "
                                    "threads, it asks for {}; add __launch_bounds__({}) or choose a smaller block",
                                    src.name, info_.name, regs, max_threads, threads, threads));
    }
    return Loaded{module, fn, from_cache, nullptr};
  }

  Status load_module(const std::string& image, CUmodule* module) {
    char error_log[8192] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {error_log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof error_log - 1))};
    CUresult r = d_.ModuleLoadDataEx(module, image.c_str(), 2, options, values);
    if (r == CUDA_SUCCESS) return Ok{};
    *module = nullptr;
    std::string fix;
    const int nvrtc_version = [&] {
      const auto dot = nvrtc_.version.find('.');
      return std::stoi(nvrtc_.version.substr(0, dot)) * 1000 + std::stoi(nvrtc_.version.substr(dot + 1)) * 10;
    }();
    if (nvrtc_version > d_.version) {
      fix = fmt::format("NVRTC {} is newer than the driver (CUDA {}): install an NVIDIA driver for CUDA {} or newer, "
                        "or use an older toolkit's NVRTC (CUDA_HOME or GPUSIM_NVRTC_LIBRARY)",
                        nvrtc_.version, d_.version_string(), nvrtc_.version);
    }
    std::string what = fmt::format("loading the {} for {} failed", target_.rfind("compute_", 0) == 0 ? "PTX" : "cubin",
                                   target_);
    if (error_log[0] != '\0') what += fmt::format(" (JIT log: {})", error_log);
    return fail(ErrorCode::kDevice, what, r, fix);
  }

  const CudaDriver& d_;
  CUdevice dev_ = 0;
  NvrtcInfo nvrtc_;
  std::string target_;
  CUcontext ctx_ = nullptr;
};

}  // namespace

Result<std::vector<DeviceInfo>> list_devices() {
  const auto& d = cuda_driver();
  if (!d) return d.error();
  int count = 0;
  if (CUresult r = d->DeviceGetCount(&count); r != CUDA_SUCCESS) {
    return make_error(ErrorCode::kUnavailable, fmt::format("cuDeviceGetCount failed: {}", d->error(r)));
  }
  return gpu::describe_devices(count, [&](int i) { return describe(*d, i, nullptr); });
}

Result<std::unique_ptr<Backend>> open(int index) {
  const auto& d = cuda_driver();
  if (!d) return d.error();
  int count = 0;
  if (CUresult r = d->DeviceGetCount(&count); r != CUDA_SUCCESS) {
    return make_error(ErrorCode::kUnavailable, fmt::format("cuDeviceGetCount failed: {}", d->error(r)));
  }
  if (index < 0 || index >= count) {
    return gpu::no_such_device("CUDA", "driver", index, count, [&](int i) { return describe(*d, i, nullptr); });
  }
  auto nvrtc = nvrtc_info();
  if (!nvrtc) return nvrtc.error();
  CUdevice dev = 0;
  auto info = describe(*d, index, &dev);
  if (!info) return info.error();
  auto backend = std::make_unique<CudaBackend>(*d, std::move(*info), dev, std::move(*nvrtc));
  if (auto s = backend->init(); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gpusim::backend::cuda
