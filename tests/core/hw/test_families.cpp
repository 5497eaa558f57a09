// Architecture families (gpu_profiles/families/, schema gpusim.family/1): a card's peaks derived as
// units x rate per clock x boost clock, stated peaks checked against that, `gpusim profiles new`
// and `profiles families`, and names as tools print them resolving to profiles.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpusim/gpu_profile.h"
#include "gpusim/llm.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

namespace {

namespace fs = std::filesystem;
using gpusim::Precision;

std::string fresh_dir() {
  static std::atomic<int> counter{0};
  const std::string d = gpusim::test::temp_dir() + "/families-" + std::to_string(counter++);
  fs::remove_all(d);
  fs::create_directories(d + "/families");
  return d;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

const std::string kFamily = R"(schema: gpusim.family/1
name: test-arch
vendor: nvidia
architecture: Testarch (CC 9.9)
compute:
  warp_size: 32
  max_threads_per_unit: 1536
  max_blocks_per_unit: 16
  max_threads_per_block: 1024
  registers_per_unit: 65536
  max_registers_per_thread: 255
  shared_memory_per_unit_kb: 100
  shared_memory_per_block_kb: 99
rates:
  vector: {fp32: 256, fp16: 256}
  matrix:
    - {dtype: fp16, accumulate: fp32, per_clock: 1024}
  shared_memory_bytes_per_clock: 128
  l2_latency_cycles: 200
  idle_fraction: 0.1
memory:
  l1: {size_per_unit_kb: 128}
sources:
  compute.warp_size: "w"
  compute.max_threads_per_unit: "t"
  compute.max_blocks_per_unit: "b"
  compute.max_threads_per_block: "tb"
  compute.registers_per_unit: "r"
  compute.max_registers_per_thread: "rt"
  compute.shared_memory_per_unit_kb: "s"
  compute.shared_memory_per_block_kb: "sb"
  rates: "the test's rates"
  memory.l1: "l1"
)";

const std::string kCard = R"(schema: gpusim.profile/1
name: test-card
family: test-arch
display_name: Test Card
compute: {units: 10, boost_clock_mhz: 2000}
memory:
  dram: {size_gb: 8, bandwidth_gbps: 400}
  l2: {size_mb: 4}
host_link: {type: pcie, generation: 4, lanes: 16}
power: {tdp_w: 200}
sources:
  compute: "spec sheet"
  memory: "spec sheet"
  host_link: "spec sheet"
  power: "spec sheet"
)";

std::string with_family(const std::string& card) {
  const std::string d = fresh_dir();
  write(d + "/families/test-arch.yaml", kFamily);
  write(d + "/test-card.yaml", card);
  return d;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  REQUIRE(pos != std::string::npos);
  return text.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("a card's peaks are its units x the family's rate per clock x its boost clock", "[profiles][families]") {
  const std::string d = with_family(kCard);
  auto p = gpusim::load_profile(d + "/test-card.yaml", {d});
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  CHECK(p->family == "test-arch");
  CHECK(p->vector_tflops(Precision::kFp32) == Approx(10 * 256 * 2000e-6));  // 5.12
  REQUIRE(p->matrix_tflops(Precision::kFp16, Precision::kFp32).has_value());
  CHECK(*p->matrix_tflops(Precision::kFp16, Precision::kFp32) == Approx(20.48));
  CHECK(p->compute.shared_memory_bandwidth_gbps == Approx(10 * 128 * 2000e-3));
  CHECK(p->memory.l2.latency_ns == Approx(100));  // 200 cycles at 2 GHz
  CHECK(p->power.idle_w == Approx(20));
  CHECK(p->compute.warp_size == 32);
  CHECK(p->architecture == "Testarch (CC 9.9)");
  CHECK(p->sources.at("compute.vector_tflops.fp32").find("derived: 10 units x 256 FLOP/clock x 2000 MHz") == 0);
  CHECK(p->sources.at("compute.warp_size") == "w (family test-arch)");
}

TEST_CASE("a stated peak that is not units x rate x clock names all three", "[profiles][families][errors]") {
  const std::string d = with_family(replaced(kCard, "compute: {units: 10, boost_clock_mhz: 2000}",
                                             "compute: {units: 10, boost_clock_mhz: 2000, vector_tflops: {fp32: 6}}"));
  auto p = gpusim::load_profile(d + "/test-card.yaml", {d});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == d + "/test-card.yaml: compute.vector_tflops.fp32: 6 TFLOPS is not 10 units x 256 FLOP/clock "
                                 "(family test-arch) x 2000 MHz = 5.12 TFLOPS; fix the figure, compute.units or "
                                 "compute.boost_clock_mhz, or leave the figure out to have it derived");
  // Within 2% (datasheets round) it loads, and the stated figure wins.
  const std::string ok = with_family(replaced(kCard, "compute: {units: 10, boost_clock_mhz: 2000}",
                                              "compute: {units: 10, boost_clock_mhz: 2000, vector_tflops: {fp32: 5.2}}"));
  auto q = gpusim::load_profile(ok + "/test-card.yaml", {ok});
  REQUIRE(q.ok());
  CHECK(q->vector_tflops(Precision::kFp32) == 5.2);
}

