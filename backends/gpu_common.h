// What the CUDA and HIP backends (backends/cuda, backends/hip) share. The two APIs are one model
// under two sets of names — device pointers, one stream, modules and functions, event pairs as
// timers — so the bookkeeping around the driver calls is written once, here, instead of twice:
//
//  - GpuBackend<Api>: the buffer table and its range checks, the compile cache and kernel table,
//    launch argument checks, the event pool behind timed launches, the note of which kernels ran
//    before a failed wait, and the teardown order. A backend derives from it, passes its driver
//    calls in as a small traits struct (CudaApi, HipApi), and keeps only what really differs:
//    device discovery, making the device current (bind) and turning a source into a loaded
//    module (load: NVRTC + cuModuleLoadDataEx, hiprtc + hipModuleLoadData).
//  - describe_devices / no_such_device: list_devices() and open()'s index check.
//  - The runtime compilers' (NVRTC, hiprtc) source check and dlopen, symbol and program-log helpers,
//    and the command-line disassemblers beside them (nvdisasm, llvm-objdump): finding and running one.
//
// Messages name the API through Api::kName ("CUDA", "HIP"), so they read exactly as each backend
// wrote them before. Internal to the two backends: header-only, nothing here is public interface.
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend.h"
#include "base/parallel.h"

namespace gpusim::backend::gpu {

// Api provides (CudaApi in cuda/cuda_backend.cpp, HipApi in hip/hip_backend.cpp):
//   types   Code (CUresult, hipError_t), Ptr, Stream, Event, Module, Function
//   values  kName ("CUDA"), kSuccess, kNotReady, kUnusableFix (the advice after a failed wait)
//   calls   error(r); alloc(&p, n); free(p); upload(p, src, n, stream); download(dst, p, n, stream);
//           synchronize(stream); destroy_stream(stream); unload(module); create_event(&e);
//           destroy_event(e); record(e, stream); elapsed(&ms, start, end);
//           launch(fn, groups, block, stream, params); static offset(p, bytes)
template <class Api>
class GpuBackend : public Backend {
 public:
  using Code = typename Api::Code;
  using Ptr = typename Api::Ptr;
  using Event = typename Api::Event;
  using Module = typename Api::Module;
  using Function = typename Api::Function;

  const DeviceInfo& info() const override { return info_; }

  Result<Buffer> allocate(uint64_t bytes) override {
    if (auto s = bind(); !s) return s.error();
    Ptr ptr{};
    // cuMemAlloc rejects 0 bytes; an empty tensor still gets a distinct, valid buffer.
    if (Code r = api_.alloc(&ptr, std::max<uint64_t>(bytes, 4)); r != Api::kSuccess) {
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
    if (Code r = api_.upload(*ptr, src, bytes, stream_); r != Api::kSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("upload of {} bytes to buffer {} failed", bytes, b.id), r, "");
    }
    return wait("upload");
  }

  Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override {
    auto ptr = range(b, bytes, offset, "download");
    if (!ptr) return ptr.error();
    if (bytes == 0) return Ok{};
    if (auto s = bind(); !s) return s;
    if (Code r = api_.download(dst, *ptr, bytes, stream_); r != Api::kSuccess) {
      return fail(ErrorCode::kDevice, fmt::format("download of {} bytes from buffer {} failed", bytes, b.id), r, "");
    }
    return wait("download");
  }

  void release(const Buffer& b) override {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) return;
    if (!bind()) return;
    // cuMemFree waits for work using the memory, hipFree may not; the stream is synchronized
    // first so that a pending kernel never reads freed memory.
    (void)api_.synchronize(stream_);
    (void)api_.free(it->second.ptr);
    buffers_.erase(it);
  }

