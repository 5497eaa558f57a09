// The backend plugin interface, version GPUSIM_BACKEND_API_VERSION: what gpusim needs from a device
// to run generated kernels for real and time them, and how a third party adds one. gpusim's own
// Vulkan, CUDA and HIP backends implement the same class (backends/); so can an engine's.
//
// Shape (after ggml's backend interface and IREE's HAL drivers, much smaller): a device is opened by
// backend name and index; buffers are opaque handles; kernels are compiled from source (CUDA C++
// for CUDA and HIP, GLSL compute for Vulkan: DeviceInfo::language says which, and codegen emits
// it) into a handle, with a compile cache keyed by the source text; launches are enqueued in order
// on one queue, each may carry a device timer; synchronize() waits for everything enqueued, then
// the timers can be read.
//
// A plugin: implement Backend, then register it once before compiling for it.
//
//   class MyDevice final : public gpusim::backend::Backend { ... };
//   gpusim::backend::BackendPlugin p;
//   p.name = "mydev";
//   p.list_devices = [] { return gpusim::Result<std::vector<gpusim::backend::DeviceInfo>>(...); };
//   p.open = [](int index) -> gpusim::Result<std::unique_ptr<gpusim::backend::Backend>> { ... };
//   if (auto st = gpusim::backend::register_backend(std::move(p)); !st) { ... }
//   auto program = session.compile(model, {.backend = "mydev"});   // gpusim.h
//
// Versioning: GPUSIM_BACKEND_API_VERSION changes whenever this header changes incompatibly; a
// plugin built against another version is refused at registration, naming both versions.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpusim/export.h"
#include "gpusim/result.h"

#define GPUSIM_BACKEND_API_VERSION 1

namespace gpusim::backend {

// The source languages a backend compiles. CUDA C++ is one text for CUDA (NVRTC) and HIP (hiprtc).
enum class Language { kCudaCpp, kGlsl };

struct DeviceInfo {
  std::string backend;        // "vulkan", "cuda", "hip", or a plugin's name
  // The source language compile() takes: codegen emits the kernels in it.
  Language language = Language::kCudaCpp;
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

class GPUSIM_API Backend {
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

// A backend added from outside gpusim. `api_version` stays at its default: it records the header
// the plugin was compiled against.
struct BackendPlugin {
  int api_version = GPUSIM_BACKEND_API_VERSION;
  std::string name;  // how CompileOptions::backend and `--backend` name it: [a-z0-9_-], not a built-in's
  std::function<Result<std::vector<DeviceInfo>>()> list_devices;
  std::function<Result<std::unique_ptr<Backend>>(int index)> open;
};

// Registers a plugin for this process (thread-safe). Refused (kInvalidArgument, naming the field
// and the fix): another API version, an empty or malformed name, a name gpusim or another plugin
// already uses, a missing list_devices or open.
GPUSIM_API Status register_backend(BackendPlugin plugin);
// Removes a registered plugin; kNotFound when there is none of that name. Devices it opened stay
// valid (they are the caller's).
GPUSIM_API Status unregister_backend(const std::string& name);
// The plugins registered now, by name.
GPUSIM_API std::vector<std::string> registered_backends();

}  // namespace gpusim::backend