TEST_CASE("family errors name the file, the key and the fix", "[profiles][families][errors]") {
  const std::string unknown = with_family(replaced(kCard, "family: test-arch", "family: test-arc"));
  auto p = gpusim::load_profile(unknown + "/test-card.yaml", {unknown});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find(unknown + "/test-card.yaml: family: \"test-arc\" is not a known family (searched families/ in ") == 0);
  CHECK(p.error().message.find("closest: test-arch") != std::string::npos);

  const std::string both = with_family(replaced(kCard, "family: test-arch", "family: test-arch\nextends: other"));
  p = gpusim::load_profile(both + "/test-card.yaml", {both});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == both + "/test-card.yaml: family: a profile takes its figures from a family or from the "
                                    "profile it extends, not both; remove one of family and extends");

  const std::string d = fresh_dir();
  write(d + "/families/test-arch.yaml", replaced(kFamily, "  rates: \"the test's rates\"\n", ""));
  write(d + "/test-card.yaml", kCard);
  p = gpusim::load_profile(d + "/test-card.yaml", {d});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find(d + "/families/test-arch.yaml: sources: no source for rates.vector.fp32, ") == 0);

  const std::string bad = fresh_dir();
  write(bad + "/families/test-arch.yaml", replaced(kFamily, "per_clock: 1024", "per_clock: -1"));
  write(bad + "/test-card.yaml", kCard);
  p = gpusim::load_profile(bad + "/test-card.yaml", {bad});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == bad + "/families/test-arch.yaml: rates.matrix[0].per_clock: -1 is negative; expected 0.001 to 10000000");
}

TEST_CASE("a family extends another and replaces its matrix rates by dtype and accumulate", "[profiles][families]") {
  const std::string d = with_family(replaced(kCard, "family: test-arch", "family: test-arch-half"));
  write(d + "/families/test-arch-half.yaml", R"(schema: gpusim.family/1
name: test-arch-half
extends: test-arch
vendor: nvidia
architecture: Testarch (CC 9.9)
rates:
  vector: {fp32: 256}
  matrix:
    - {dtype: fp16, accumulate: fp32, per_clock: 512}
    - {dtype: int8, accumulate: int32, per_clock: 2048}
sources:
  rates.matrix: "halved"
)");
  auto p = gpusim::load_profile(d + "/test-card.yaml", {d});
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  CHECK(*p->matrix_tflops(Precision::kFp16, Precision::kFp32) == Approx(10.24));
  CHECK(*p->matrix_tflops(Precision::kInt8, Precision::kInt32) == Approx(40.96));
  auto f = gpusim::load_family("test-arch-half", {d});
  REQUIRE(f.ok());
  CHECK(f->extends_chain == std::vector<std::string>{"test-arch"});
  CHECK(f->matrix_per_clock.size() == 2);
  CHECK(gpusim::list_families({d}) == std::vector<std::string>{"test-arch", "test-arch-half"});
  // Family files are not profiles.
  CHECK(gpusim::list_profiles({d}).size() == 1);
}

