// The HIP backend: device discovery, buffers, hiprtc-compiled modules, launches and event timers.
#include "hip_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>
#include <unordered_map>

#include "hip_runtime.h"
#include "hiprtc_compiler.h"
#include "kernel_disk_cache.h"

namespace gpusim::backend::hip {

namespace {

// Bumped when compile_hip's options change, so the disk cache never serves a binary built otherwise.
constexpr const char* kOptionsTag = "std=c++17;v1";

int attribute(const HipRuntime& h, int dev, hipDeviceAttribute_t a, int fallback) {
  int v = 0;
  return h.DeviceGetAttribute(&v, a, dev) == hipSuccess ? v : fallback;
}

bool is_gfx_at(const char* p, const char* end) {
  return end - p > 4 && std::strncmp(p, "gfx", 3) == 0 && std::isxdigit(static_cast<unsigned char>(p[3]));
}

// The device's gcnArchName ("gfx90a:sramecc+:xnack-"). hipDeviceProp_t's layout changed between
// ROCm releases, so the field is read where this header puts it if it holds a target name, else
// found by content (after name[256], which every layout starts with).
std::string gcn_arch_name(const HipRuntime& h, int dev) {
  // Room for any layout (ROCm 5's is about 800 bytes, ROCm 6's about 1.5 KiB).
  std::vector<char> buffer(16384 + 16, '\0');
  void* aligned = buffer.data();
  size_t space = buffer.size();
  char* props = static_cast<char*>(std::align(16, 16384, aligned, space));
  if (props == nullptr || h.GetDeviceProperties(props, dev) != hipSuccess) return {};
  const char* end = props + 16384;
  const char* at = props + offsetof(hipDeviceProp_t, gcnArchName);
  if (!is_gfx_at(at, end)) {
    at = nullptr;
    for (const char* p = props + 256; p + 4 < end; ++p) {
      if ((p[-1] == '\0') && is_gfx_at(p, end)) {
        at = p;
        break;
      }
    }
  }
  if (at == nullptr) return {};
  return std::string(at, strnlen(at, static_cast<size_t>(std::min<ptrdiff_t>(end - at, 255))));
}

bool has_matrix_units(const std::string& gfx) {
  return gfx == "gfx908" || gfx == "gfx90a" || gfx.rfind("gfx94", 0) == 0 || gfx.rfind("gfx95", 0) == 0 ||
         gfx.rfind("gfx11", 0) == 0 || gfx.rfind("gfx12", 0) == 0;
}

Result<DeviceInfo> describe(const HipRuntime& h, int index) {
  DeviceInfo info;
  info.backend = "hip";
  info.index = index;
  char name[256] = {};
  if (h.DeviceGetName(name, static_cast<int>(sizeof name) - 1, index) == hipSuccess) info.name = name;
  const std::string gcn = gcn_arch_name(h, index);
  if (gcn.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("HIP device {} ({}): the runtime does not report its gfx target (gcnArchName); "
                                  "check rocminfo",
                                  index, info.name));
  }
  if (info.name.empty()) info.name = gcn;
  info.vendor = "AMD";
  info.driver = fmt::format("HIP runtime {}", h.version_string());
  info.arch = gcn.substr(0, gcn.find(':'));
  size_t total = 0;
  if (h.DeviceTotalMem(&total, index) == hipSuccess) info.memory_bytes = total;
  info.compute_units = attribute(h, index, hipDeviceAttributeMultiprocessorCount, 0);
  info.subgroup_size = attribute(h, index, hipDeviceAttributeWarpSize, 64);
  info.max_threads_per_group = attribute(h, index, hipDeviceAttributeMaxThreadsPerBlock, 1024);
  info.max_shared_bytes = static_cast<uint64_t>(attribute(h, index, hipDeviceAttributeMaxSharedMemoryPerBlock, 65536));
  auto grid = [&](hipDeviceAttribute_t a) {
    const int v = attribute(h, index, a, 65535);
    return static_cast<uint32_t>(v > 0 ? v : 65535);
  };
  info.max_groups = {grid(hipDeviceAttributeMaxGridDimX), grid(hipDeviceAttributeMaxGridDimY),
                     grid(hipDeviceAttributeMaxGridDimZ)};
  info.fp16 = true;  // every GPU ROCm supports (gfx8 and later) has fp16 arithmetic
  info.fp64 = true;
  info.int64 = true;
  info.matrix_units = has_matrix_units(info.arch);  // MFMA (CDNA) or WMMA (RDNA3+)
  info.timer_resolution_ns = 1000;
  return info;
}

class HipBackend final : public Backend {
 public:
  HipBackend(const HipRuntime& h, DeviceInfo info, HiprtcInfo rtc)
      : h_(h), info_(std::move(info)), rtc_(std::move(rtc)) {}

