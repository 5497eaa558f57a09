#include "device_timer.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

namespace gpusim::calibrate {

DeviceTimer::DeviceTimer(backend::Backend& dev, uint64_t flush_bytes)
    : dev_(dev),
      lang_(dev.info().backend == "vulkan" ? backend::Language::kGlsl : backend::Language::kCudaCpp),
      flush_bytes_(flush_bytes) {}

DeviceTimer::~DeviceTimer() {
  (void)dev_.synchronize();  // a destructor cannot report; the buffers are released either way
  for (const auto& b : owned_) dev_.release(b);
}

Result<backend::KernelHandle> DeviceTimer::compile(const codegen::Kernel& k) {
  const backend::KernelSource src = k.source(lang_);
  if (auto s = dev_.can_run(src); !s) return s.error();
  return dev_.compile(src);
}

Result<backend::Buffer> DeviceTimer::scratch(uint64_t bytes) {
  auto b = dev_.allocate(std::max<uint64_t>(bytes, 4));
  if (!b) return b.error();
  owned_.push_back(*b);
  return *b;
}

Result<backend::Buffer> DeviceTimer::floats(uint64_t count, uint64_t seed) {
  auto b = scratch(count * 4);
  if (!b) return b.error();
  std::vector<float> v(count);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (auto& x : v) x = u(rng);
  if (auto s = dev_.upload(*b, v.data(), count * 4); !s) return s.error();
  return *b;
}

Result<backend::Buffer> DeviceTimer::ints(const std::vector<int32_t>& values) {
  auto b = scratch(values.size() * 4);
  if (!b) return b.error();
  if (auto s = dev_.upload(*b, values.data(), values.size() * 4); !s) return s.error();
  return *b;
}

Status DeviceTimer::flush() {
  if (flush_bytes_ == 0) return Ok{};
  if (!flush_ready_) {
    const uint64_t n = flush_bytes_ / 4;
    auto b = scratch(n * 4);
    if (!b) return b.error();
    flush_buf_ = *b;
    codegen::Kernel k;
    k.name = "gpusim_flush";
    k.cls = "calibrate";
    k.block = {256, 1, 1};
    k.args = {{-1, codegen::Storage::kF32, static_cast<int64_t>(n), true}};
    flush_groups_ = static_cast<uint32_t>(std::min<uint64_t>(4096, (n + 255) / 256));
    k.body = fmt::format(
        "  for (int i = GRP_X * BLOCK_X + LID_X; i < {0}; i += NGRP_X * BLOCK_X) ST0(i, float(i & 1023));\n", n);
    auto h = compile(k);
    if (!h) return h.error();
    flush_kernel_ = *h;
    flush_ready_ = true;
  }
  const backend::Buffer args[] = {flush_buf_};
  auto r = dev_.launch(flush_kernel_, {flush_groups_, 1, 1}, args, false);
  if (!r) return r.error();
  return Ok{};
}

Result<double> DeviceTimer::time(backend::KernelHandle k, std::array<uint32_t, 3> groups,
                                 const std::vector<backend::Buffer>& args, bool cold) {
  if (cold) {
    if (auto s = flush(); !s) return s.error();
  }
  auto slot = dev_.launch(k, groups, args, true);
  if (!slot) return slot.error();
  if (auto s = dev_.synchronize(); !s) return s.error();
  auto t = dev_.read_timers();
  if (!t) return t.error();
  if (t->empty()) return make_error(ErrorCode::kDevice, "calibrate: the device returned no timer for a timed launch");
  return t->back();
}

Result<double> DeviceTimer::wall(backend::KernelHandle k, std::array<uint32_t, 3> groups,
                                 const std::vector<backend::Buffer>& args, int count) {
  if (auto s = dev_.synchronize(); !s) return s.error();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    auto r = dev_.launch(k, groups, args, false);
    if (!r) return r.error();
  }
  if (auto s = dev_.synchronize(); !s) return s.error();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace gpusim::calibrate