TEST_CASE("every shipped family loads and at least 120 profiles validate", "[profiles][families]") {
  const auto dirs = gpusim::default_profile_dirs();
  const auto families = gpusim::list_families(dirs);
  CHECK(families.size() >= 25);
  for (const std::string& n : families) {
    INFO(n);
    auto f = gpusim::load_family(n, dirs);
    INFO((f ? std::string() : f.error().message));
    CHECK(f.ok());
  }
  size_t valid = 0, with_family = 0;
  for (const auto& e : gpusim::list_profiles(dirs)) {
    auto p = gpusim::load_profile(e.path, dirs);
    valid += p.ok();
    with_family += p.ok() && !p->family.empty();
  }
  CHECK(valid >= 120);
  CHECK(with_family >= 100);
  // The peaks a family derives agree with the datasheet figures of cards profiled by hand: an RTX
  // 4080 made from its spec sheet against the RTX 4090 (same family) per SM and clock.
  auto p4080 = gpusim::find_profile("nvidia-rtx-4080", dirs), p4090 = gpusim::find_profile("nvidia-rtx-4090", dirs);
  REQUIRE(p4080.ok());
  REQUIRE(p4090.ok());
  const auto per = [](const gpusim::GpuProfile& p) {
    return *p.matrix_tflops(Precision::kFp16, Precision::kFp32) / (p.compute.units * p.compute.boost_clock_mhz);
  };
  CHECK(per(*p4080) == Approx(per(*p4090)).epsilon(0.01));
}

TEST_CASE("names as tools print them resolve to their profiles", "[profiles][families]") {
  const auto dirs = gpusim::default_profile_dirs();
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA GeForce RTX 4080", "nvidia-rtx-4080"},                  // nvidia-smi, torch.cuda.get_device_name
      {"NVIDIA GeForce RTX 4090, 550.54.14", "nvidia-rtx-4090"},       // nvidia-smi --query-gpu=name,driver_version
      {"AMD Radeon RX 7900 XTX (RADV NAVI31)", "amd-rx-7900-xtx"},     // Vulkan, llama-bench's Vulkan rows
      {"Radeon RX 7900 XTX", "amd-rx-7900-xtx"},                       // rocm-smi --showproductname
      {"AMD Instinct MI300X", "amd-mi300x"},                           // torch on ROCm
      {"Intel(R) Arc(TM) B580 Graphics", "intel-arc-b580"},            // SYCL, llama-bench's SYCL rows
      {"Apple M4 Pro (20-core GPU)", "apple-m4-pro-20"},               // Apple's system report: chip and cores
      {"Apple M2 Max", "apple-m2-max"},                                // Metal's device name
      {"Tesla T4", "nvidia-t4"},                                       // NeuSight, torch
      {"RTX 3090", "nvidia-rtx-3090"},                                 // timm's benchmark files
      {"3060", "nvidia-rtx-3060"},                                     // fewest words beyond the query
  };
  for (const auto& [name, id] : cases) {
    INFO(name);
    auto p = gpusim::find_profile(name, dirs);
    INFO((p ? std::string() : p.error().message));
    REQUIRE(p.ok());
    CHECK(p->name == id);
  }
  auto amb = gpusim::find_profile("a100", dirs);
  REQUIRE_FALSE(amb.ok());
  CHECK(amb.error().message.find("matches 4 profiles") != std::string::npos);
  auto none = gpusim::find_profile("GeForce GTX 980", dirs);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("closest: ") != std::string::npos);
  CHECK(none.error().message.find("`gpusim profiles new` writes one from its spec sheet's numbers") != std::string::npos);
}

TEST_CASE("the device names of the cards without a profile before issue 52 resolve", "[profiles][families]") {
  // tests/data/profiles/device-names.txt: the cards issue 52 lists, as nvidia-smi, rocm-smi, SYCL and
  // Metal print them. A chip Metal names without its GPU cores takes its full configuration and
  // says so.
  const auto dirs = gpusim::default_profile_dirs();
  std::ifstream in(gpusim::test::source_dir() + "/tests/data/profiles/device-names.txt");
  std::string name;
  int total = 0, resolved = 0;
  while (std::getline(in, name)) {
    if (name.empty()) continue;
    ++total;
    auto p = gpusim::find_profile(name, dirs);
    INFO(name << ": " << (p ? p->name : p.error().message));
    CHECK(p.ok());
    resolved += p.ok();
  }
  CHECK(total == 56);
  CHECK(resolved == 56);
  auto m1 = gpusim::find_profile("Apple M1 Max", dirs);
  REQUIRE(m1.ok());
  CHECK(m1->name == "apple-m1-max-32");
  CHECK(std::find(m1->assumptions.begin(), m1->assumptions.end(),
                  "\"Apple M1 Max\" is the device name of 2 profiles: the full configuration, apple-m1-max-32 (32 "
                  "units), was taken; name apple-m1-max-24 for the other") != m1->assumptions.end());
}

