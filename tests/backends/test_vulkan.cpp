// The Vulkan backend on whatever Vulkan device is present (lavapipe, Mesa's CPU device, in CI):
// device info, GLSL kernels compiled and run against exact host results, the compile cache, the
// compile-error message, timers, buffer copies, fp16 storage, and the limit checks. Every test
// skips, saying why, where the backend is not built or no Vulkan device is present.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <stdlib.h>  // setenv, unsetenv, mkdtemp

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/skip.h"

namespace fs = std::filesystem;
using namespace gpusim;
using namespace gpusim::backend;

namespace {

// Device 0 of the Vulkan backend, or null after a WARN saying why there is none.
std::unique_ptr<Backend> open_or_skip() {
#ifndef GPUSIM_HAVE_VULKAN
  SKIPPED("the Vulkan backend is not built (needs libvulkan-dev and libshaderc-dev at configure time)");
  return nullptr;
#else
  auto dev = open("vulkan", 0);
  if (!dev) {
    SKIPPED(dev.error().message);
    return nullptr;
  }
  return std::move(*dev);
#endif
}

// y[i] = a[i] * 2 + b[i] for i < n, with 64 threads per group.
KernelSource axpb(uint32_t n) {
  KernelSource s;
  s.name = "axpb";
  s.language = Language::kGlsl;
  s.buffers = 3;
  s.block = {64, 1, 1};
  s.code = fmt::format(R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer B0 {{ float b0[]; }};
layout(std430, binding = 1) readonly buffer B1 {{ float b1[]; }};
layout(std430, binding = 2) writeonly buffer B2 {{ float b2[]; }};
void main() {{
  uint i = gl_GlobalInvocationID.x;
  if (i < {}u) b2[i] = b0[i] * 2.0 + b1[i];
}}
)",
                       n);
  return s;
}

// x[i] += 1 for i < n: each launch depends on the one before.
KernelSource increment(uint32_t n) {
  KernelSource s;
  s.name = "increment";
  s.language = Language::kGlsl;
  s.buffers = 1;
  s.code = fmt::format(R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B0 {{ float b0[]; }};
void main() {{
  uint i = gl_GlobalInvocationID.x;
  if (i < {}u) b0[i] += 1.0;
}}
)",
                       n);
  return s;
}

uint32_t groups_for(uint32_t n) { return (n + 63) / 64; }

// y = a * 2 + b over n elements on `dev`; true when every element is exact.
bool axpb_runs(Backend& dev, KernelHandle k, uint32_t n) {
  std::vector<float> a(n), b(n), y(n);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f;
  }
  auto ba = dev.allocate(n * 4), bb = dev.allocate(n * 4), by = dev.allocate(n * 4);
  if (!ba || !bb || !by) return false;
  bool ok = dev.upload(*ba, a.data(), n * 4).ok() && dev.upload(*bb, b.data(), n * 4).ok();
  const Buffer args[] = {*ba, *bb, *by};
  ok = ok && dev.launch(k, {groups_for(n), 1, 1}, args, false).ok() && dev.download(*by, y.data(), n * 4).ok();
  for (uint32_t i = 0; ok && i < n; ++i) ok = y[i] == a[i] * 2.0f + b[i];
  for (auto buf : {*ba, *bb, *by}) dev.release(buf);
  return ok;
}

}  // namespace

