// The CUDA backend: device discovery, buffers, NVRTC-compiled modules, launches and event timers.
#include "cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "cuda_driver.h"
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
  info.max_shared_bytes = static_cast<uint64_t>(
      std::min(attribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152), 49152));
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

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaDriver& d, DeviceInfo info, CUdevice dev, NvrtcInfo nvrtc)
      : d_(d), info_(std::move(info)), dev_(dev), nvrtc_(std::move(nvrtc)), target_(choose_target(info_, nvrtc_)) {}

  ~CudaBackend() override {
    if (ctx_ == nullptr) return;
    d_.CtxSetCurrent(ctx_);
    if (stream_ != nullptr) d_.StreamSynchronize(stream_);
    for (auto& [start, end] : pending_) {
      free_events_.push_back(start);
      free_events_.push_back(end);
    }
    for (CUevent e : free_events_) d_.EventDestroy(e);
    for (auto& k : kernels_) d_.ModuleUnload(k.module);
    for (auto& [id, b] : buffers_) d_.MemFree(b.ptr);
    if (stream_ != nullptr) d_.StreamDestroy(stream_);
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

  const DeviceInfo& info() const override { return info_; }

  Result<Buffer> allocate(uint64_t bytes) override {
    if (auto s = bind(); !s) return s.error();
    CUdeviceptr ptr = 0;
    // cuMemAlloc rejects 0 bytes; an empty tensor still gets a distinct, valid buffer.
    if (CUresult r = d_.MemAlloc(&ptr, std::max<uint64_t>(bytes, 4)); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, fmt::format("cannot allocate {} bytes", bytes), r,
                  fmt::format("the device has {} bytes in all; free buffers or run a smaller batch", info_.memory_bytes));
    }
    const uint64_t id = next_buffer_++;
    buffers_[id] = {ptr, bytes};
    return Buffer{id, bytes};
  }

  Status upload(const Buffer& b, const void* src, uint64_t bytes, uint64_t offset) override {
    auto ptr = range(b, bytes, offset, "upload");
    if (!ptr) return ptr.error();
    if (bytes == 0) return Ok{};
    if (auto s = bind(); !s) return s;
    if (CUresult r = d_.MemcpyHtoDAsync(*ptr, src, bytes, stream_); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, fmt::format("upload of {} bytes to buffer {} failed", bytes, b.id), r, "");
    }
    return wait("upload");
  }

  Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override {
    auto ptr = range(b, bytes, offset, "download");
    if (!ptr) return ptr.error();
    if (bytes == 0) return Ok{};
    if (auto s = bind(); !s) return s;
    if (CUresult r = d_.MemcpyDtoHAsync(dst, *ptr, bytes, stream_); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, fmt::format("download of {} bytes from buffer {} failed", bytes, b.id), r, "");
    }
    return wait("download");
  }

  void release(const Buffer& b) override {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) return;
    if (!bind()) return;
    // cuMemFree waits for work using the memory; the stream is synchronized first so that a
    // pending kernel never reads freed memory.
    d_.StreamSynchronize(stream_);
    d_.MemFree(it->second.ptr);
    buffers_.erase(it);
  }

  Result<KernelHandle> compile(const KernelSource& src) override {
    if (auto s = can_run(src); !s) return s.error();
    if (src.language != Language::kCudaCpp) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": the CUDA backend compiles CUDA C++, this source is GLSL", src.name));
    }
    const uint64_t hash = source_hash(src);
    const uint64_t key = hash ^ (uint64_t{src.block[0]} * 0x9e3779b97f4a7c15ull) ^
                         (uint64_t{src.block[1]} << 21) ^ (uint64_t{src.block[2]} << 42);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
    if (auto s = bind(); !s) return s.error();

    const auto t0 = std::chrono::steady_clock::now();
    const bool ptx = target_.rfind("compute_", 0) == 0;
    const std::string sub = "cuda/" + target_;
    const std::string file = kernel_cache_key(hash, target_, "nvrtc-" + nvrtc_.version + ";" + nvrtc_.include_dir,
                                              kOptionsTag) +
                             (ptx ? ".ptx" : ".cubin");
    CUmodule module = nullptr;
    bool from_cache = false;
    if (auto cached = kernel_cache_load(sub, file)) {
      from_cache = load_module(*cached, &module).ok();
    }
    if (!from_cache) {
      auto binary = compile_cuda(src, target_);
      if (!binary) return binary.error();
      if (auto s = load_module(*binary, &module); !s) {
        return make_error(s.error().code, fmt::format("kernel \"{}\": {}", src.name, s.error().message));
      }
      kernel_cache_store(sub, file, *binary);
    }

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

    const auto handle = static_cast<KernelHandle>(kernels_.size());
    kernels_.push_back({module, fn, src.name, src.buffers, src.block});
    by_key_[key] = handle;
    if (from_cache) {
      ++stats_.cache_hits;
    } else {
      ++stats_.compiled;
      stats_.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    return handle;
  }

  Result<int> launch(KernelHandle k, std::array<uint32_t, 3> groups, std::span<const Buffer> args,
                     bool timed) override {
    if (k >= kernels_.size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel handle {} is not one this CUDA device compiled ({} kernels)", k,
                                    kernels_.size()));
    }
    const Kernel& kernel = kernels_[k];
    if (args.size() != static_cast<size_t>(kernel.buffers)) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("kernel \"{}\" takes {} buffers, the launch passes {}",
                                                                 kernel.name, kernel.buffers, args.size()));
    }
    for (int i = 0; i < 3; ++i) {
      if (groups[static_cast<size_t>(i)] == 0 || groups[static_cast<size_t>(i)] > info_.max_groups[static_cast<size_t>(i)]) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("kernel \"{}\": {} groups in dimension {}, the device allows 1..{}", kernel.name,
                                      groups[static_cast<size_t>(i)], "xyz"[i], info_.max_groups[static_cast<size_t>(i)]));
      }
    }
    std::vector<CUdeviceptr> ptrs(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      auto it = buffers_.find(args[i].id);
      if (it == buffers_.end()) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("kernel \"{}\": argument {} is buffer {}, which this device did not allocate or "
                                      "has released",
                                      kernel.name, i, args[i].id));
      }
      ptrs[i] = it->second.ptr;
    }
    std::vector<void*> params(ptrs.size());
    for (size_t i = 0; i < ptrs.size(); ++i) params[i] = &ptrs[i];
    if (auto s = bind(); !s) return s.error();

    CUevent start = nullptr;
    CUevent end = nullptr;
    if (timed) {
      auto a = event();
      if (!a) return a.error();
      auto b = event();
      if (!b) {
        free_events_.push_back(*a);
        return b.error();
      }
      start = *a;
      end = *b;
      if (CUresult r = d_.EventRecord(start, stream_); r != CUDA_SUCCESS) {
        free_events_.push_back(start);
        free_events_.push_back(end);
        return fail(ErrorCode::kDevice, "recording a timer event failed", r, "");
      }
    }
    CUresult r = d_.LaunchKernel(kernel.fn, groups[0], groups[1], groups[2], kernel.block[0], kernel.block[1],
                                 kernel.block[2], 0, stream_, params.empty() ? nullptr : params.data(), nullptr);
    if (r != CUDA_SUCCESS) {
      if (timed) {
        free_events_.push_back(start);
        free_events_.push_back(end);
      }
      return fail(ErrorCode::kDevice,
                  fmt::format("launch of kernel \"{}\" ({}x{}x{} groups of {}x{}x{}) failed", kernel.name, groups[0],
                              groups[1], groups[2], kernel.block[0], kernel.block[1], kernel.block[2]),
                  r, "");
    }
    if (std::find(launched_.begin(), launched_.end(), kernel.name) == launched_.end() && launched_.size() < 8) {
      launched_.push_back(kernel.name);
    }
    if (!timed) return -1;
    if (CUresult e = d_.EventRecord(end, stream_); e != CUDA_SUCCESS) {
      free_events_.push_back(start);
      free_events_.push_back(end);
      return fail(ErrorCode::kDevice, fmt::format("kernel \"{}\" was launched, but recording its timer failed", kernel.name),
                  e, "");
    }
    pending_.emplace_back(start, end);
    return static_cast<int>(pending_.size() - 1);
  }

  Status synchronize() override {
    if (auto s = bind(); !s) return s;
    return wait("synchronize");
  }

  Result<std::vector<double>> read_timers() override {
    if (auto s = bind(); !s) return s.error();
    std::vector<double> out;
    out.reserve(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
      float ms = 0;
      CUresult r = d_.EventElapsedTime(&ms, pending_[i].first, pending_[i].second);
      if (r == CUDA_ERROR_NOT_READY) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("CUDA device {}: timer {} has not completed; call synchronize() before "
                                      "read_timers()",
                                      info_.index, i));
      }
      if (r != CUDA_SUCCESS) return fail(ErrorCode::kDevice, fmt::format("reading timer {} failed", i), r, "");
      out.push_back(static_cast<double>(ms) * 1000.0);
    }
    for (auto& [start, end] : pending_) {
      free_events_.push_back(start);
      free_events_.push_back(end);
    }
    pending_.clear();
    return out;
  }

  CompileStats compile_stats() const override { return stats_; }

 private:
  struct Alloc {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
  };
  struct Kernel {
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    std::string name;
    int buffers = 0;
    std::array<uint32_t, 3> block{};
  };

  Error fail(ErrorCode code, const std::string& what, CUresult r, const std::string& fix) const {
    return make_error(code, fmt::format("CUDA device {} ({}): {}: {}{}{}", info_.index, info_.name, what, d_.error(r),
                                        fix.empty() ? "" : "; ", fix));
  }

  Status bind() const {
    if (CUresult r = d_.CtxSetCurrent(ctx_); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, "cannot make the context current", r, "");
    }
    return Ok{};
  }

  // Waits for the stream; an error here is one that an earlier launch raised.
  Status wait(const char* during) {
    CUresult r = d_.StreamSynchronize(stream_);
    std::vector<std::string> names;
    names.swap(launched_);
    if (r == CUDA_SUCCESS) return Ok{};
    std::string kernels;
    for (const auto& n : names) kernels += (kernels.empty() ? "" : ", ") + n;
    return fail(ErrorCode::kDevice,
                fmt::format("{} failed{}", during, kernels.empty() ? "" : " after launches of " + kernels), r,
                "an error in a kernel leaves the context unusable: fix the kernel, then open the device again");
  }

  Result<CUdeviceptr> range(const Buffer& b, uint64_t bytes, uint64_t offset, const char* what) const {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("CUDA device {}: {} to buffer {}, which this device did not allocate or has "
                                    "released",
                                    info_.index, what, b.id));
    }
    if (offset > it->second.bytes || bytes > it->second.bytes - offset) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("CUDA device {}: {} of {} bytes at offset {} overruns buffer {} of {} bytes",
                                    info_.index, what, bytes, offset, b.id, it->second.bytes));
    }
    return it->second.ptr + offset;
  }

  Result<CUevent> event() {
    if (!free_events_.empty()) {
      CUevent e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    CUevent e = nullptr;
    if (CUresult r = d_.EventCreate(&e, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
      return fail(ErrorCode::kDevice, "cannot create a timer event", r, "");
    }
    return e;
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
  DeviceInfo info_;
  CUdevice dev_ = 0;
  NvrtcInfo nvrtc_;
  std::string target_;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  std::unordered_map<uint64_t, Alloc> buffers_;
  uint64_t next_buffer_ = 1;
  std::vector<Kernel> kernels_;
  std::unordered_map<uint64_t, KernelHandle> by_key_;
  std::vector<std::pair<CUevent, CUevent>> pending_;
  std::vector<CUevent> free_events_;
  std::vector<std::string> launched_;  // kernels launched since the last wait, for error messages
  CompileStats stats_;
};

}  // namespace

Result<std::vector<DeviceInfo>> list_devices() {
  const auto& d = cuda_driver();
  if (!d) return d.error();
  int count = 0;
  if (CUresult r = d->DeviceGetCount(&count); r != CUDA_SUCCESS) {
    return make_error(ErrorCode::kUnavailable, fmt::format("cuDeviceGetCount failed: {}", d->error(r)));
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    auto info = describe(*d, i, nullptr);
    if (!info) return info.error();
    out.push_back(std::move(*info));
  }
  return out;
}

Result<std::unique_ptr<Backend>> open(int index) {
  const auto& d = cuda_driver();
  if (!d) return d.error();
  int count = 0;
  if (CUresult r = d->DeviceGetCount(&count); r != CUDA_SUCCESS) {
    return make_error(ErrorCode::kUnavailable, fmt::format("cuDeviceGetCount failed: {}", d->error(r)));
  }
  if (index < 0 || index >= count) {
    std::string names;
    for (int i = 0; i < count; ++i) {
      auto info = describe(*d, i, nullptr);
      names += fmt::format("{}{}: {}", i ? ", " : "", i, info ? info->name : "?");
    }
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("CUDA device {} does not exist: the driver sees {} device(s){}{}", index, count,
                                  count ? ": " : "", names));
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
