// The backend interface: what gpusim needs from a device to run generated kernels for real and
// time them. One implementation per API, each in its own folder behind its own CMake option
// (backends/vulkan, backends/cuda, backends/hip); the CPU reference (backends/cpu) is the oracle
// and runs graphs directly, not through this interface.
//
// Shape of the interface (after ggml's backend and IREE's HAL drivers, much smaller): a device is
// opened by backend name and index; buffers are opaque handles; kernels are compiled from source
// (CUDA C++ for CUDA and HIP, GLSL compute for Vulkan — see backends/codegen) into a handle, with a
// compile cache keyed by the source text, so a kernel the run has seen compiles once; launches are
// enqueued in order on one queue, each may carry a device timer (CUDA/HIP events, Vulkan timestamp
// queries); synchronize() waits for everything enqueued, then the timers can be read.
//
// Vendor libraries are loaded with dlopen at run time, so one gpusim binary runs on machines with
// and without each driver: a backend whose SDK headers were absent at build time is not built
// (built_backends() does not list it); one whose driver is absent at run time fails open() with
// ErrorCode::kUnavailable and a message naming the library and the package that provides it.
//
// Usage:
//   auto dev = gpusim::backend::open("vulkan", 0);
//   if (!dev) { fmt::print(stderr, "{}\n", dev.error().message); return; }
//   auto buf = (*dev)->allocate(n * 4);
//   auto k = (*dev)->compile(src);                      // src: backend::KernelSource
//   auto t = (*dev)->launch(*k, {groups, 1, 1}, {*buf}, /*timed=*/true);
//   (*dev)->synchronize();
//   double us = (*dev)->read_timers()->at(*t);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpusim/result.h"

namespace gpusim::backend {

// The source languages a backend compiles. CUDA C++ is one text for CUDA (NVRTC) and HIP (hiprtc).
enum class Language { kCudaCpp, kGlsl };

struct DeviceInfo {
  std::string backend;        // "vulkan", "cuda", "hip"
  int index = 0;              // as given to open()
  std::string name;           // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;         // "NVIDIA", "AMD", "Mesa", ...
  std::string driver;         // driver / runtime version
  std::string arch;           // "sm_90", "gfx90a"; Vulkan: "vulkan 1.3"
  bool is_cpu = false;        // a CPU implementation (lavapipe, SwiftShader)
  uint64_t memory_bytes = 0;  // device memory (largest device-local heap on Vulkan)
  int compute_units = 0;      // SMs / CUs (0 where the API does not say)
  int subgroup_size = 32;     // warp / wavefront / subgroup
  int max_threads_per_group = 1024;
  uint64_t max_shared_bytes = 49152;  // per group (workgroup shared memory)
  std::array<uint32_t, 3> max_groups{65535, 65535, 65535};
  uint64_t max_buffer_bytes = UINT64_MAX;  // largest buffer one kernel argument may bind (Vulkan: maxStorageBufferRange)
  bool fp16 = false;          // fp16 arithmetic and 16-bit storage in buffers
  bool fp64 = false;
  bool int64 = false;
  bool matrix_units = false;  // mma/wmma (CUDA), MFMA/WMMA (HIP), VK_KHR_cooperative_matrix (Vulkan)
  double timer_resolution_ns = 1;
};

// A compilable kernel: one translation unit with one entry point taking `buffers` buffer
// arguments (binding 0..buffers-1 on Vulkan, pointer parameters on CUDA/HIP), launched with
// `block` threads per group. GLSL sources declare the same local size themselves.
struct KernelSource {
  std::string name;  // entry point (CUDA/HIP: extern "C" symbol; GLSL: always main)
  Language language = Language::kCudaCpp;
  std::string code;
  int buffers = 0;
  std::array<uint32_t, 3> block{64, 1, 1};
  uint64_t shared_bytes = 0;  // static shared memory the source declares
  // What the kernel needs from the device (the capability query checks these).
  bool needs_fp16 = false;
  bool needs_fp64 = false;
  bool needs_int64 = false;
  bool needs_matrix_units = false;
  int needs_subgroup_size = 0;  // 0: any
};

struct Buffer {
  uint64_t id = 0;
  uint64_t bytes = 0;
};

using KernelHandle = uint32_t;

struct CompileStats {
  int compiled = 0;     // sources compiled
  int cache_hits = 0;   // compile() calls answered from the cache
  double compile_ms = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;