TEST_CASE("vulkan device info is sane", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  const DeviceInfo& d = dev->info();
  INFO(fmt::format("{} | {} | {} | {}", d.name, d.vendor, d.driver, d.arch));
  CHECK(d.backend == "vulkan");
  CHECK(d.index == 0);
  CHECK_FALSE(d.name.empty());
  CHECK_FALSE(d.vendor.empty());
  CHECK_FALSE(d.driver.empty());
  CHECK(d.arch.rfind("vulkan 1.", 0) == 0);
  CHECK(d.memory_bytes > 0);
  CHECK(d.subgroup_size > 0);
  // The Vulkan spec's minimum limits.
  CHECK(d.max_threads_per_group >= 128);
  CHECK(d.max_shared_bytes >= 16384);
  for (uint32_t g : d.max_groups) CHECK(g >= 65535);
  CHECK(d.timer_resolution_ns >= 0);
  if (d.name.find("llvmpipe") != std::string::npos) {  // lavapipe
    CHECK(d.is_cpu);
    CHECK(d.vendor == "Mesa");
  }
  auto listed = list_devices("vulkan");
  REQUIRE(listed.ok());
  REQUIRE_FALSE(listed->empty());
  CHECK(listed->at(0).name == d.name);
  CHECK(listed->at(0).fp16 == d.fp16);
}

TEST_CASE("vulkan without a driver is unavailable and says what to install", "[vulkan]") {
#ifndef GPUSIM_HAVE_VULKAN
  SKIPPED("the Vulkan backend is not built");
#else
  // Point the loader at a driver list that does not exist (VK_DRIVER_FILES is the newer name).
  const char* names[] = {"VK_ICD_FILENAMES", "VK_DRIVER_FILES"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    setenv(n, "/nonexistent/gpusim-no-driver.json", 1);
  }
  auto dev = open("vulkan", 0);
  auto listed = list_devices("vulkan");
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i]) {
      setenv(names[i], saved[i]->c_str(), 1);
    } else {
      unsetenv(names[i]);
    }
  }
  REQUIRE_FALSE(dev.ok());
  CHECK(dev.error().code == ErrorCode::kUnavailable);
  CHECK_THAT(dev.error().message, Catch::Contains("Vulkan is unavailable") && Catch::Contains("libvulkan1") &&
                                      Catch::Contains("mesa-vulkan-drivers"));
  REQUIRE_FALSE(listed.ok());
  CHECK(listed.error().code == ErrorCode::kUnavailable);
#endif
}

TEST_CASE("vulkan open with an index out of range lists the devices", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  auto bad = open("vulkan", 99);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::kUnavailable);
  CHECK_THAT(bad.error().message, Catch::Contains("index 99 is out of range") && Catch::Contains(dev->info().name));
}

TEST_CASE("vulkan kernel matches the host exactly on a size that is not a multiple of 64", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  const uint32_t n = 1000;
  std::vector<float> a(n), b(n), y(n, -1.0f);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i) * 0.37f - 50.0f;
    b[i] = 1.0f / static_cast<float>(i + 1);
  }
  auto k = dev->compile(axpb(n));
  REQUIRE(k.ok());
  auto ba = dev->allocate(n * 4);
  auto bb = dev->allocate(n * 4);
  auto by = dev->allocate((n + 24) * 4);  // room past n: the bounds check must leave it alone
  REQUIRE((ba.ok() && bb.ok() && by.ok()));
  std::vector<float> sentinel(n + 24, 7.0f);
  REQUIRE(dev->upload(*by, sentinel.data(), sentinel.size() * 4).ok());
  REQUIRE(dev->upload(*ba, a.data(), n * 4).ok());
  REQUIRE(dev->upload(*bb, b.data(), n * 4).ok());
  const Buffer args[] = {*ba, *bb, *by};
  auto slot = dev->launch(*k, {groups_for(n), 1, 1}, args, false);
  REQUIRE(slot.ok());
  CHECK(*slot == -1);
  std::vector<float> out(n + 24);
  REQUIRE(dev->download(*by, out.data(), out.size() * 4).ok());  // flushes the launch itself
  int wrong = 0;
  for (uint32_t i = 0; i < n; ++i) wrong += out[i] != a[i] * 2.0f + b[i];
  CHECK(wrong == 0);
  for (uint32_t i = n; i < n + 24; ++i) CHECK(out[i] == 7.0f);
  for (auto buf : {*ba, *bb, *by}) dev->release(buf);
}