  ~HipBackend() override {
    if (h_.SetDevice(info_.index) != hipSuccess) return;
    // Teardown: errors (a device lost to an earlier fault) leave nothing more to do.
    if (stream_ != nullptr) (void)h_.StreamSynchronize(stream_);
    for (auto& [start, end] : pending_) {
      free_events_.push_back(start);
      free_events_.push_back(end);
    }
    for (hipEvent_t e : free_events_) (void)h_.EventDestroy(e);
    for (auto& k : kernels_) (void)h_.ModuleUnload(k.module);
    for (auto& [id, b] : buffers_) (void)h_.Free(b.ptr);
    if (stream_ != nullptr) (void)h_.StreamDestroy(stream_);
  }

  Status init() {
    if (auto s = bind(); !s) return s;
    if (hipError_t e = h_.StreamCreateWithFlags(&stream_, hipStreamNonBlocking); e != hipSuccess) {
      stream_ = nullptr;
      return fail(ErrorCode::kUnavailable, "cannot create a stream", e, "check rocm-smi for the device's state");
    }
    return Ok{};
  }

  const DeviceInfo& info() const override { return info_; }

  Result<Buffer> allocate(uint64_t bytes) override {
    if (auto s = bind(); !s) return s.error();
    void* ptr = nullptr;
    if (hipError_t e = h_.Malloc(&ptr, std::max<uint64_t>(bytes, 4)); e != hipSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("cannot allocate {} bytes", bytes), e,
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
    // hipMemcpyHtoDAsync takes a non-const source for historical reasons; it only reads it.
    if (hipError_t e = h_.MemcpyHtoDAsync(*ptr, const_cast<void*>(src), bytes, stream_); e != hipSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("upload of {} bytes to buffer {} failed", bytes, b.id), e, "");
    }
    return wait("upload");
  }

  Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override {
    auto ptr = range(b, bytes, offset, "download");
    if (!ptr) return ptr.error();
    if (bytes == 0) return Ok{};
    if (auto s = bind(); !s) return s;
    if (hipError_t e = h_.MemcpyDtoHAsync(dst, *ptr, bytes, stream_); e != hipSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("download of {} bytes from buffer {} failed", bytes, b.id), e, "");
    }
    return wait("download");
  }