  // Builds the binaries of many kernels at once on up to `threads` threads (0: the machine's
  // cores): NVRTC and hiprtc compile separate programs concurrently, and binary() makes no driver
  // call. compile() of each source then only loads its module. Errors are compile()'s to report.
  void prepare(std::span<const KernelSource> sources, int threads) override {
    const auto todo = sources_to_prepare(sources, Language::kCudaCpp,
                                         [&](uint64_t h) { return loaded_.count(h) || prepared_.count(h); });
    if (todo.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::optional<std::pair<std::string, bool>>> out(todo.size());
    base::for_each_index(todo.size(), threads, [&](size_t i) {
      bool from_cache = false;
      if (auto b = binary(*todo[i].second, todo[i].first, &from_cache)) out[i] = std::make_pair(std::move(*b), from_cache);
    });
    for (size_t i = 0; i < todo.size(); ++i) {
      if (out[i]) prepared_[todo[i].first] = std::move(*out[i]);
    }
    stats_.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  // The checks and the in-memory cache are shared; load() compiles (or reads from the disk
  // cache, or takes what prepare() built) and loads the module, finds the entry point and checks
  // the block size.
  Result<KernelHandle> compile(const KernelSource& src) override {
    if (auto s = can_run(src); !s) return s.error();
    if (src.language != Language::kCudaCpp) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": the {} backend compiles CUDA C++, this source is GLSL", src.name,
                                    Api::kName));
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
    auto loaded = load(src, hash);
    if (!loaded) return loaded.error();

    const auto handle = static_cast<KernelHandle>(kernels_.size());
    kernels_.push_back({loaded->module, loaded->fn, src.name, src.buffers, src.block, std::move(loaded->image)});
    by_key_[key] = handle;
    loaded_.insert(hash);
    if (loaded->from_cache) {
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
                        fmt::format("kernel handle {} is not one this {} device compiled ({} kernels)", k, Api::kName,
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
    std::vector<Ptr> ptrs(args.size());
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

    Event start{};
    Event end{};
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
      if (Code r = api_.record(start, stream_); r != Api::kSuccess) {
        free_events_.push_back(start);
        free_events_.push_back(end);
        return fail(ErrorCode::kDevice, "recording a timer event failed", r, "");
      }
    }
    Code r = api_.launch(kernel.fn, groups, kernel.block, stream_, params.empty() ? nullptr : params.data());
    if (r != Api::kSuccess) {
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
    if (Code e = api_.record(end, stream_); e != Api::kSuccess) {
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
      Code r = api_.elapsed(&ms, pending_[i].first, pending_[i].second);
      if (r == Api::kNotReady) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("{} device {}: timer {} has not completed; call synchronize() before "
                                      "read_timers()",
                                      Api::kName, info_.index, i));
      }
      if (r != Api::kSuccess) return fail(ErrorCode::kDevice, fmt::format("reading timer {} failed", i), r, "");
      out.push_back(static_cast<double>(ms) * 1000.0);
    }
    recycle_pending();
    return out;
  }

  CompileStats compile_stats() const override { return stats_; }

 protected:
  // What load() hands back: the loaded module and its entry point.
  struct Loaded {
    Module module{};
    Function fn{};
    bool from_cache = false;                    // read from the disk cache, not compiled
    std::shared_ptr<const std::string> image;  // kept for the module's lifetime where the API needs it
  };

  GpuBackend(Api api, DeviceInfo info) : api_(std::move(api)), info_(std::move(info)) {}

  // Makes this device current for the calling thread.
  virtual Status bind() const = 0;
  // Compiles src (hash: source_hash(src)) or finds it in the disk cache (or takes what
  // prepare() built: take_prepared), loads the module and finds its entry point; called with
  // the device bound.
  virtual Result<Loaded> load(const KernelSource& src, uint64_t hash) = 0;
  // The device binary of src: read from the disk cache (*from_cache true) or compiled and stored
  // there. Thread-safe and without driver calls: prepare() runs it on many threads at once.
  virtual Result<std::string> binary(const KernelSource& src, uint64_t hash, bool* from_cache) = 0;
  // The binary prepare() built for `hash` and whether it came from the disk cache, taken out;
  // nullopt where it built none.
  std::optional<std::pair<std::string, bool>> take_prepared(uint64_t hash) {
    auto it = prepared_.find(hash);
    if (it == prepared_.end()) return std::nullopt;
    std::pair<std::string, bool> b = std::move(it->second);
    prepared_.erase(it);
    return b;
  }

  // "CUDA device 0 (NVIDIA H200): <what>: <driver's error>[; <fix>]"
  Error fail(ErrorCode code, const std::string& what, Code r, const std::string& fix) const {
    return make_error(code, fmt::format("{} device {} ({}): {}: {}{}{}", Api::kName, info_.index, info_.name, what,
                                        api_.error(r), fix.empty() ? "" : "; ", fix));
  }