TEST_CASE("vulkan launches in one batch see each other's writes", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  const uint32_t n = 100;
  auto k = dev->compile(increment(n));
  REQUIRE(k.ok());
  auto x = dev->allocate(n * 4);
  REQUIRE(x.ok());
  std::vector<float> zero(n, 0.0f);
  REQUIRE(dev->upload(*x, zero.data(), n * 4).ok());
  // More launches than one batch holds (4096), so the batch also flushes on its own.
  const int launches = 5000;
  for (int i = 0; i < launches; ++i) REQUIRE(dev->launch(*k, {groups_for(n), 1, 1}, {&*x, 1}, false).ok());
  // A buffer released while launches that use it are pending is destroyed after them.
  auto scratch = dev->allocate(64);
  REQUIRE(scratch.ok());
  REQUIRE(dev->launch(*k, {1, 1, 1}, {&*scratch, 1}, false).ok());
  dev->release(*scratch);
  REQUIRE(dev->synchronize().ok());
  std::vector<float> out(n);
  REQUIRE(dev->download(*x, out.data(), n * 4).ok());
  for (float v : out) REQUIRE(v == static_cast<float>(launches));
}

TEST_CASE("vulkan compile cache answers the second compile of the same source", "[vulkan]") {
  const test::ScopedEnv no_disk("GPUSIM_KERNEL_CACHE_DIR", "off");  // counts compiles in this process only
  auto dev = open_or_skip();
  if (!dev) return;
  auto k1 = dev->compile(axpb(10));
  auto k2 = dev->compile(axpb(10));
  auto k3 = dev->compile(axpb(11));  // different text: compiled
  REQUIRE((k1.ok() && k2.ok() && k3.ok()));
  CHECK(*k1 == *k2);
  CHECK(*k3 != *k1);
  const CompileStats s = dev->compile_stats();
  CHECK(s.compiled == 2);
  CHECK(s.cache_hits == 1);
  CHECK(s.compile_ms > 0);
}

TEST_CASE("vulkan compile error names the kernel and the line", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  KernelSource s = axpb(10);
  s.name = "broken_kernel";
  s.code = "#version 450\nlayout(local_size_x = 64) in;\nvoid main() {\n  float x = undefined_thing;\n}\n";
  s.buffers = 0;
  auto k = dev->compile(s);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().code == ErrorCode::kDevice);
  CHECK_THAT(k.error().message, Catch::Contains("kernel \"broken_kernel\"") &&
                                    Catch::Contains("broken_kernel.comp:4:") && Catch::Contains("undefined_thing"));
  CHECK(dev->compile_stats().compiled == 0);
}

TEST_CASE("vulkan refuses CUDA source", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  KernelSource s = axpb(10);
  s.language = Language::kCudaCpp;
  auto k = dev->compile(s);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(k.error().message, Catch::Contains("GLSL"));
}

TEST_CASE("vulkan timed launches give positive times and read_timers clears", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  if (dev->info().timer_resolution_ns == 0) WARN("this queue has no timestamps: launches are timed on the host");
  const uint32_t n = 4096;
  auto k = dev->compile(increment(n));
  REQUIRE(k.ok());
  auto x = dev->allocate(n * 4);
  REQUIRE(x.ok());
  std::vector<int> slots;
  for (int i = 0; i < 3; ++i) {
    auto s = dev->launch(*k, {groups_for(n), 1, 1}, {&*x, 1}, true);
    REQUIRE(s.ok());
    slots.push_back(*s);
    auto untimed = dev->launch(*k, {groups_for(n), 1, 1}, {&*x, 1}, false);
    REQUIRE(untimed.ok());
    CHECK(*untimed == -1);
  }
  CHECK(slots == std::vector<int>{0, 1, 2});
  REQUIRE(dev->synchronize().ok());
  auto t = dev->read_timers();
  REQUIRE(t.ok());
  REQUIRE(t->size() == 3);
  for (double us : *t) {
    CHECK(us > 0);
    CHECK(us < 10e6);
  }
  auto again = dev->read_timers();
  REQUIRE(again.ok());
  CHECK(again->empty());
  // Slots restart at 0 after a read.
  auto s = dev->launch(*k, {groups_for(n), 1, 1}, {&*x, 1}, true);
  REQUIRE(s.ok());
  CHECK(*s == 0);
  auto last = dev->read_timers();  // synchronizes itself
  REQUIRE(last.ok());
  CHECK(last->size() == 1);
}