TEST_CASE("llama-bench's backend names are the backends gpusim models", "[llm][families]") {
  const std::pair<const char*, const char*> ok[] = {{"CUDA", "cuda"},     {"ROCm", "hip"},   {"HIP", "hip"},
                                                    {"Vulkan", "vulkan"}, {"Metal", "metal"}, {"Metal,BLAS", "metal"},
                                                    {"SYCL", "sycl"},     {"CUDA,BLAS", "cuda"}};
  for (const auto& [printed, name] : ok) {
    INFO(printed);
    auto b = gpusim::llm_backend(printed);
    REQUIRE(b.ok());
    CHECK(*b == name);
  }
  auto cpu = gpusim::llm_backend("BLAS");
  REQUIRE_FALSE(cpu.ok());
  CHECK(cpu.error().message == "backend \"BLAS\" runs llama.cpp on the CPU, not on a GPU; gpusim models its GPU backends: "
                               "CUDA, ROCm (hip), Vulkan, Metal and SYCL");
  auto unknown = gpusim::llm_backend("OpenCL");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message == "backend \"OpenCL\" is not a llama.cpp backend gpusim models; expected cuda, hip "
                                   "(ROCm), vulkan, metal or sycl");
}

TEST_CASE("gpusim profiles new writes a profile a family completes, and refuses what it cannot", "[profiles][families][cli]") {
  const std::string d = fresh_dir();
  const std::string out = d + "/nvidia-rtx-4080-test.yaml";
  const std::string args = "profiles new nvidia-rtx-4080-test --like nvidia-ada-geforce --units 76 --boost-mhz 2505 "
                           "--memory-gb 16 --bandwidth-gbps 716.8 --l2-mb 64 --tdp-w 320 --pcie 4x16 "
                           "--source 'a spec sheet' --out " + out;
  const auto r = gpusim::test::run_gpusim(args);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("wrote " + out + ": 76 units at 2505 MHz, FP32 48.74 TFLOPS") == 0);
  auto p = gpusim::load_profile(out, gpusim::default_profile_dirs());
  REQUIRE(p.ok());
  CHECK(p->family == "nvidia-ada-geforce");
  CHECK(p->sources.at("compute") == "a spec sheet");
  // Not again without --force.
  const auto again = gpusim::test::run_gpusim(args);
  CHECK(again.rc == 1);
  CHECK(again.out.find(out + " exists; give --force to overwrite it") != std::string::npos);
  // A family without a host link needs one.
  const auto nolink = gpusim::test::run_gpusim("profiles new x --like nvidia-ada --units 76 --boost-mhz 2505 --memory-gb 16 "
                                               "--bandwidth-gbps 716 --l2-mb 64 --tdp-w 320 --out " + d + "/x.yaml");
  CHECK(nolink.rc == 1);
  CHECK(nolink.out.find("x.yaml: host_link: missing; this key is required") != std::string::npos);
  CHECK(nolink.out.find("family nvidia-ada has no host link: give --pcie GENxLANES or --unified") != std::string::npos);
  // An unknown family lists the families.
  const auto like = gpusim::test::run_gpusim("profiles new x --like nvidia-adaa --units 1 --boost-mhz 1000 --memory-gb 1 "
                                             "--bandwidth-gbps 1 --l2-mb 1 --tdp-w 1");
  CHECK(like.rc == 2);
  CHECK(like.out.find("--like nvidia-adaa: ") != std::string::npos);
  CHECK(like.out.find("families: amd-cdna3") != std::string::npos);
  const auto pcie = gpusim::test::run_gpusim("profiles new x --like nvidia-ada --units 1 --boost-mhz 1000 --memory-gb 1 "
                                             "--bandwidth-gbps 1 --l2-mb 1 --tdp-w 1 --pcie 16");
  CHECK(pcie.rc == 2);
  CHECK(pcie.out.find("--pcie 16: expected GENxLANES, such as 4x16") != std::string::npos);
  const auto fams = gpusim::test::run_gpusim("profiles families");
  CHECK(fams.rc == 0);
  CHECK(fams.out.find("nvidia-ada-geforce") != std::string::npos);
  CHECK(fams.out.find("matrix FLOP/clock/unit: fp16/fp32 512") != std::string::npos);
}
