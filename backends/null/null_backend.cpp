// The null backend (null_backend.h).
#include "null_backend.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace gpusim::backend::null {
namespace {

DeviceInfo null_info(Language lang) {
  DeviceInfo d;
  d.backend = "null";
  d.language = lang;
  d.name = "null device";
  d.vendor = "gpusim";
  d.driver = "none";
  d.arch = "null";
  d.is_cpu = true;
  d.memory_bytes = uint64_t{16} << 30;
  d.compute_units = 1;
  d.max_threads_per_group = 1024;
  d.max_shared_bytes = 48 * 1024;
  d.fp16 = true;
  d.fp64 = true;
  d.int64 = true;
  return d;
}

class NullBackend final : public Backend {
 public:
  explicit NullBackend(Options o) : o_(std::move(o)), info_(null_info(o_.language)) {}
  const DeviceInfo& info() const override { return info_; }

  Result<Buffer> allocate(uint64_t bytes) override {
    if (bytes > info_.memory_bytes) {
      return make_error(ErrorCode::kDevice, fmt::format("null device: {} bytes is over its {} bytes", bytes,
                                                        info_.memory_bytes));
    }
    const uint64_t id = next_++;
    mem_[id].assign(bytes, 0);
    return Buffer{id, bytes};
  }
  Status upload(const Buffer& b, const void* src, uint64_t bytes, uint64_t offset) override {
    auto* m = find(b, bytes, offset);
    if (!m) return out_of_range("upload", b, bytes, offset);
    if (bytes > 0) std::memcpy(m->data() + offset, src, bytes);
    if (o_.journal) {
      std::lock_guard<std::mutex> lock(o_.journal->mu);
      ++o_.journal->uploads;
    }
    return Ok{};
  }
  Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override {
    auto* m = find(b, bytes, offset);
    if (!m) return out_of_range("download", b, bytes, offset);
    if (bytes > 0) std::memcpy(dst, m->data() + offset, bytes);
    if (o_.journal) {
      std::lock_guard<std::mutex> lock(o_.journal->mu);
      ++o_.journal->downloads;
    }
    return Ok{};
  }
  void release(const Buffer& b) override { mem_.erase(b.id); }

  Result<KernelHandle> compile(const KernelSource& src) override {
    if (auto ok = can_run(src); !ok) return ok.error();
    if (src.language != info_.language || src.code.empty()) {
      return make_error(ErrorCode::kDevice, fmt::format("null device: kernel \"{}\" is not {} source", src.name,
                                                        info_.language == Language::kGlsl ? "GLSL" : "CUDA C++"));
    }
    names_.push_back(src.name);
    if (o_.journal) {
      std::lock_guard<std::mutex> lock(o_.journal->mu);
      o_.journal->compiled.push_back(src.name);
    }
    return static_cast<KernelHandle>(names_.size() - 1);
  }
  Result<int> launch(KernelHandle k, std::array<uint32_t, 3> groups, std::span<const Buffer> args, bool timed) override {
    if (k >= names_.size()) return make_error(ErrorCode::kDevice, fmt::format("null device: no kernel {}", k));
    for (int d = 0; d < 3; ++d) {
      if (groups[static_cast<size_t>(d)] == 0 || groups[static_cast<size_t>(d)] > info_.max_groups[static_cast<size_t>(d)]) {
        return make_error(ErrorCode::kDevice, fmt::format("null device: kernel \"{}\" launched with {} groups in "
                                                          "dimension {}",
                                                          names_[k], groups[static_cast<size_t>(d)], d));
      }
    }
    for (const Buffer& b : args) {
      if (mem_.count(b.id) == 0) {
        return make_error(ErrorCode::kDevice, fmt::format("null device: kernel \"{}\" bound buffer {}, which is not "
                                                          "allocated",
                                                          names_[k], b.id));
      }
    }
    if (o_.journal) {
      std::lock_guard<std::mutex> lock(o_.journal->mu);
      o_.journal->launched.push_back(names_[k]);
    }
    if (!timed) return -1;
    timers_.push_back(latency(names_[k]));
    return static_cast<int>(timers_.size() - 1);
  }
  Status synchronize() override { return Ok{}; }
  Result<std::vector<double>> read_timers() override {
    std::vector<double> out;
    out.swap(timers_);
    return out;
  }
  CompileStats compile_stats() const override { return {static_cast<int>(names_.size()), 0, 0.0}; }

 private:
  std::vector<uint8_t>* find(const Buffer& b, uint64_t bytes, uint64_t offset) {
    auto it = mem_.find(b.id);
    if (it == mem_.end() || offset > it->second.size() || bytes > it->second.size() - offset) return nullptr;
    return &it->second;
  }
  static Error out_of_range(const char* what, const Buffer& b, uint64_t bytes, uint64_t offset) {
    return make_error(ErrorCode::kDevice, fmt::format("null device: {} of {} bytes at offset {} is outside buffer {} "
                                                      "({} bytes)",
                                                      what, bytes, offset, b.id, b.bytes));
  }
  double latency(const std::string& name) const {
    double us = o_.default_us;
    size_t best = 0;
    for (const auto& [prefix, t] : o_.latency_us) {
      if (prefix.size() >= best && name.rfind(prefix, 0) == 0) {
        best = prefix.size();
        us = t;
      }
    }
    return us;
  }

  Options o_;
  DeviceInfo info_;
  std::map<uint64_t, std::vector<uint8_t>> mem_;
  uint64_t next_ = 1;
  std::vector<std::string> names_;
  std::vector<double> timers_;
};

}  // namespace

Result<std::map<std::string, double>> parse_latency_table(const std::string& text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.rfind('=');
    char* end = nullptr;
    const double us = eq == std::string::npos ? -1 : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || end == item.c_str() + eq + 1 || *end != '\0' || !std::isfinite(us) ||
        us < 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("null backend latency table: \"{}\" is not PREFIX=MICROSECONDS (a kernel-name "
                                    "prefix, a non-negative number); give e.g. gemm=7.5,ew_=0.5",
                                    item.substr(0, 80)));
    }
    out[item.substr(0, eq)] = us;
  }
  return out;
}

std::unique_ptr<Backend> make(Options o) { return std::make_unique<NullBackend>(std::move(o)); }

Result<std::vector<DeviceInfo>> list_devices() { return std::vector<DeviceInfo>{null_info(Language::kCudaCpp)}; }

Result<std::unique_ptr<Backend>> open(int index) {
  if (index != 0) {
    return make_error(ErrorCode::kUnavailable, fmt::format("the null backend has one device, 0; not {}", index));
  }
  Options o;
  if (const char* env = std::getenv("GPUSIM_NULL_LATENCY_US"); env && *env) {
    auto t = parse_latency_table(env);
    if (!t) return make_error(t.error().code, "GPUSIM_NULL_LATENCY_US: " + t.error().message);
    o.latency_us = std::move(*t);
  }
  return make(std::move(o));
}

}  // namespace gpusim::backend::null