  // For the derived destructor, with the device bound: waits, then frees everything this device
  // made. Errors (a device lost to an earlier fault) leave nothing more to do.
  void teardown() {
    if (stream_ != nullptr) (void)api_.synchronize(stream_);
    recycle_pending();
    for (Event e : free_events_) (void)api_.destroy_event(e);
    for (auto& k : kernels_) (void)api_.unload(k.module);
    for (auto& [id, b] : buffers_) (void)api_.free(b.ptr);
    if (stream_ != nullptr) (void)api_.destroy_stream(stream_);
  }

  Api api_;
  DeviceInfo info_;
  typename Api::Stream stream_ = nullptr;  // created by the derived init()

 private:
  struct Alloc {
    Ptr ptr{};
    uint64_t bytes = 0;
  };
  struct Kernel {
    Module module{};
    Function fn{};
    std::string name;
    int buffers = 0;
    std::array<uint32_t, 3> block{};
    std::shared_ptr<const std::string> image;
  };

  // Waits for the stream; an error here is one that an earlier launch raised.
  Status wait(const char* during) {
    Code r = api_.synchronize(stream_);
    std::vector<std::string> names;
    names.swap(launched_);
    if (r == Api::kSuccess) return Ok{};
    std::string kernels;
    for (const auto& n : names) kernels += (kernels.empty() ? "" : ", ") + n;
    return fail(ErrorCode::kDevice,
                fmt::format("{} failed{}", during, kernels.empty() ? "" : " after launches of " + kernels), r,
                Api::kUnusableFix);
  }

  Result<Ptr> range(const Buffer& b, uint64_t bytes, uint64_t offset, const char* what) const {
    auto it = buffers_.find(b.id);
    if (it == buffers_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{} device {}: {} to buffer {}, which this device did not allocate or has "
                                    "released",
                                    Api::kName, info_.index, what, b.id));
    }
    if (offset > it->second.bytes || bytes > it->second.bytes - offset) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{} device {}: {} of {} bytes at offset {} overruns buffer {} of {} bytes",
                                    Api::kName, info_.index, what, bytes, offset, b.id, it->second.bytes));
    }
    return Api::offset(it->second.ptr, offset);
  }

  // A timer event: a recycled one, else a new one.
  Result<Event> event() {
    if (!free_events_.empty()) {
      Event e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    Event e{};
    if (Code r = api_.create_event(&e); r != Api::kSuccess) {
      return fail(ErrorCode::kDevice, "cannot create a timer event", r, "");
    }
    return e;
  }

  void recycle_pending() {
    for (auto& [start, end] : pending_) {
      free_events_.push_back(start);
      free_events_.push_back(end);
    }
    pending_.clear();
  }

  std::unordered_map<uint64_t, Alloc> buffers_;
  uint64_t next_buffer_ = 1;
  std::vector<Kernel> kernels_;
  std::unordered_map<uint64_t, KernelHandle> by_key_;
  std::unordered_set<uint64_t> loaded_;  // source hashes compile() has loaded
  std::unordered_map<uint64_t, std::pair<std::string, bool>> prepared_;  // prepare()'s binaries, by source hash
  std::vector<std::pair<Event, Event>> pending_;
  std::vector<Event> free_events_;
  std::vector<std::string> launched_;  // kernels launched since the last wait, for error messages
  CompileStats stats_;
};

// Devices 0..count-1 as describe(i) sees them; the first error stops the list.
template <class Describe>
Result<std::vector<DeviceInfo>> describe_devices(int count, Describe describe) {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    auto info = describe(i);
    if (!info) return info.error();
    out.push_back(std::move(*info));
  }
  return out;
}

// open()'s error for an index outside 0..count-1: "CUDA device 3 does not exist: the driver sees
// 1 device(s): 0: NVIDIA H200". `who` is what counts the devices ("driver", "runtime").
template <class Describe>
Error no_such_device(const char* api, const char* who, int index, int count, Describe describe) {
  std::string names;
  for (int i = 0; i < count; ++i) {
    auto info = describe(i);
    names += fmt::format("{}{}: {}", i ? ", " : "", i, info ? info->name : "?");
  }
  return make_error(ErrorCode::kUnavailable, fmt::format("{} device {} does not exist: the {} sees {} device(s){}{}",
                                                         api, index, who, count, count ? ": " : "", names));
}

// --- The runtime compilers (NVRTC, hiprtc) ---

// compile_cuda / compile_hip's first step: clears *log (if given) and rejects a source that is not
// CUDA C++, saying "kernel "x": <compiles>, this source is GLSL".
inline Status accept_cuda_cpp(const KernelSource& src, std::string* log, const char* compiles) {
  if (log != nullptr) log->clear();
  if (src.language == Language::kCudaCpp) return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("kernel \"{}\": {}, this source is GLSL", src.name, compiles));
}