TEST_CASE("vulkan host timing fallback times each timed launch", "[vulkan]") {
  if (!open_or_skip()) return;
  // Sets the environment for this process only, restoring it before any check can fail.
  const char* old = std::getenv("GPUSIM_VULKAN_HOST_TIMERS");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("GPUSIM_VULKAN_HOST_TIMERS", "1", 1);
  auto dev = open("vulkan", 0);
  if (saved) {
    setenv("GPUSIM_VULKAN_HOST_TIMERS", saved->c_str(), 1);
  } else {
    unsetenv("GPUSIM_VULKAN_HOST_TIMERS");
  }
  REQUIRE(dev.ok());
  CHECK((*dev)->info().timer_resolution_ns == 0);
  auto k = (*dev)->compile(increment(64));
  auto x = (*dev)->allocate(256);
  REQUIRE((k.ok() && x.ok()));
  std::vector<float> zero(64, 0.0f);
  REQUIRE((*dev)->upload(*x, zero.data(), 256).ok());
  REQUIRE((*dev)->launch(*k, {1, 1, 1}, {&*x, 1}, false).ok());
  auto t0 = (*dev)->launch(*k, {1, 1, 1}, {&*x, 1}, true);
  auto t1 = (*dev)->launch(*k, {1, 1, 1}, {&*x, 1}, true);
  REQUIRE((t0.ok() && t1.ok()));
  CHECK(*t0 == 0);
  CHECK(*t1 == 1);
  auto t = (*dev)->read_timers();
  REQUIRE(t.ok());
  REQUIRE(t->size() == 2);
  for (double us : *t) CHECK(us > 0);
  CHECK((*dev)->read_timers()->empty());
  std::vector<float> out(64);
  REQUIRE((*dev)->download(*x, out.data(), 256).ok());
  for (float v : out) REQUIRE(v == 3.0f);
}

TEST_CASE("vulkan upload and download round trip with an offset", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  auto b = dev->allocate(256);
  REQUIRE(b.ok());
  CHECK(b->bytes == 256);
  std::vector<uint8_t> base(256, 0xAB), part(61);
  for (size_t i = 0; i < part.size(); ++i) part[i] = static_cast<uint8_t>(i * 7 + 1);
  REQUIRE(dev->upload(*b, base.data(), 256).ok());
  REQUIRE(dev->upload(*b, part.data(), part.size(), 131).ok());  // odd size and offset
  std::vector<uint8_t> all(256);
  REQUIRE(dev->download(*b, all.data(), 256).ok());
  for (size_t i = 0; i < 256; ++i) {
    const uint8_t want = (i >= 131 && i < 131 + part.size()) ? part[i - 131] : 0xAB;
    REQUIRE(all[i] == want);
  }
  std::vector<uint8_t> window(10);
  REQUIRE(dev->download(*b, window.data(), 10, 128).ok());
  CHECK(std::memcmp(window.data(), all.data() + 128, 10) == 0);

  auto over = dev->upload(*b, part.data(), part.size(), 200);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(over.error().message, Catch::Contains("overruns buffer") && Catch::Contains("256 bytes"));

  auto empty = dev->allocate(0);  // zero bytes: a valid, empty buffer
  REQUIRE(empty.ok());
  CHECK(empty->bytes == 0);
  CHECK(dev->upload(*empty, part.data(), 0).ok());
  dev->release(*empty);
  dev->release(*b);
  auto gone = dev->download(*b, all.data(), 4);
  REQUIRE_FALSE(gone.ok());
  CHECK_THAT(gone.error().message, Catch::Contains("no such buffer"));
}

