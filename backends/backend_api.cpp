// The parts of the backend interface every backend shares: the capability query and the
// compile-cache key. (The registry, which links every built backend, is backend.cpp.)
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "backend.h"
#include "base/hash.h"

namespace gpusim::backend {

Status Backend::can_run(const KernelSource& src) const {
  const DeviceInfo& d = info();
  const std::string who = fmt::format("kernel \"{}\" on {} device {} ({})", src.name, d.backend, d.index, d.name);
  const uint64_t threads = uint64_t{src.block[0]} * src.block[1] * src.block[2];
  if (threads == 0 || threads > static_cast<uint64_t>(d.max_threads_per_group)) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: {} threads per group, the device allows 1..{}; "
                                                           "choose a tile with fewer threads",
                                                           who, threads, d.max_threads_per_group));
  }
  if (src.shared_bytes > d.max_shared_bytes) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: needs {} bytes of shared memory per group, the device has {}; choose a "
                                  "smaller tile or fewer stages",
                                  who, src.shared_bytes, d.max_shared_bytes));
  }
  auto need = [&](bool needed, bool has, const char* what) -> Status {
    if (needed && !has) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: needs {}, which the device does not support; run in fp32 "
                                    "(`dtype fp32`) or on another device",
                                    who, what));
    }
    return Ok{};
  };
  if (auto s = need(src.needs_fp16, d.fp16, "fp16 arithmetic and 16-bit buffer storage"); !s) return s;
  if (auto s = need(src.needs_fp64, d.fp64, "fp64 arithmetic"); !s) return s;
  if (auto s = need(src.needs_int64, d.int64, "64-bit integers"); !s) return s;
  if (auto s = need(src.needs_matrix_units, d.matrix_units, "matrix units (mma/wmma, MFMA, cooperative matrix)"); !s) {
    return s;
  }
  if (src.needs_subgroup_size != 0 && src.needs_subgroup_size != d.subgroup_size) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: written for subgroups of {}, the device's are {}", who,
                                                           src.needs_subgroup_size, d.subgroup_size));
  }
  return Ok{};
}

uint64_t source_hash(const KernelSource& src) {
  base::Fnv1a h;
  h.field(src.language == Language::kGlsl ? "glsl" : "cuda").field(src.name).field(src.code);
  // The launch shape and buffer count are part of what was compiled (Vulkan bakes the set layout).
  h.field(std::to_string(src.buffers) + "/" + std::to_string(src.block[0]) + "x" + std::to_string(src.block[1]) + "x" +
          std::to_string(src.block[2]));
  return h.h;
}

std::vector<std::pair<uint64_t, const KernelSource*>> sources_to_prepare(std::span<const KernelSource> sources,
                                                                         Language lang,
                                                                         const std::function<bool(uint64_t)>& done) {
  std::vector<std::pair<uint64_t, const KernelSource*>> todo;
  for (const KernelSource& src : sources) {
    if (src.language != lang || src.code.empty()) continue;
    const uint64_t hash = source_hash(src);
    if (done(hash)) continue;
    if (std::any_of(todo.begin(), todo.end(), [&](const auto& t) { return t.first == hash; })) continue;
    todo.emplace_back(hash, &src);
  }
  return todo;
}

}  // namespace gpusim::backend