// The first of `names` that is an executable file in one of `before`, then of $PATH's folders,
// then of `after`; "" when none is.
inline std::string find_tool(const std::vector<std::string>& names, const std::vector<std::filesystem::path>& before,
                             const std::vector<std::filesystem::path>& after = {}) {
  std::vector<std::filesystem::path> dirs = before;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view p(path);
    while (!p.empty()) {
      const size_t colon = p.find(':');
      if (colon != 0) dirs.emplace_back(std::string(p.substr(0, colon)));
      p = colon == std::string_view::npos ? std::string_view{} : p.substr(colon + 1);
    }
  }
  dirs.insert(dirs.end(), after.begin(), after.end());
  for (const auto& d : dirs) {
    for (const std::string& n : names) {
      std::error_code ec;
      const std::filesystem::path f = d / n;
      if (std::filesystem::is_regular_file(f, ec) && ::access(f.c_str(), X_OK) == 0) return f.string();
    }
  }
  return {};
}

// `s` single-quoted for the shell.
inline std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `tool` run with `args` (each quoted) and then, where `bytes` is given, a temporary file holding them
// (removed after): its standard output, with its standard error folded in or dropped. *status is
// its exit status, -1 where it could not be run (or the file not written).
inline std::string run_tool(const std::string& tool, const std::vector<std::string>& args,
                            const std::optional<std::string_view>& bytes, bool with_stderr, int* status) {
  static std::atomic<uint64_t> counter{0};
  *status = -1;
  std::filesystem::path file;
  std::error_code ec;
  if (bytes) {
    file = std::filesystem::temp_directory_path(ec) /
           fmt::format("gpusim-tool-{}-{}.bin", static_cast<long>(::getpid()), counter.fetch_add(1));
    if (ec) return {};
    std::ofstream out(file, std::ios::binary);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!out) {
      std::filesystem::remove(file, ec);
      return {};
    }
  }
  std::string cmd = shell_quoted(tool);
  for (const std::string& a : args) cmd += " " + shell_quoted(a);
  if (bytes) cmd += " " + shell_quoted(file.string());
  cmd += with_stderr ? " 2>&1" : " 2>/dev/null";
  std::string text;
  if (FILE* p = ::popen(cmd.c_str(), "r"); p != nullptr) {
    char buf[1 << 14];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
    *status = ::pclose(p);
  }
  if (bytes) std::filesystem::remove(file, ec);
  return text;
}

// dlopens the first of `names` that loads; `tried` collects the others, comma-separated.
inline void* open_first(const std::vector<std::string>& names, std::string& tried) {
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

// Points fn at symbol `name` of `handle`; a missing one is added to `missing`, comma-separated.
template <typename F>
bool load_symbol(void* handle, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return fn != nullptr;
}

// The loaded library's info, or why it could not be loaded.
template <class Info, class Lib>
Result<Info> info_of(const Result<Lib>& lib) {
  if (!lib) return lib.error();
  return lib->info;
}

// Whether the library loaded; otherwise *why (if given) says why not.
template <class Lib>
bool loaded(const Result<Lib>& lib, std::string* why) {
  if (!lib && why != nullptr) *why = lib.error().message;
  return lib.ok();
}

// unique_ptr deleter for an nvrtcProgram / hiprtcProgram.
template <class Program, class Code>
struct ProgramDeleter {
  Code (*destroy)(Program**);
  void operator()(Program* p) const {
    if (p != nullptr) destroy(&p);
  }
};

// The program's compile log without its terminator and trailing newlines; empty where there is
// none. Sizes 0 and 1 mean an empty log (ROCm 5.2 then writes garbage), and an absurd size is
// not read.
template <class Program, class Code>
std::string program_log(Program* prog, Code (*log_size)(Program*, size_t*), Code (*get_log)(Program*, char*),
                        Code success) {
  std::string text;
  size_t size = 0;
  if (log_size(prog, &size) == success && size > 1 && size < (64u << 20)) {
    text.resize(size);
    if (get_log(prog, text.data()) != success) text.clear();
    text.resize(std::min(text.size(), text.find('\0')));
    while (!text.empty() && text.back() == '\n') text.pop_back();
  }
  return text;
}

}  // namespace gpusim::backend::gpu