  void release(const Buffer& b) override {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) return;
    if (!bind()) return;
    (void)h_.StreamSynchronize(stream_);  // a pending kernel must never read freed memory
    (void)h_.Free(it->second.ptr);
    buffers_.erase(it);
  }

  Result<KernelHandle> compile(const KernelSource& src) override {
    if (auto s = can_run(src); !s) return s.error();
    if (src.language != Language::kCudaCpp) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": the HIP backend compiles CUDA C++, this source is GLSL", src.name));
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
    const std::string& target = info_.arch;
    const std::string sub = "hip/" + target;
    const std::string file = kernel_cache_key(hash, target, "hiprtc-" + rtc_.version, kOptionsTag) + ".hsaco";
    // The code object is kept for the module's lifetime: HIP does not promise to copy it.
    std::shared_ptr<const std::string> image;
    hipModule_t module = nullptr;
    bool from_cache = false;
    if (auto cached = kernel_cache_load(sub, file); cached && cached->rfind("\x7f" "ELF", 0) == 0) {
      image = std::make_shared<const std::string>(std::move(*cached));
      from_cache = h_.ModuleLoadData(&module, image->data()) == hipSuccess;
      if (!from_cache) module = nullptr;
    }
    if (!from_cache) {
      auto code = compile_hip(src, target);
      if (!code) return code.error();
      image = std::make_shared<const std::string>(std::move(*code));
      if (hipError_t e = h_.ModuleLoadData(&module, image->data()); e != hipSuccess) {
        return fail(ErrorCode::kDevice, fmt::format("kernel \"{}\": loading the code object for {} failed", src.name,
                                                    target),
                    e, "");
      }
      kernel_cache_store(sub, file, *image);
    }

    hipFunction_t fn = nullptr;
    if (hipError_t e = h_.ModuleGetFunction(&fn, module, src.name.c_str()); e != hipSuccess) {
      (void)h_.ModuleUnload(module);
      return fail(ErrorCode::kDevice,
                  fmt::format("kernel \"{}\": the compiled module has no entry point of that name", src.name), e,
                  "declare the kernel extern \"C\" __global__ so that its name is not mangled");
    }
    const uint64_t threads = uint64_t{src.block[0]} * src.block[1] * src.block[2];
    int max_threads = 0;
    if (h_.FuncGetAttribute != nullptr &&
        h_.FuncGetAttribute(&max_threads, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) == hipSuccess &&
        max_threads > 0 && threads > static_cast<uint64_t>(max_threads)) {
      (void)h_.ModuleUnload(module);
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("kernel \"{}\" on {}: a block can have at most {} threads with this kernel's "
                                    "registers, it asks for {}; add __launch_bounds__({}) or choose a smaller block",
                                    src.name, info_.name, max_threads, threads, threads));
    }

    const auto handle = static_cast<KernelHandle>(kernels_.size());
    kernels_.push_back({module, fn, src.name, src.buffers, src.block, image});
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
                        fmt::format("kernel handle {} is not one this HIP device compiled ({} kernels)", k,
                                    kernels_.size()));
    }
    const Kernel& kernel = kernels_[k];
    if (args.size() != static_cast<size_t>(kernel.buffers)) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("kernel \"{}\" takes {} buffers, the launch passes {}",
                                                                 kernel.name, kernel.buffers, args.size()));
    }
    for (size_t i = 0; i < 3; ++i) {
      if (groups[i] == 0 || groups[i] > info_.max_groups[i]) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("kernel \"{}\": {} groups in dimension {}, the device allows 1..{}", kernel.name,
                                      groups[i], "xyz"[i], info_.max_groups[i]));
      }
    }
    std::vector<void*> ptrs(args.size());
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

    hipEvent_t start = nullptr;
    hipEvent_t end = nullptr;
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
      if (hipError_t e = h_.EventRecord(start, stream_); e != hipSuccess) {
        free_events_.push_back(start);
        free_events_.push_back(end);
        return fail(ErrorCode::kDevice, "recording a timer event failed", e, "");
      }
    }
    hipError_t e = h_.ModuleLaunchKernel(kernel.fn, groups[0], groups[1], groups[2], kernel.block[0], kernel.block[1],
                                         kernel.block[2], 0, stream_, params.empty() ? nullptr : params.data(),
                                         nullptr);
    if (e != hipSuccess) {
      if (timed) {
        free_events_.push_back(start);
        free_events_.push_back(end);
      }
      return fail(ErrorCode::kDevice,
                  fmt::format("launch of kernel \"{}\" ({}x{}x{} groups of {}x{}x{}) failed", kernel.name, groups[0],
                              groups[1], groups[2], kernel.block[0], kernel.block[1], kernel.block[2]),
                  e, "");
    }
    if (std::find(launched_.begin(), launched_.end(), kernel.name) == launched_.end() && launched_.size() < 8) {
      launched_.push_back(kernel.name);
    }
    if (!timed) return -1;
    if (hipError_t r = h_.EventRecord(end, stream_); r != hipSuccess) {
      free_events_.push_back(start);
      free_events_.push_back(end);
      return fail(ErrorCode::kDevice, fmt::format("kernel \"{}\" was launched, but recording its timer failed", kernel.name),
                  r, "");
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
      hipError_t e = h_.EventElapsedTime(&ms, pending_[i].first, pending_[i].second);
      if (e == hipErrorNotReady) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("HIP device {}: timer {} has not completed; call synchronize() before "
                                      "read_timers()",
                                      info_.index, i));
      }
      if (e != hipSuccess) return fail(ErrorCode::kDevice, fmt::format("reading timer {} failed", i), e, "");
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
    void* ptr = nullptr;
    uint64_t bytes = 0;
  };
  struct Kernel {
    hipModule_t module = nullptr;
    hipFunction_t fn = nullptr;
    std::string name;
    int buffers = 0;
    std::array<uint32_t, 3> block{};
    std::shared_ptr<const std::string> image;
  };

  Error fail(ErrorCode code, const std::string& what, hipError_t e, const std::string& fix) const {
    return make_error(code, fmt::format("HIP device {} ({}): {}: {}{}{}", info_.index, info_.name, what, h_.error(e),
                                        fix.empty() ? "" : "; ", fix));
  }

  Status bind() const {
    if (hipError_t e = h_.SetDevice(info_.index); e != hipSuccess) {
      return fail(ErrorCode::kDevice, "cannot select the device", e, "");
    }
    return Ok{};
  }

  Status wait(const char* during) {
    hipError_t e = h_.StreamSynchronize(stream_);
    std::vector<std::string> names;
    names.swap(launched_);
    if (e == hipSuccess) return Ok{};
    std::string kernels;
    for (const auto& n : names) kernels += (kernels.empty() ? "" : ", ") + n;
    return fail(ErrorCode::kDevice,
                fmt::format("{} failed{}", during, kernels.empty() ? "" : " after launches of " + kernels), e,
                "an error in a kernel can leave the device unusable: fix the kernel, then open the device again");
  }

  Result<hipDeviceptr_t> range(const Buffer& b, uint64_t bytes, uint64_t offset, const char* what) const {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("HIP device {}: {} to buffer {}, which this device did not allocate or has "
                                    "released",
                                    info_.index, what, b.id));
    }
    if (offset > it->second.bytes || bytes > it->second.bytes - offset) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("HIP device {}: {} of {} bytes at offset {} overruns buffer {} of {} bytes",
                                    info_.index, what, bytes, offset, b.id, it->second.bytes));
    }
    return static_cast<hipDeviceptr_t>(static_cast<char*>(it->second.ptr) + offset);
  }

  Result<hipEvent_t> event() {
    if (!free_events_.empty()) {
      hipEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    hipEvent_t e = nullptr;
    if (hipError_t r = h_.EventCreate(&e); r != hipSuccess) {
      return fail(ErrorCode::kDevice, "cannot create a timer event", r, "");
    }
    return e;
  }

  const HipRuntime& h_;
  DeviceInfo info_;
  HiprtcInfo rtc_;
  hipStream_t stream_ = nullptr;
  std::unordered_map<uint64_t, Alloc> buffers_;
  uint64_t next_buffer_ = 1;
  std::vector<Kernel> kernels_;
  std::unordered_map<uint64_t, KernelHandle> by_key_;
  std::vector<std::pair<hipEvent_t, hipEvent_t>> pending_;
  std::vector<hipEvent_t> free_events_;
  std::vector<std::string> launched_;
  CompileStats stats_;
};

}  // namespace