  // Buffers. upload/download are synchronous and ordered after everything enqueued before them.
  virtual Result<Buffer> allocate(uint64_t bytes) = 0;
  virtual Status upload(const Buffer& b, const void* src, uint64_t bytes, uint64_t offset = 0) = 0;
  virtual Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset = 0) = 0;
  virtual void release(const Buffer& b) = 0;

  // Compiles (or finds in the cache) a kernel. Errors carry the compiler's log and the kernel name.
  virtual Result<KernelHandle> compile(const KernelSource& src) = 0;
  // Compiles the device-independent part of many kernels at once, on up to `threads` threads (0:
  // the machine's cores), so that compile() of each then only loads it (Vulkan: GLSL to SPIR-V
  // with shaderc; CUDA and HIP: the binary with NVRTC or hiprtc — each compiles separate programs
  // concurrently). Errors are not reported here: compile() of that source reports them. A backend
  // without such a split compiles in compile() only.
  virtual void prepare(std::span<const KernelSource> sources, int threads = 0) {
    (void)sources;
    (void)threads;
  }

  // Enqueues a launch of `groups` thread groups. With timed=true the launch is bracketed by device
  // timers; the returned value is its slot in read_timers() (-1 when untimed).
  virtual Result<int> launch(KernelHandle k, std::array<uint32_t, 3> groups, std::span<const Buffer> args,
                             bool timed) = 0;
  // Waits for every enqueued launch.
  virtual Status synchronize() = 0;
  // Device time of each timed launch since the last read, in microseconds, in slot order; clears
  // the slots. Call after synchronize().
  virtual Result<std::vector<double>> read_timers() = 0;

  virtual CompileStats compile_stats() const = 0;

  // Capability query: can this device run the kernel (dtype support, shared memory, threads per
  // group, subgroup size, matrix units)? The error says which requirement fails and the limit.
  Status can_run(const KernelSource& src) const;
};

// The device backends gpusim has, built into this binary or not ("vulkan", "cuda", "hip"): the one
// list every option that names a device backend is checked against.
bool is_device_backend(const std::string& name);

// Backends compiled into this binary ("vulkan", "cuda", "hip"), whether or not a driver is present.
std::vector<std::string> built_backends();

// The devices a backend sees now; kUnavailable (with what to install) where its driver is missing.
Result<std::vector<DeviceInfo>> list_devices(const std::string& backend);

// Opens device `index` of `backend`. Errors: kInvalidArgument (unknown or not built; lists the
// built ones), kUnavailable (driver missing, no device, index out of range; says what to do).
Result<std::unique_ptr<Backend>> open(const std::string& backend, int index = 0);

// 64-bit FNV-1a of a kernel's language, entry name, text, buffer count and block: the compile caches' key.
uint64_t source_hash(const KernelSource& src);

// For Backend::prepare: the sources of `lang` with code, once per source_hash, that `done(hash)`
// does not already cover, each with its hash.
std::vector<std::pair<uint64_t, const KernelSource*>> sources_to_prepare(std::span<const KernelSource> sources,
                                                                         Language lang,
                                                                         const std::function<bool(uint64_t)>& done);
// Runs work(i) for every i in [0, n) on up to `threads` threads (0: the machine's cores), the
// calling thread among them; returns when all are done.
void run_parallel(size_t n, int threads, const std::function<void(size_t)>& work);

}  // namespace gpusim::backend