TEST_CASE("vulkan fp16 storage kernel", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  if (!dev->info().fp16) {
    WARN("skipped: " << dev->info().name << " has no fp16 arithmetic with 16-bit storage buffers");
    return;
  }
  KernelSource s;
  s.name = "half_axpb";
  s.language = Language::kGlsl;
  s.buffers = 2;
  s.needs_fp16 = true;
  s.code = R"(#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer B0 { float16_t b0[]; };
layout(std430, binding = 1) writeonly buffer B1 { float16_t b1[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < 100u) b1[i] = b0[i] * float16_t(2.0) + float16_t(1.0);
}
)";
  auto k = dev->compile(s);
  REQUIRE(k.ok());
  // IEEE half bit patterns: 1, 2, 0.5, -3 -> 3, 5, 2, -5.
  const uint16_t in_bits[] = {0x3C00, 0x4000, 0x3800, 0xC200};
  const uint16_t out_bits[] = {0x4200, 0x4500, 0x4000, 0xC500};
  std::vector<uint16_t> x(100), y(100, 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = in_bits[i % 4];
  auto bx = dev->allocate(200);
  auto by = dev->allocate(200);
  REQUIRE((bx.ok() && by.ok()));
  REQUIRE(dev->upload(*bx, x.data(), 200).ok());
  const Buffer args[] = {*bx, *by};
  REQUIRE(dev->launch(*k, {2, 1, 1}, args, false).ok());
  REQUIRE(dev->download(*by, y.data(), 200).ok());
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == out_bits[i % 4]);
}

TEST_CASE("vulkan groups over the device limit are an error", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  const uint32_t max_x = dev->info().max_groups[0];
  if (max_x == UINT32_MAX) {
    WARN("skipped: the device allows 2^32-1 groups in x, no count exceeds it");
    return;
  }
  auto k = dev->compile(increment(16));
  auto x = dev->allocate(64);
  REQUIRE((k.ok() && x.ok()));
  auto r = dev->launch(*k, {max_x + 1, 1, 1}, {&*x, 1}, false);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(r.error().message, Catch::Contains("kernel \"increment\"") &&
                                    Catch::Contains(fmt::format("at most {}", max_x)) &&
                                    Catch::Contains("maxComputeWorkGroupCount"));
  // The device stays usable.
  REQUIRE(dev->launch(*k, {1, 1, 1}, {&*x, 1}, false).ok());
  REQUIRE(dev->synchronize().ok());
}

TEST_CASE("vulkan launch checks its arguments", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  auto k = dev->compile(axpb(16));
  auto x = dev->allocate(64);
  REQUIRE((k.ok() && x.ok()));
  auto few = dev->launch(*k, {1, 1, 1}, {&*x, 1}, false);
  REQUIRE_FALSE(few.ok());
  CHECK_THAT(few.error().message, Catch::Contains("launched with 1 buffers, it takes 3"));
  auto handle = dev->launch(*k + 100, {1, 1, 1}, {&*x, 1}, false);
  REQUIRE_FALSE(handle.ok());
  CHECK(handle.error().code == ErrorCode::kInvalidArgument);
  const Buffer stale{987654, 64};
  const Buffer args[] = {*x, *x, stale};
  auto missing = dev->launch(*k, {1, 1, 1}, args, false);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("buffer 987654"));

  KernelSource many = axpb(17);  // another text: axpb(16) would be a cache hit
  many.buffers = 1 << 30;
  auto too_many = dev->compile(many);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(too_many.error().message, Catch::Contains("1073741824 buffer arguments"));
}