Result<std::vector<DeviceInfo>> list_devices() {
  const auto& h = hip_runtime();
  if (!h) return h.error();
  int count = 0;
  if (hipError_t e = h->GetDeviceCount(&count); e != hipSuccess) {
    return make_error(ErrorCode::kUnavailable, fmt::format("hipGetDeviceCount failed: {}", h->error(e)));
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    auto info = describe(*h, i);
    if (!info) return info.error();
    out.push_back(std::move(*info));
  }
  return out;
}

Result<std::unique_ptr<Backend>> open(int index) {
  const auto& h = hip_runtime();
  if (!h) return h.error();
  int count = 0;
  if (hipError_t e = h->GetDeviceCount(&count); e != hipSuccess) {
    return make_error(ErrorCode::kUnavailable, fmt::format("hipGetDeviceCount failed: {}", h->error(e)));
  }
  if (index < 0 || index >= count) {
    std::string names;
    for (int i = 0; i < count; ++i) {
      auto info = describe(*h, i);
      names += fmt::format("{}{}: {}", i ? ", " : "", i, info ? info->name : "?");
    }
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("HIP device {} does not exist: the runtime sees {} device(s){}{}", index, count,
                                  count ? ": " : "", names));
  }
  auto rtc = hiprtc_info();
  if (!rtc) return rtc.error();
  auto info = describe(*h, index);
  if (!info) return info.error();
  auto backend = std::make_unique<HipBackend>(*h, std::move(*info), std::move(*rtc));
  if (auto s = backend->init(); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gpusim::backend::hip
