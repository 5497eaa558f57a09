// The CUDA and HIP backends. Without a GPU: the compile-only entry points (NVRTC for sm_70/80/90,
// hiprtc for gfx90a/gfx1100) on a hand-written kernel in the codegen dialect, with and without
// fp16, and their error messages; open() and list_devices() must say "unavailable" and what to
// install. With a GPU: a small conformance run (buffers, compile cache, timed launches, y = 2a + b
// on a size that is not a multiple of the block). Each part skips, saying why, where NVRTC, hiprtc
// or a device is absent.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "kernel_disk_cache.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/hiprtc_compiler.h"
#include "support/skip.h"
#endif

using namespace gpusim;
using Catch::Matchers::Contains;

namespace {

constexpr int kN = 1000;     // elements: not a multiple of the block
constexpr int kBlock = 64;

// The dialect's CUDA face (backends/codegen/dialect.cpp), written out by hand.
std::string prelude(bool fp16) {
  std::string s;
  if (fp16) {
    s += "#if defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)\n#include <hip/hip_fp16.h>\n#else\n"
         "#include <cuda_fp16.h>\n#endif\n";
  }
  s += "typedef unsigned int uint;\n#define FN __device__ inline\n#define SHARED __shared__\n"
       "#define BARRIER() __syncthreads()\n#define LID_X int(threadIdx.x)\n#define GRP_X int(blockIdx.x)\n"
       "#define INF_F __int_as_float(0x7f800000)\n";
  return s + fmt::format("#define BLOCK_X {}\n#define BLOCK_Y 1\n#define BLOCK_Z 1\n#define N {}\n", kBlock, kN);
}

// y = 2a + b through a __shared__ tile and a barrier; fp16: a, b and y are stored as __half.
backend::KernelSource axpb(bool fp16) {
  backend::KernelSource src;
  src.name = fp16 ? "axpb_f16" : "axpb_f32";
  src.buffers = 3;
  src.block = {kBlock, 1, 1};
  src.shared_bytes = kBlock * 4;
  src.needs_fp16 = fp16;
  const char* t = fp16 ? "__half" : "float";
  std::string code = prelude(fp16);
  code += fp16 ? "#define LD0(i) __half2float(b0[(i)])\n#define LD1(i) __half2float(b1[(i)])\n"
                 "#define ST2(i, v) b2[(i)] = __float2half(v)\n"
               : "#define LD0(i) (b0[(i)])\n#define LD1(i) (b1[(i)])\n#define ST2(i, v) b2[(i)] = (v)\n";
  code += "SHARED float tile[BLOCK_X];\nFN float twice(float x) { return x + x; }\n";
  code += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(BLOCK_X) {0}(const {1}* __restrict__ b0, "
      "const {1}* __restrict__ b1, {1}* __restrict__ b2) {{\n"
      "  int i = GRP_X * BLOCK_X + LID_X;\n"
      "  tile[LID_X] = i < N ? LD0(i) : 0.0f;\n"
      "  BARRIER();\n"
      "  float a = tile[(LID_X + 1) % BLOCK_X];\n"  // read a neighbour's value: the barrier matters
      "  BARRIER();\n"
      "  tile[(LID_X + 1) % BLOCK_X] = a;\n"
      "  BARRIER();\n"
      "  if (i < N) ST2(i, twice(tile[LID_X]) + LD1(i));\n"
      "}}\n",
      src.name, t);
  src.code = code;
  return src;
}

backend::KernelSource broken() {
  backend::KernelSource src;
  src.name = "broken_kernel";
  src.buffers = 1;
  src.code = "extern \"C\" __global__ void broken_kernel(float* b0) {\n  float x = ;\n  b0[0] = x;\n}\n";
  return src;
}

bool is_elf(const std::string& bytes) { return bytes.size() > 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0; }

// float -> IEEE half bits, for values that half represents exactly (the test's data).
uint16_t to_half(float f) {
  if (f == 0.0f) return 0;
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = (x >> 13) & 0x3ffu;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

float from_half(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0 && mant == 0) {
    float z = 0;
    uint32_t bits = sign;
    std::memcpy(&z, &bits, 4);
    return z;
  }
  const uint32_t bits = sign | (static_cast<uint32_t>(exp - 15 + 127) << 23) | (mant << 13);
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Small conformance run on `backend` device 0; skips, saying why, where it cannot open one.
void conformance(const std::string& name) {
  auto dev = backend::open(name, 0);
  if (!dev) {
    REQUIRE(dev.error().code == ErrorCode::kUnavailable);
    SKIPPED("the " << name << " device checks: " << dev.error().message);
    return;
  }
  backend::Backend& d = **dev;
  const backend::DeviceInfo& info = d.info();
  INFO(name << " device: " << info.name << ", " << info.arch << ", " << info.driver);
  CHECK(info.backend == name);
  CHECK_FALSE(info.name.empty());
  CHECK(info.arch.rfind(name == "cuda" ? "sm_" : "gfx", 0) == 0);
  CHECK(info.memory_bytes > (uint64_t{1} << 28));
  CHECK(info.compute_units > 0);
  CHECK((info.subgroup_size == 32 || info.subgroup_size == 64));
  CHECK(info.max_threads_per_group >= 256);
  CHECK(info.max_shared_bytes >= 16384);
  CHECK(info.timer_resolution_ns > 0);

  for (bool fp16 : {false, true}) {
    if (fp16 && !info.fp16) continue;
    INFO("fp16: " << fp16);
    const uint64_t elem = fp16 ? 2 : 4;
    std::vector<float> a(kN), b(kN);
    for (int i = 0; i < kN; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(i % 61) * 0.5f - 7.0f;
      b[static_cast<size_t>(i)] = static_cast<float>(i % 17) * 0.25f;
    }
    auto ba = d.allocate(kN * elem);
    auto bb = d.allocate(kN * elem);
    auto by = d.allocate(kN * elem);
    REQUIRE(ba);
    REQUIRE(bb);
    REQUIRE(by);
    if (fp16) {
      std::vector<uint16_t> ha(kN), hb(kN);
      for (size_t i = 0; i < a.size(); ++i) {
        ha[i] = to_half(a[i]);
        hb[i] = to_half(b[i]);
      }
      REQUIRE(d.upload(*ba, ha.data(), kN * elem));
      REQUIRE(d.upload(*bb, hb.data(), kN * elem));
    } else {
      REQUIRE(d.upload(*ba, a.data(), kN * elem));
      REQUIRE(d.upload(*bb, b.data(), kN * elem));
    }
    // Poison y so that an element the kernel skips shows up.
    std::vector<uint8_t> poison(kN * elem, 0xff);
    REQUIRE(d.upload(*by, poison.data(), poison.size()));

    const auto before = d.compile_stats();
    auto k = d.compile(axpb(fp16));
    REQUIRE(k.ok());
    auto again = d.compile(axpb(fp16));
    REQUIRE(again.ok());
    CHECK(*again == *k);
    const auto after = d.compile_stats();
    CHECK(after.compiled + after.cache_hits == before.compiled + before.cache_hits + 2);
    CHECK(after.cache_hits >= before.cache_hits + 1);

    const std::vector<backend::Buffer> args = {*ba, *bb, *by};
    const uint32_t groups = (kN + kBlock - 1) / kBlock;
    auto t0 = d.launch(*k, {groups, 1, 1}, args, true);
    REQUIRE(t0.ok());
    CHECK(*t0 == 0);
    auto untimed = d.launch(*k, {groups, 1, 1}, args, false);
    REQUIRE(untimed.ok());
    CHECK(*untimed == -1);
    auto t1 = d.launch(*k, {groups, 1, 1}, args, true);
    REQUIRE(t1.ok());
    CHECK(*t1 == 1);
    REQUIRE(d.synchronize());
    auto timers = d.read_timers();
    REQUIRE(timers.ok());
    REQUIRE(timers->size() == 2);
    for (double us : *timers) {
      CHECK(us > 0);
      CHECK(us < 1e6);
    }
    auto empty = d.read_timers();
    REQUIRE(empty.ok());
    CHECK(empty->empty());

    std::vector<float> y(kN);
    if (fp16) {
      std::vector<uint16_t> hy(kN);
      REQUIRE(d.download(*by, hy.data(), kN * elem));
      for (size_t i = 0; i < y.size(); ++i) y[i] = from_half(hy[i]);
    } else {
      REQUIRE(d.download(*by, y.data(), kN * elem));
    }
    int wrong = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] != 2.0f * a[i] + b[i] && ++wrong <= 5) {
        WARN(fmt::format("y[{}] = {}, expected {}", i, y[i], 2.0f * a[i] + b[i]));
      }
    }
    CHECK(wrong == 0);

