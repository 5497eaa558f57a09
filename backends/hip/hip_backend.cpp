// The HIP backend: device discovery, hiprtc-compiled modules; buffers, launches and event timers
// are GpuBackend's (gpu_common.h), over the runtime calls in HipApi.
#include "hip_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_common.h"
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

// The runtime calls GpuBackend makes, in its terms (see gpu_common.h).
struct HipApi {
  using Code = hipError_t;
  using Ptr = void*;
  using Stream = hipStream_t;
  using Event = hipEvent_t;
  using Module = hipModule_t;
  using Function = hipFunction_t;
  static constexpr const char* kName = "HIP";
  static constexpr hipError_t kSuccess = hipSuccess;
  static constexpr hipError_t kNotReady = hipErrorNotReady;
  static constexpr const char* kUnusableFix =
      "an error in a kernel can leave the device unusable: fix the kernel, then open the device again";

  const HipRuntime* h = nullptr;

  std::string error(hipError_t e) const { return h->error(e); }
  hipError_t alloc(void** p, uint64_t n) const { return h->Malloc(p, n); }
  hipError_t free(void* p) const { return h->Free(p); }
  // hipMemcpyHtoDAsync takes a non-const source for historical reasons; it only reads it.
  hipError_t upload(void* p, const void* src, uint64_t n, hipStream_t s) const {
    return h->MemcpyHtoDAsync(p, const_cast<void*>(src), n, s);
  }
  hipError_t download(void* dst, void* p, uint64_t n, hipStream_t s) const { return h->MemcpyDtoHAsync(dst, p, n, s); }
  hipError_t synchronize(hipStream_t s) const { return h->StreamSynchronize(s); }
  hipError_t destroy_stream(hipStream_t s) const { return h->StreamDestroy(s); }
  hipError_t unload(hipModule_t m) const { return h->ModuleUnload(m); }
  hipError_t create_event(hipEvent_t* e) const { return h->EventCreate(e); }
  hipError_t destroy_event(hipEvent_t e) const { return h->EventDestroy(e); }
  hipError_t record(hipEvent_t e, hipStream_t s) const { return h->EventRecord(e, s); }
  hipError_t elapsed(float* ms, hipEvent_t a, hipEvent_t b) const { return h->EventElapsedTime(ms, a, b); }
  hipError_t launch(hipFunction_t fn, std::array<uint32_t, 3> g, std::array<uint32_t, 3> b, hipStream_t s,
                    void** params) const {
    return h->ModuleLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], 0, s, params, nullptr);
  }
  static void* offset(void* p, uint64_t bytes) { return static_cast<char*>(p) + bytes; }
};

class HipBackend final : public gpu::GpuBackend<HipApi> {
 public:
  HipBackend(const HipRuntime& h, DeviceInfo info, HiprtcInfo rtc)
      : GpuBackend(HipApi{&h}, std::move(info)), h_(h), rtc_(std::move(rtc)) {}

  ~HipBackend() override {
    if (h_.SetDevice(info_.index) != hipSuccess) return;
    teardown();
  }

  Status init() {
    if (auto s = bind(); !s) return s;
    if (hipError_t e = h_.StreamCreateWithFlags(&stream_, hipStreamNonBlocking); e != hipSuccess) {
      stream_ = nullptr;
      return fail(ErrorCode::kUnavailable, "cannot create a stream", e, "check rocm-smi for the device's state");
    }
    return Ok{};
  }

 private:
  Status bind() const override {
    if (hipError_t e = h_.SetDevice(info_.index); e != hipSuccess) {
      return fail(ErrorCode::kDevice, "cannot select the device", e, "");
    }
    return Ok{};
  }

  Result<std::string> binary(const KernelSource& src, uint64_t hash, bool* from_cache) override {
    const std::string& target = info_.arch;
    const std::string sub = "hip/" + target;
    const std::string file = kernel_cache_key(hash, target, "hiprtc-" + rtc_.version, kOptionsTag) + ".hsaco";
    if (auto cached = kernel_cache_load(sub, file); cached && cached->rfind("\x7f" "ELF", 0) == 0) {
      *from_cache = true;
      return std::move(*cached);
    }
    auto code = compile_hip(src, target);
    if (!code) return code.error();
    kernel_cache_store(sub, file, *code);
    *from_cache = false;
    return code;
  }

  Result<Loaded> load(const KernelSource& src, uint64_t hash) override {
    const std::string& target = info_.arch;
    // The code object is kept for the module's lifetime: HIP does not promise to copy it.
    std::shared_ptr<const std::string> image;
    hipModule_t module = nullptr;
    bool from_cache = false;
    if (auto p = take_prepared(hash)) {
      from_cache = p->second;
      image = std::make_shared<const std::string>(std::move(p->first));
    } else {
      auto b = binary(src, hash, &from_cache);
      if (!b) return b.error();
      image = std::make_shared<const std::string>(std::move(*b));
    }
    hipError_t le = h_.ModuleLoadData(&module, image->data());
    if (le != hipSuccess && from_cache) {  // a cached code object this runtime cannot load: compile afresh
      module = nullptr;
      auto code = compile_hip(src, target);
      if (!code) return code.error();
      image = std::make_shared<const std::string>(std::move(*code));
      from_cache = false;
      le = h_.ModuleLoadData(&module, image->data());
      if (le == hipSuccess) {
        kernel_cache_store("hip/" + target, kernel_cache_key(hash, target, "hiprtc-" + rtc_.version, kOptionsTag) + ".hsaco",
                           *image);
      }
    }
    if (le != hipSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("kernel \"{}\": loading the code object for {} failed", src.name,
                                                  target),
                  le, "");
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
    return Loaded{module, fn, from_cache, std::move(image)};
  }

  const HipRuntime& h_;
  HiprtcInfo rtc_;
};

}  // namespace

Result<std::vector<DeviceInfo>> list_devices() {
  const auto& h = hip_runtime();
  if (!h) return h.error();
  int count = 0;
  if (hipError_t e = h->GetDeviceCount(&count); e != hipSuccess) {
    return make_error(ErrorCode::kUnavailable, fmt::format("hipGetDeviceCount failed: {}", h->error(e)));
  }
  return gpu::describe_devices(count, [&](int i) { return describe(*h, i); });
}

Result<std::unique_ptr<Backend>> open(int index) {
  const auto& h = hip_runtime();
  if (!h) return h.error();
  int count = 0;
  if (hipError_t e = h->GetDeviceCount(&count); e != hipSuccess) {
    return make_error(ErrorCode::kUnavailable, fmt::format("hipGetDeviceCount failed: {}", h->error(e)));
  }
  if (index < 0 || index >= count) {
    return gpu::no_such_device("HIP", "runtime", index, count, [&](int i) { return describe(*h, i); });
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