TEST_CASE("vulkan can_run refuses a kernel needing more shared memory than the device has", "[vulkan]") {
  auto dev = open_or_skip();
  if (!dev) return;
  KernelSource s = axpb(16);
  s.shared_bytes = dev->info().max_shared_bytes + 1;
  auto ok = dev->can_run(s);
  REQUIRE_FALSE(ok.ok());
  CHECK(ok.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(ok.error().message,
             Catch::Contains("shared memory") && Catch::Contains(std::to_string(dev->info().max_shared_bytes)));
  auto k = dev->compile(s);  // compile asks the same question first
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().code == ErrorCode::kUnsupported);
  s.shared_bytes = 1024;
  CHECK(dev->can_run(s).ok());
}

TEST_CASE("vulkan pipeline cache is saved under XDG_CACHE_HOME", "[vulkan]") {
  if (!open_or_skip()) return;
  char tmpl[] = "/tmp/gpusim-vk-cache-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const fs::path dir(tmpl);
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  {
    auto dev = open("vulkan", 0);
    REQUIRE(dev.ok());
    REQUIRE((*dev)->compile(axpb(33)).ok());
  }  // destroyed: the cache is written
  std::vector<fs::path> files;
  if (fs::exists(dir / "gpusim")) {
    for (const auto& e : fs::directory_iterator(dir / "gpusim")) {
      if (e.is_regular_file()) files.push_back(e.path());  // the SPIR-V cache is the folder vulkan/
    }
  }
  {
    auto dev = open("vulkan", 0);  // reads it back; compiling again must still work
    REQUIRE(dev.ok());
    CHECK((*dev)->compile(axpb(33)).ok());
  }
  if (saved) {
    setenv("XDG_CACHE_HOME", saved->c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
  fs::remove_all(dir);
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string().rfind("vulkan-", 0) == 0);
  CHECK(files[0].extension() == ".bin");
}

TEST_CASE("vulkan kernels compiled by one run load from the disk cache in the next", "[vulkan]") {
  if (!open_or_skip()) return;
  char tmpl[] = "/tmp/gpusim-spv-cache-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const fs::path dir(tmpl);
  const test::ScopedEnv cache("GPUSIM_KERNEL_CACHE_DIR", dir.string());
  const uint32_t n = 77;
  {
    auto dev = open("vulkan", 0);
    REQUIRE(dev.ok());
    auto k = (*dev)->compile(axpb(n));
    REQUIRE(k.ok());
    CHECK((*dev)->compile_stats().compiled == 1);
  }
  std::vector<fs::path> spv;
  for (const auto& e : fs::directory_iterator(dir / "vulkan")) spv.push_back(e.path());
  REQUIRE(spv.size() == 1);
  CHECK(spv[0].extension() == ".spv");
  {
    auto dev = open("vulkan", 0);  // a new process would see the same: no shaderc call
    REQUIRE(dev.ok());
    auto k = (*dev)->compile(axpb(n));
    REQUIRE(k.ok());
    CHECK((*dev)->compile_stats().compiled == 0);
    CHECK((*dev)->compile_stats().cache_hits == 1);
    CHECK(axpb_runs(**dev, *k, n));
  }
  // A file damaged on disk (a flipped byte, or cut short) is compiled afresh, never handed to the driver.
  for (int damage = 0; damage < 2; ++damage) {
    std::string bytes = gpusim::test::file_bytes(spv[0].string());
    REQUIRE(bytes.size() > 64);
    if (damage == 0) {
      bytes[40] = static_cast<char>(bytes[40] ^ 0x5a);
    } else {
      bytes.resize(bytes.size() - 12);
    }
    {
      std::ofstream out(spv[0], std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto dev = open("vulkan", 0);
    REQUIRE(dev.ok());
    auto k = (*dev)->compile(axpb(n));
    REQUIRE(k.ok());
    CHECK((*dev)->compile_stats().compiled == 1);
    CHECK(axpb_runs(**dev, *k, n));
  }
  fs::remove_all(dir);
}