    // Partial download at an offset, and an overrun.
    float tail[2] = {};
    if (!fp16) {
      REQUIRE(d.download(*by, tail, 8, (kN - 2) * 4));
      CHECK(tail[1] == 2.0f * a[kN - 1] + b[kN - 1]);
    }
    auto overrun = d.download(*by, tail, 8, kN * elem - 4);
    REQUIRE_FALSE(overrun.ok());
    CHECK(overrun.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(overrun.error().message, Contains("overruns"));

    auto wrong_args = d.launch(*k, {groups, 1, 1}, std::span(args).first(2), false);
    REQUIRE_FALSE(wrong_args.ok());
    CHECK_THAT(wrong_args.error().message, Contains("takes 3 buffers"));

    d.release(*ba);
    d.release(*bb);
    d.release(*by);
  }

  auto bad = d.compile(broken());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::kDevice);
  CHECK_THAT(bad.error().message, Contains("broken_kernel"));
  CHECK_THAT(bad.error().message, Contains(info.arch));
}

// A private disk cache for the test run, removed afterwards.
struct TempCache {
  std::filesystem::path dir;
  std::string old;
  bool had_old = false;
  TempCache() {
    dir = std::filesystem::temp_directory_path() / fmt::format("gpusim-kcache-{}", ::getpid());
    if (const char* o = std::getenv("GPUSIM_KERNEL_CACHE_DIR")) {
      old = o;
      had_old = true;
    }
    ::setenv("GPUSIM_KERNEL_CACHE_DIR", dir.c_str(), 1);
  }
  ~TempCache() {
    if (had_old) {
      ::setenv("GPUSIM_KERNEL_CACHE_DIR", old.c_str(), 1);
    } else {
      ::unsetenv("GPUSIM_KERNEL_CACHE_DIR");
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

TEST_CASE("kernel disk cache stores and loads by key", "[cuda][hip]") {
  TempCache cache;
  const std::string key = backend::kernel_cache_key(42, "sm_80", "nvrtc-13.0", "opts");
  CHECK(key.size() == 16);
  CHECK(key != backend::kernel_cache_key(42, "sm_90", "nvrtc-13.0", "opts"));
  CHECK(key != backend::kernel_cache_key(43, "sm_80", "nvrtc-13.0", "opts"));
  CHECK(key != backend::kernel_cache_key(42, "sm_80", "nvrtc-12.4", "opts"));
  CHECK_FALSE(backend::kernel_cache_load("cuda/sm_80", key + ".cubin").has_value());
  const std::string bytes("\x7f" "ELF\0\1\2binary", 13);
  backend::kernel_cache_store("cuda/sm_80", key + ".cubin", bytes);
  auto loaded = backend::kernel_cache_load("cuda/sm_80", key + ".cubin");
  REQUIRE(loaded.has_value());
  CHECK(*loaded == bytes);
  ::setenv("GPUSIM_KERNEL_CACHE_DIR", "off", 1);
  CHECK_FALSE(backend::kernel_cache_load("cuda/sm_80", key + ".cubin").has_value());
}

TEST_CASE("kernel disk cache entries record their key: swapped, linked, FIFO or damaged entries are rebuilt",
          "[cuda][hip]") {
  TempCache cache;
  namespace fs = std::filesystem;
  const std::string a = backend::kernel_cache_key(1, "spirv", "shaderc", "") + ".spv";
  const std::string b = backend::kernel_cache_key(2, "spirv", "shaderc", "") + ".spv";
  backend::kernel_cache_store("vulkan/spirv", a, "kernel A");
  backend::kernel_cache_store("vulkan/spirv", b, "kernel B");
  const fs::path dir = fs::path(cache.dir) / "vulkan" / "spirv";
  REQUIRE(backend::kernel_cache_load("vulkan/spirv", a) == std::optional<std::string>("kernel A"));
  // Swapped on disk: each checksum is intact, but each file names the other entry.
  fs::rename(dir / a, dir / "swap");
  fs::rename(dir / b, dir / a);
  fs::rename(dir / "swap", dir / b);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", a).has_value());
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", b).has_value());
  // The same name in another folder is another entry.
  backend::kernel_cache_store("cuda/sm_80", a, "cubin");
  fs::copy_file(dir.parent_path().parent_path() / "cuda" / "sm_80" / a, dir / a, fs::copy_options::overwrite_existing);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", a).has_value());
  // A rebuilt entry loads again.
  backend::kernel_cache_store("vulkan/spirv", a, "kernel A");
  CHECK(backend::kernel_cache_load("vulkan/spirv", a) == std::optional<std::string>("kernel A"));
  // A link to /dev/zero, a FIFO: absent at once (no abort, no wait), and the next store replaces them.
  fs::remove(dir / b);
  fs::create_symlink("/dev/zero", dir / b);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", b).has_value());
  backend::kernel_cache_store("vulkan/spirv", b, "kernel B");
  CHECK(fs::is_regular_file(fs::symlink_status(dir / b)));
  CHECK(backend::kernel_cache_load("vulkan/spirv", b) == std::optional<std::string>("kernel B"));
  fs::remove(dir / b);
  REQUIRE(::mkfifo((dir / b).c_str(), 0600) == 0);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", b).has_value());
  backend::kernel_cache_store("vulkan/spirv", b, "kernel B");
  CHECK(backend::kernel_cache_load("vulkan/spirv", b) == std::optional<std::string>("kernel B"));
  // A link to a good entry is not followed either.
  fs::remove(dir / b);
  fs::create_symlink(dir / a, dir / b);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", b).has_value());
  // Truncated and old-format files.
  backend::kernel_cache_store("vulkan/spirv", a, "kernel A");
  fs::resize_file(dir / a, fs::file_size(dir / a) - 3);
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", a).has_value());
  { std::ofstream(dir / a, std::ios::binary | std::ios::trunc) << "x"; }
  CHECK_FALSE(backend::kernel_cache_load("vulkan/spirv", a).has_value());
}

#ifdef GPUSIM_HAVE_CUDA

TEST_CASE("NVRTC compiles a dialect kernel for sm_70 sm_80 and sm_90", "[cuda]") {
  std::string why;
  if (!backend::cuda::nvrtc_available(&why)) {
    SKIPPED(why);
    return;
  }
  auto nv = backend::cuda::nvrtc_info();
  REQUIRE(nv.ok());
  INFO("NVRTC " << nv->version << " at " << nv->library << ", headers " << nv->include_dir);
  for (const char* arch : {"sm_70", "sm_80", "sm_90"}) {
    const bool known = std::find(nv->archs.begin(), nv->archs.end(), arch) != nv->archs.end();
    if (!known) WARN("NVRTC " << nv->version << " does not target " << arch << "; checking that it says so");
    for (bool fp16 : {false, true}) {
      INFO(arch << (fp16 ? " fp16" : " fp32"));
      std::string log;
      auto cubin = backend::cuda::compile_cuda(axpb(fp16), arch, &log);
      if (!known) {
        // CUDA 13 dropped Volta (sm_70): the error says so and how to get a compiler that has it.
        REQUIRE_FALSE(cubin.ok());
        CHECK(cubin.error().code == ErrorCode::kUnsupported);
        CHECK_THAT(cubin.error().message, Contains(arch) && Contains("NVRTC"));
        continue;
      }
      INFO(log);
      REQUIRE(cubin.ok());
      CHECK(is_elf(*cubin));
    }
  }
  // PTX for the driver to finish: the form used for GPUs newer than NVRTC.
  auto ptx = backend::cuda::compile_cuda(axpb(true), "compute_" + nv->archs.back().substr(3));
  REQUIRE(ptx.ok());
  CHECK_THAT(*ptx, Contains(".entry axpb_f16"));
}

TEST_CASE("NVRTC errors name the kernel the target and the log line", "[cuda]") {
  std::string why;
  if (!backend::cuda::nvrtc_available(&why)) {
    SKIPPED(why);
    return;
  }
  std::string log;
  auto r = backend::cuda::compile_cuda(broken(), "sm_80", &log);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kDevice);
  CHECK_THAT(r.error().message, Contains("kernel \"broken_kernel\"") && Contains("sm_80"));
  CHECK_THAT(r.error().message, Contains("broken_kernel.cu(2)") && Contains("error"));
  CHECK_THAT(log, Contains("broken_kernel.cu(2)"));

  auto bad_target = backend::cuda::compile_cuda(axpb(false), "gfx90a");
  REQUIRE_FALSE(bad_target.ok());
  CHECK(bad_target.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad_target.error().message, Contains("\"gfx90a\" is not a CUDA target"));

  backend::KernelSource glsl = axpb(false);
  glsl.language = backend::Language::kGlsl;
  auto wrong_language = backend::cuda::compile_cuda(glsl, "sm_80");
  REQUIRE_FALSE(wrong_language.ok());
  CHECK(wrong_language.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("CUDA without a usable device is unavailable and says what to install", "[cuda]") {
  const auto built = backend::built_backends();
  CHECK(std::find(built.begin(), built.end(), "cuda") != built.end());
  auto devices = backend::list_devices("cuda");
  auto dev = backend::open("cuda", 0);
  if (dev.ok()) {
    REQUIRE(devices.ok());
    CHECK_FALSE(devices->empty());
    auto missing = backend::open("cuda", 4096);
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().code == ErrorCode::kUnavailable);
    CHECK_THAT(missing.error().message, Contains("CUDA device 4096 does not exist"));
    WARN("a CUDA device is present (" << (*dev)->info().name << "): the unavailable path is not exercised");
    return;
  }
  CHECK(dev.error().code == ErrorCode::kUnavailable);
  const std::string& m = dev.error().message;
  INFO(m);
  // libcuda missing, no GPU (cuInit), or NVRTC missing: each names the library or driver.
  CHECK((m.find("libcuda.so.1") != std::string::npos || m.find("libnvrtc") != std::string::npos));
  CHECK((m.find("install") != std::string::npos || m.find("check") != std::string::npos));
  REQUIRE_FALSE(devices.ok());
  CHECK(devices.error().code == ErrorCode::kUnavailable);
}

TEST_CASE("CUDA device computes 2a plus b with buffers timers and the compile cache", "[cuda]") {
  TempCache cache;
  conformance("cuda");
  // A second device object finds the kernel in the disk cache instead of compiling it.
  auto dev = backend::open("cuda", 0);
  if (!dev) return;
  auto k = (*dev)->compile(axpb(false));
  REQUIRE(k.ok());
  CHECK((*dev)->compile_stats().compiled == 0);
  CHECK((*dev)->compile_stats().cache_hits == 1);
}

#endif  // GPUSIM_HAVE_CUDA

#ifdef GPUSIM_HAVE_HIP

TEST_CASE("hiprtc compiles a dialect kernel for gfx90a and gfx1100", "[hip]") {
  std::string why;
  if (!backend::hip::hiprtc_available(&why)) {
    SKIPPED(why);
    return;
  }
  auto rtc = backend::hip::hiprtc_info();
  REQUIRE(rtc.ok());
  INFO("hiprtc of ROCm " << rtc->version << " at " << rtc->library);
  for (const char* arch : {"gfx90a", "gfx1100"}) {
    const bool known = rtc->archs.empty() || std::find(rtc->archs.begin(), rtc->archs.end(), arch) != rtc->archs.end();
    if (!known) WARN("hiprtc of ROCm " << rtc->version << " does not know " << arch << "; checking that it says so");
    for (bool fp16 : {false, true}) {
      INFO(arch << (fp16 ? " fp16" : " fp32"));
      std::string log;
      auto code = backend::hip::compile_hip(axpb(fp16), arch, &log);
      if (!known) {
        // ROCm 5.2's compiler predates gfx11 (and would crash on it): the error says so.
        REQUIRE_FALSE(code.ok());
        CHECK(code.error().code == ErrorCode::kUnsupported);
        CHECK_THAT(code.error().message, Contains(arch) && Contains("ROCm"));
        continue;
      }
      INFO(log);
      REQUIRE(code.ok());
      CHECK(is_elf(*code));
    }
  }
}

TEST_CASE("hiprtc errors name the kernel the target and the log line", "[hip]") {
  std::string why;
  if (!backend::hip::hiprtc_available(&why)) {
    SKIPPED(why);
    return;
  }
  std::string log;
  auto r = backend::hip::compile_hip(broken(), "gfx90a", &log);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kDevice);
  CHECK_THAT(r.error().message, Contains("kernel \"broken_kernel\"") && Contains("gfx90a"));
  CHECK_THAT(r.error().message, Contains("broken_kernel.cu:2:") && Contains("error"));
  CHECK_THAT(log, Contains("expected expression"));

  auto bad_target = backend::hip::compile_hip(axpb(false), "sm_80");
  REQUIRE_FALSE(bad_target.ok());
  CHECK(bad_target.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad_target.error().message, Contains("\"sm_80\" is not an AMD GPU target"));
}

TEST_CASE("HIP without a usable device is unavailable and says what to install", "[hip]") {
  const auto built = backend::built_backends();
  CHECK(std::find(built.begin(), built.end(), "hip") != built.end());
  auto devices = backend::list_devices("hip");
  auto dev = backend::open("hip", 0);
  if (dev.ok()) {
    REQUIRE(devices.ok());
    CHECK_FALSE(devices->empty());
    WARN("an AMD GPU is present (" << (*dev)->info().name << "): the unavailable path is not exercised");
    return;
  }
  CHECK(dev.error().code == ErrorCode::kUnavailable);
  const std::string& m = dev.error().message;
  INFO(m);
  CHECK((m.find("libamdhip64") != std::string::npos || m.find("hiprtc") != std::string::npos));
  CHECK((m.find("amdgpu") != std::string::npos || m.find("install") != std::string::npos));
  REQUIRE_FALSE(devices.ok());
  CHECK(devices.error().code == ErrorCode::kUnavailable);
}

TEST_CASE("HIP device computes 2a plus b with buffers timers and the compile cache", "[hip]") {
  TempCache cache;
  conformance("hip");
  auto dev = backend::open("hip", 0);
  if (!dev) return;
  auto k = (*dev)->compile(axpb(false));
  REQUIRE(k.ok());
  CHECK((*dev)->compile_stats().compiled == 0);
  CHECK((*dev)->compile_stats().cache_hits == 1);
}

#endif  // GPUSIM_HAVE_HIP
