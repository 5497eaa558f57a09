// GPU profiles (schema gpusim.profile/1): every shipped profile loads; every validation error is
// pinned with its message on a small fixture profile; extends merging; derived and assumed figures;
// matrix peak selection; the `gpusim profiles` command.
#include <catch2/catch.hpp>


#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpusim/documents.h"
#include "gpusim/gpu_profile.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

namespace {

namespace fs = std::filesystem;
using gpusim::GpuProfile;
using gpusim::Precision;

// A complete, minimal valid profile. Tests mutate one field at a time.
const std::string kBase = R"(schema: gpusim.profile/1
name: fixture-gpu
display_name: Fixture GPU
vendor: nvidia
architecture: Test architecture
compute:
  units: 28
  boost_clock_mhz: 1777
  warp_size: 32
  max_threads_per_unit: 1536
  max_blocks_per_unit: 16
  max_threads_per_block: 1024
  registers_per_unit: 65536
  max_registers_per_thread: 255
  shared_memory_per_unit_kb: 100
  shared_memory_per_block_kb: 99
  vector_tflops:
    fp32: 12.74
    fp16: 12.74
  matrix_tflops:
    - {dtype: fp16, accumulate: fp32, tflops: 25.5}
    - {dtype: fp16, accumulate: fp16, tflops: 51.0}
memory:
  dram: {size_gb: 12, bandwidth_gbps: 360}
  l2: {size_mb: 3}
  l1: {size_per_unit_kb: 128}
host_link: {type: pcie, generation: 4, lanes: 16}
power: {tdp_w: 170, idle_w: 15}
sources:
  compute: "fixture"
  memory: "fixture"
  host_link: "fixture"
  power: "fixture"
)";

// A fresh, empty directory under the test temp dir.
std::string fixture_dir() {
  static std::atomic<int> counter{0};
  const std::string d = gpusim::test::temp_dir() + "/profiles-" + std::to_string(counter++);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string write_file(const std::string& dir, const std::string& file_name, const std::string& text) {
  const std::string path = dir + "/" + file_name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return path;
}

std::string write_profile(const std::string& dir, const std::string& name, const std::string& text) {
  return write_file(dir, name + ".yaml", text);
}

// `text` with the one occurrence of `from` replaced by `to`.
std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  INFO("replacing: " << from);
  REQUIRE(pos != std::string::npos);
  REQUIRE(text.find(from, pos + 1) == std::string::npos);
  text.replace(pos, from.size(), to);
  return text;
}

gpusim::Result<GpuProfile> load_fixture(const std::string& text, std::string* path_out = nullptr) {
  const std::string dir = fixture_dir();
  const std::string path = write_profile(dir, "fixture-gpu", text);
  if (path_out) *path_out = path;
  return gpusim::load_profile(path, {dir});
}

// Loads kBase with `from` replaced by `to`; the load must fail with exactly "FILE: " + expected,
// where each further line of `expected` (every problem is reported) also starts with "FILE: ".
void check_error(const std::string& from, const std::string& to, const std::string& expected) {
  std::string path;
  const auto p = load_fixture(replace(kBase, from, to), &path);
  INFO("mutation: " << from << " -> " << to);
  REQUIRE_FALSE(p.ok());
  std::string want = path + ": ";
  for (char c : expected) want += c == '\n' ? "\n" + path + ": " : std::string(1, c);
  CHECK(p.error().message == want);
}

GpuProfile load_ok(const std::string& text) {
  std::string path;
  auto p = load_fixture(text, &path);
  INFO(path);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  return *p;
}

using gpusim::test::Run;
using gpusim::test::run_gpusim;

const char* kTopKeys =
    "schema, name, display_name, device_names, vendor, architecture, extends, family, compute, memory, host_link, launch, "
    "power, "
    "efficiency, calibrated, sources";

}  // namespace

// ---- the shipped profiles ---------------------------------------------------------------------------

TEST_CASE("every profile under gpu_profiles loads", "[profiles]") {
  const auto dirs = gpusim::default_profile_dirs();
  const auto all = gpusim::list_profiles(dirs);
  INFO("profiles found: " << all.size());
  CHECK(all.size() >= 28);
  for (const auto& e : all) {
    INFO(e.path);
    const auto p = gpusim::load_profile(e.path, dirs);
    INFO((p ? std::string() : p.error().message));
    CHECK(p.ok());
    if (p) {
      CHECK(p->name == e.name);
      CHECK(p->compute.units > 0);
      CHECK(p->memory.dram.bandwidth_gbps > 0);
      CHECK(p->vector_tflops(Precision::kFp32) > 0);
    }
  }
}

TEST_CASE("the reference GPUs have profiles", "[profiles]") {
  const auto dirs = gpusim::default_profile_dirs();
  for (const char* name : {"nvidia-rtx-3060", "nvidia-h100-sxm", "amd-mi300x", "apple-m3-max"}) {
    INFO(name);
    const auto p = gpusim::find_profile(name, dirs);
    INFO((p ? std::string() : p.error().message));
    CHECK(p.ok());
  }
}

TEST_CASE("shipped profiles give the figures the simulator would otherwise assume", "[profiles]") {
  const auto dirs = gpusim::default_profile_dirs();
  for (const auto& e : gpusim::list_profiles(dirs)) {
    if (e.path.find("/calibrated/") != std::string::npos) continue;
    INFO(e.path);
    const auto p = gpusim::load_profile(e.path, dirs);
    REQUIRE(p.ok());
    for (const std::string& a : p->assumptions) {
      CHECK_THAT(a, !Catch::Contains("DRAM latency") && !Catch::Contains("L2 latency") && !Catch::Contains("L1 latency") &&
                        !Catch::Contains("shared-memory bandwidth"));
    }
    CHECK(p->memory.dram.latency_ns > 0);
    CHECK(p->memory.l2.latency_ns > 0);
    CHECK(p->memory.l1.latency_ns > 0);
    CHECK(p->compute.shared_memory_bandwidth_gbps > 0);
    // Every NVIDIA and AMD GPU gives its datasheet base clock, at most its boost clock.
    if (p->vendor == "nvidia" || p->vendor == "amd") {
      CHECK(p->compute.base_clock_mhz > 0);
      CHECK(p->compute.base_clock_mhz <= p->compute.boost_clock_mhz);
    }
  }
}

TEST_CASE("the datacenter PCIe siblings extend their SXM profiles", "[profiles][extends]") {
  const auto dirs = gpusim::default_profile_dirs();
  struct Case {
    const char* name;
    const char* parent;
    const char* display;
    double tdp_w, boost_mhz, base_mhz, dram_gbps;
  };
  for (const Case& c : {Case{"nvidia-v100-pcie-32gb", "nvidia-v100", "Tesla V100-PCIE-32GB", 250, 1380, 1230, 900},
                        Case{"nvidia-a100-pcie-40gb", "nvidia-a100-40gb", "NVIDIA A100-PCIE-40GB", 250, 1410, 765, 1555},
                        Case{"nvidia-a100-pcie-80gb", "nvidia-a100-80gb", "NVIDIA A100 80GB PCIe", 300, 1410, 1065, 1935}}) {
    INFO(c.name);
    const auto p = gpusim::find_profile(c.name, dirs);
    INFO((p ? std::string() : p.error().message));
    REQUIRE(p.ok());
    REQUIRE_FALSE(p->extends_chain.empty());
    CHECK(p->extends_chain.front() == c.parent);
    CHECK(p->display_name == c.display);
    CHECK(p->power.tdp_w == c.tdp_w);
    CHECK(p->compute.boost_clock_mhz == c.boost_mhz);
    CHECK(p->compute.base_clock_mhz == c.base_mhz);
    CHECK(p->memory.dram.bandwidth_gbps == c.dram_gbps);
  }
  for (const char* name : {"nvidia-tesla-p4", "nvidia-p100-pcie-16gb"}) {
    INFO(name);
    const auto p = gpusim::find_profile(name, dirs);
    INFO((p ? std::string() : p.error().message));
    REQUIRE(p.ok());
    CHECK(p->compute.matrix_tflops.empty());  // Pascal: no tensor cores
  }
}

// ---- the fixture is valid ---------------------------------------------------------------------------

TEST_CASE("the minimal fixture profile loads with its figures", "[profiles]") {
  const GpuProfile p = load_ok(kBase);
  CHECK(p.name == "fixture-gpu");
  CHECK(p.display_name == "Fixture GPU");
  CHECK(p.vendor == "nvidia");
  CHECK(p.architecture == "Test architecture");
  CHECK(p.extends_chain.empty());
  CHECK(p.compute.units == 28);
  CHECK(p.compute.boost_clock_mhz == 1777);
  CHECK(p.compute.warp_size == 32);
  CHECK(p.compute.registers_per_unit == 65536);
  CHECK(p.compute.shared_memory_per_block_kb == 99);
  CHECK(p.compute.vector_tflops.at(Precision::kFp32) == Approx(12.74));
  REQUIRE(p.compute.matrix_tflops.size() == 2);
  CHECK(p.compute.matrix_alignment_elements == 8);
  CHECK(p.memory.dram.size_gb == 12);
  CHECK(p.memory.l2.present);
  CHECK_FALSE(p.memory.infinity_cache.present);
  CHECK_FALSE(p.host_link.unified);
  CHECK(p.power.tdp_w == 170);
  CHECK(p.sources.at("compute") == "fixture");
  CHECK_FALSE(p.calibrated.has_value());
  const gpusim::Efficiency defaults{};
  CHECK(p.efficiency.dram_bandwidth == defaults.dram_bandwidth);
  CHECK(p.efficiency.launch == defaults.launch);
}

// ---- validation errors, one per rule ----------------------------------------------------------------

TEST_CASE("an unknown top-level key lists the allowed keys", "[profiles][errors]") {
  check_error("vendor: nvidia\n", "vendor: nvidia\ncolour: green\n",
              std::string("colour: unknown key; allowed here: ") + kTopKeys);
}

TEST_CASE("an unknown nested key lists the keys allowed there", "[profiles][errors]") {
  check_error("  units: 28\n", "  units: 28\n  sms: 28\n",
              "compute.sms: unknown key; allowed here: units, boost_clock_mhz, base_clock_mhz, sustained_clock_mhz, "
              "warp_size, max_threads_per_unit, "
              "max_blocks_per_unit, max_threads_per_block, registers_per_unit, max_registers_per_thread, "
              "shared_memory_per_unit_kb, shared_memory_per_block_kb, shared_memory_bandwidth_gbps, barrier_ns, vector_tflops, matrix_tflops, "
              "matrix_alignment_elements, matrix_units");
  check_error("bandwidth_gbps: 360}", "bandwidth_gbps: 360, clock_mhz: 9000}",
              "memory.dram.clock_mhz: unknown key; allowed here: size_gb, bandwidth_gbps, bus_width_bits, type, "
              "latency_ns");
  check_error("    fp16: 12.74\n", "    fp16: 12.74\n    fp8: 50\n",
              "compute.vector_tflops.fp8: unknown key; allowed here: fp64, fp32, fp16, bf16, int32, int8");
  check_error("{dtype: fp16, accumulate: fp16, tflops: 51.0}", "{dtype: fp16, accumulate: fp16, tflops: 51.0, sparse: 1}",
              "compute.matrix_tflops[1].sparse: unknown key; allowed here: dtype, accumulate, tflops");
}

TEST_CASE("a negative number names the path and the range", "[profiles][errors]") {
  check_error("bandwidth_gbps: 360", "bandwidth_gbps: -3",
              "memory.dram.bandwidth_gbps: -3 is negative; expected 1 to 100000");
  check_error("  units: 28\n", "  units: -4\n", "compute.units: -4 is negative; expected 1 to 1024");
  check_error("idle_w: 15", "idle_w: -1", "power.idle_w: -1 is negative; expected 0.01 to 100000");
}

TEST_CASE("the README example error has exactly its documented format", "[profiles][errors]") {
  std::string path;
  const auto p = load_fixture(replace(kBase, "bandwidth_gbps: 360", "bandwidth_gbps: -3"), &path);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == path + ": memory.dram.bandwidth_gbps: -3 is negative; expected 1 to 100000");
  CHECK(p.error().code == gpusim::ErrorCode::kInvalidArgument);
}

TEST_CASE("a number out of range names the range", "[profiles][errors]") {
  check_error("  units: 28\n", "  units: 5000\n", "compute.units: 5000 is out of range; expected 1 to 1024");
  check_error("boost_clock_mhz: 1777", "boost_clock_mhz: 50",
              "compute.boost_clock_mhz: 50 is out of range; expected 100 to 5000");
  check_error("max_registers_per_thread: 255", "max_registers_per_thread: 2000",
              "compute.max_registers_per_thread: 2000 is out of range; expected 16 to 1024");
  check_error("tdp_w: 170", "tdp_w: 0", "power.tdp_w: 0 is out of range; expected 1 to 100000");
  check_error("lanes: 16", "lanes: 64", "host_link.lanes: 64 is out of range; expected 1 to 32");
  check_error("power: {tdp_w: 170, idle_w: 15}\n", "power: {tdp_w: 170, idle_w: 15}\nefficiency: {dram_bandwidth: 1.2}\n",
              "efficiency.dram_bandwidth: 1.2 is out of range; expected > 0 and <= 1");
  check_error("power: {tdp_w: 170, idle_w: 15}\n", "power: {tdp_w: 170, idle_w: 15}\nefficiency: {vector_flops: 0}\n",
              "efficiency.vector_flops: 0 is out of range; expected > 0 and <= 1");
  check_error("power: {tdp_w: 170, idle_w: 15}\n", "power: {tdp_w: 170, idle_w: 15}\nlaunch: {overhead_us: 5000}\n",
              "launch.overhead_us: 5000 is out of range; expected 0 to 1000\n"
              "sources: no source for launch.overhead_us; add a sources entry for it or for a prefix such as "
              "\"launch\"");
}

TEST_CASE("base and sustained clocks load, and are 0 when absent", "[profiles]") {
  const GpuProfile none = load_ok(kBase);
  CHECK(none.compute.base_clock_mhz == 0);
  CHECK(none.compute.sustained_clock_mhz == 0);
  const GpuProfile p = load_ok(replace(kBase, "  boost_clock_mhz: 1777\n",
                                       "  boost_clock_mhz: 1777\n  base_clock_mhz: 1320\n  sustained_clock_mhz: 1777\n"));
  CHECK(p.compute.base_clock_mhz == 1320);
  CHECK(p.compute.sustained_clock_mhz == 1777);  // equal to boost is allowed
  for (const std::string& a : p.assumptions) CHECK_THAT(a, !Catch::Contains("sustained") && !Catch::Contains("base clock"));
}

TEST_CASE("base and sustained clocks are range-checked like the boost clock", "[profiles][errors]") {
  check_error("  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  base_clock_mhz: 50\n",
              "compute.base_clock_mhz: 50 is out of range; expected 100 to 5000");
  check_error("  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  sustained_clock_mhz: 9000\n",
              "compute.sustained_clock_mhz: 9000 is out of range; expected 100 to 5000");
  check_error("  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  base_clock_mhz: fast\n",
              "compute.base_clock_mhz: \"fast\" is not a number; expected 100 to 5000");
}

TEST_CASE("a base clock above the boost clock is an error naming the fix", "[profiles][errors]") {
  check_error("  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  base_clock_mhz: 1900\n",
              "compute.base_clock_mhz: 1900 exceeds boost_clock_mhz (1777); it must be at most the boost clock: give "
              "the datasheet base clock, or fix boost_clock_mhz");
}

TEST_CASE("a sustained clock above the boost clock is an error naming the fix", "[profiles][errors]") {
  check_error("  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  sustained_clock_mhz: 1800.5\n",
              "compute.sustained_clock_mhz: 1800.5 exceeds boost_clock_mhz (1777); it must be at most the boost clock: "
              "give the clock held under sustained load, or omit it to have it derived");
}

TEST_CASE("the clock checks apply after extends merging", "[profiles][extends][errors]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu",
                replace(replace(kBase, "name: fixture-gpu", "name: base-gpu"), "  boost_clock_mhz: 1777\n",
                        "  boost_clock_mhz: 1777\n  base_clock_mhz: 1320\n  sustained_clock_mhz: 1600\n"));
  // Inherited as they are.
  const std::string child = write_profile(dir, "child-gpu", "name: child-gpu\nextends: base-gpu\n");
  const auto c = gpusim::load_profile(child, {dir});
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->compute.base_clock_mhz == 1320);
  CHECK(c->compute.sustained_clock_mhz == 1600);
  // A child that overrides one keeps the other.
  const std::string tuned =
      write_profile(dir, "tuned-gpu", "name: tuned-gpu\nextends: base-gpu\ncompute:\n  base_clock_mhz: 1100\n");
  const auto t = gpusim::load_profile(tuned, {dir});
  REQUIRE(t.ok());
  CHECK(t->compute.base_clock_mhz == 1100);
  CHECK(t->compute.sustained_clock_mhz == 1600);
  // A child that lowers the boost clock below the inherited base clock is caught.
  const std::string slow =
      write_profile(dir, "slow-gpu", "name: slow-gpu\nextends: base-gpu\ncompute:\n  boost_clock_mhz: 1200\n");
  const auto s = gpusim::load_profile(slow, {dir});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == slow + ": compute.base_clock_mhz: 1320 exceeds boost_clock_mhz (1200); it must be at most "
                                    "the boost clock: give the datasheet base clock, or fix boost_clock_mhz\n" +
                                    slow + ": compute.sustained_clock_mhz: 1600 exceeds boost_clock_mhz (1200); it must "
                                    "be at most the boost clock: give the clock held under sustained load, or omit it "
                                    "to have it derived");
}

TEST_CASE("a calibrated sustained clock overrides the profile's and may exceed boost", "[profiles][calibrated]") {
  const std::string tail = "power: {tdp_w: 170, idle_w: 15}\n";
  const GpuProfile p =
      load_ok(replace(replace(kBase, "  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  sustained_clock_mhz: 1500\n"),
                      tail,
                      tail + "calibrated:\n  compute:\n    sustained_clock_mhz: {value: 1852, p50: 1852, p95: 1890, "
                             "unit: MHz, repeats: 5}\n"));
  CHECK(p.compute.sustained_clock_mhz == Approx(1852));
  REQUIRE(p.calibrated);
  CHECK(p.calibrated->figures.at("compute.sustained_clock_mhz").p95 == Approx(1890));
  check_error(tail, tail + "calibrated:\n  compute:\n    sustained_clock_mhz: {value: 20}\n",
              "calibrated.compute.sustained_clock_mhz.value: 20 is out of range; expected 100 to 5000");
}

TEST_CASE("fp32 is a matrix input precision (AMD MFMA)", "[profiles][matrix]") {
  const GpuProfile p = load_ok(replace(kBase, "    - {dtype: fp16, accumulate: fp16, tflops: 51.0}\n",
                                       "    - {dtype: fp16, accumulate: fp16, tflops: 51.0}\n"
                                       "    - {dtype: fp32, accumulate: fp32, tflops: 46.1}\n"));
  REQUIRE(p.matrix_tflops(Precision::kFp32, Precision::kFp32).has_value());
  CHECK(*p.matrix_tflops(Precision::kFp32, Precision::kFp32) == Approx(46.1));
  const auto dirs = gpusim::default_profile_dirs();
  for (const char* name : {"amd-mi100", "amd-mi210", "amd-mi250x", "amd-mi300x"}) {
    INFO(name);
    const auto a = gpusim::find_profile(name, dirs);
    REQUIRE(a.ok());
    CHECK(a->matrix_tflops(Precision::kFp32, Precision::kFp32).has_value());
  }
}

TEST_CASE("a value that is not a number is reported with the range", "[profiles][errors]") {
  check_error("  units: 28\n", "  units: lots\n", "compute.units: \"lots\" is not a number; expected 1 to 1024");
  check_error("bandwidth_gbps: 360", "bandwidth_gbps: fast",
              "memory.dram.bandwidth_gbps: \"fast\" is not a number; expected 1 to 100000");
  check_error("  units: 28\n", "  units: [28]\n", "compute.units: a list is not a number; expected 1 to 1024");
  check_error("  units: 28\n", "  units:\n", "compute.units: an empty value is not a number; expected 1 to 1024");
}

TEST_CASE("an integer field rejects a fraction", "[profiles][errors]") {
  check_error("  units: 28\n", "  units: 28.5\n", "compute.units: 28.5 is not a whole number; expected 1 to 1024");
  check_error("lanes: 16", "lanes: 15.5", "host_link.lanes: 15.5 is not a whole number; expected 1 to 32");
}

TEST_CASE("device_names must be a list of non-empty names", "[profiles][errors]") {
  check_error("display_name: Fixture GPU\n", "display_name: Fixture GPU\ndevice_names: NVIDIA Fixture\n",
              "device_names: \"NVIDIA Fixture\" is not a list of names (e.g. [\"NVIDIA H200\"])");
  check_error("display_name: Fixture GPU\n", "display_name: Fixture GPU\ndevice_names: [\"NVIDIA Fixture\", \"\"]\n",
              "device_names[1]: must be a non-empty string: a device name as its driver reports it");
  const GpuProfile p =
      load_ok(replace(kBase, "display_name: Fixture GPU\n", "display_name: Fixture GPU\ndevice_names: [\"NVIDIA Fixture\"]\n"));
  CHECK(p.device_names == std::vector<std::string>{"NVIDIA Fixture"});
}

// The name the driver of a real H200 reported (bench/gpu/h200-2026-11-27) holds no profile's
// display name ("NVIDIA H200 SXM 141GB"): before device_names no profile matched it.
TEST_CASE("a device gets its profile by the name its driver reports", "[profiles]") {
  const auto dirs = gpusim::default_profile_dirs();
  auto datasheet = gpusim::profile_for_device("NVIDIA H200", dirs, true);
  REQUIRE(datasheet);
  CHECK(datasheet->name == "nvidia-h200");
  // The calibrated profile of that card extends it, inherits its names and wins the tie.
  auto any = gpusim::profile_for_device("nvidia h200", dirs);
  REQUIRE(any);
  CHECK(any->name == "nvidia-h200-calibrated");
  auto h100 = gpusim::profile_for_device("NVIDIA H100 80GB HBM3", dirs, true);
  REQUIRE(h100);
  CHECK(h100->name == "nvidia-h100-sxm");
  // A display name inside the device's name still matches; a name listed nowhere gets none.
  auto a10 = gpusim::profile_for_device("NVIDIA A10", dirs, true);
  REQUIRE(a10);
  CHECK(a10->name == "nvidia-a10");
  CHECK_FALSE(gpusim::profile_for_device("NVIDIA GeForce GTX 980", dirs, true));
}

TEST_CASE("an enum value outside its set lists the allowed values", "[profiles][errors]") {
  check_error("vendor: nvidia", "vendor: nvida", "vendor: \"nvida\" is not one of nvidia, amd, intel, apple, cpu");
  check_error("warp_size: 32", "warp_size: 48", "compute.warp_size: \"48\" is not one of 8, 16, 32, 64");
  check_error("schema: gpusim.profile/1", "schema: gpusim.profile/2",
              "schema: \"gpusim.profile/2\" is not one of gpusim.profile/1");
  check_error("{dtype: fp16, accumulate: fp32, tflops: 25.5}", "{dtype: fp12, accumulate: fp32, tflops: 25.5}",
              "compute.matrix_tflops[0].dtype: \"fp12\" is not one of fp64, fp32, tf32, fp16, bf16, fp8, int8, int4, "
              "fp4");
  check_error("{dtype: fp16, accumulate: fp16, tflops: 51.0}", "{dtype: fp16, accumulate: bf16, tflops: 51.0}",
              "compute.matrix_tflops[1].accumulate: \"bf16\" is not one of fp64, fp32, fp16, int32");
  check_error("type: pcie", "type: nvlink", "host_link.type: \"nvlink\" is not one of pcie, unified");
  check_error("  units: 28\n", "  units: 28\n  matrix_units: tensor_cores\n",
              "compute.matrix_units: \"tensor_cores\" is not one of dedicated, alus");
}

TEST_CASE("a profile says whether its matrix instructions issue on the vector ALUs", "[profiles]") {
  // Dedicated units unless the profile says otherwise; Apple's simdgroup matrices and RDNA3's WMMA
  // run on the ALUs, and a profile that extends one inherits it.
  CHECK_FALSE(load_ok(kBase).compute.matrix_on_alus);
  CHECK(load_ok(replace(kBase, "  units: 28\n", "  units: 28\n  matrix_units: alus\n")).compute.matrix_on_alus);
  CHECK_FALSE(load_ok(replace(kBase, "  units: 28\n", "  units: 28\n  matrix_units: dedicated\n")).compute.matrix_on_alus);
  const std::vector<std::string> dirs = {gpusim::test::source_dir() + "/gpu_profiles"};
  for (const char* name : {"apple-m2-max", "apple-m2-max-30", "apple-m1-max-24", "amd-rx-7900-xtx"}) {
    auto p = gpusim::find_profile(name, dirs);
    REQUIRE(p);
    INFO(name);
    CHECK(p->compute.matrix_on_alus);
    CHECK(nlohmann::json::parse(gpusim::profile_document(*p))["compute"]["matrix_units"] == "alus");
  }
  auto h100 = gpusim::find_profile("nvidia-h100-sxm", dirs);
  REQUIRE(h100);
  CHECK_FALSE(h100->compute.matrix_on_alus);
}

TEST_CASE("a missing required key is named", "[profiles][errors]") {
  check_error("vendor: nvidia\n", "", "vendor: missing; this key is required");
  check_error("power: {tdp_w: 170, idle_w: 15}\n", "", "power: missing; this key is required");
  check_error("sources:\n  compute: \"fixture\"\n  memory: \"fixture\"\n  host_link: \"fixture\"\n  power: \"fixture\"\n",
              "", "sources: missing; this key is required");
  check_error("size_gb: 12, ", "", "memory.dram.size_gb: missing; this key is required");
  check_error("  l2: {size_mb: 3}\n", "", "memory.l2: missing; this key is required");
  check_error("  warp_size: 32\n", "", "compute.warp_size: missing; this key is required");
  check_error("{dtype: fp16, accumulate: fp32, tflops: 25.5}", "{dtype: fp16, accumulate: fp32}",
              "compute.matrix_tflops[0].tflops: missing; this key is required");
  check_error("type: pcie, ", "", "host_link.type: missing; this key is required");
}

TEST_CASE("a section that is not a mapping or a list is reported", "[profiles][errors]") {
  check_error("power: {tdp_w: 170, idle_w: 15}", "power: 170", "power: \"170\" is not a mapping; expected keys tdp_w, idle_w");
  check_error("  matrix_tflops:\n    - {dtype: fp16, accumulate: fp32, tflops: 25.5}\n    - {dtype: fp16, accumulate: "
              "fp16, tflops: 51.0}\n",
              "  matrix_tflops: 25\n", "compute.matrix_tflops: \"25\" is not a list");
  check_error("  compute: \"fixture\"", "  compute: \"\"",
              "sources.compute: must be a non-empty string naming the source");
}

TEST_CASE("the name must equal the file name", "[profiles][errors]") {
  check_error("name: fixture-gpu", "name: other-gpu",
              "name: \"other-gpu\" does not match the file name \"fixture-gpu\"; rename one of them");
}

TEST_CASE("idle power must be below TDP", "[profiles][errors]") {
  check_error("idle_w: 15", "idle_w: 170", "power.idle_w: 170 is not below tdp_w (170)");
  check_error("idle_w: 15", "idle_w: 200", "power.idle_w: 200 is not below tdp_w (170)");
}

TEST_CASE("shared memory per block cannot exceed shared memory per unit", "[profiles][errors]") {
  check_error("shared_memory_per_block_kb: 99", "shared_memory_per_block_kb: 120",
              "compute.shared_memory_per_block_kb: 120 exceeds shared_memory_per_unit_kb (100)");
  // Equal is allowed.
  load_ok(replace(kBase, "shared_memory_per_block_kb: 99", "shared_memory_per_block_kb: 100"));
}

TEST_CASE("a pcie link needs generation and lanes or a bandwidth", "[profiles][errors]") {
  const std::string msg = "host_link: a pcie link needs generation and lanes (or bandwidth_gbps)";
  check_error("generation: 4, lanes: 16", "lanes: 16", msg);
  check_error("generation: 4, lanes: 16", "generation: 4", msg);
  check_error("host_link: {type: pcie, generation: 4, lanes: 16}", "host_link: {type: pcie}", msg);
  const GpuProfile p = load_ok(replace(kBase, "generation: 4, lanes: 16", "bandwidth_gbps: 25"));
  CHECK(p.host_link.bandwidth_gbps == 25);
}

TEST_CASE("every figure needs a source", "[profiles][errors]") {
  check_error("  power: \"fixture\"\n", "",
              "sources: no source for power.tdp_w, power.idle_w; add a sources entry for each or for a prefix such as "
              "\"power\"");
  check_error("  memory: \"fixture\"\n", "  memory.dram: \"fixture\"\n  memory.l1: \"fixture\"\n",
              "sources: no source for memory.l2.size_mb; add a sources entry for it or for a prefix such as "
              "\"memory\"");
  check_error("  compute: \"fixture\"\n", "  compute.units: \"fixture\"\n",
              "sources: no source for compute.boost_clock_mhz, compute.warp_size, compute.max_threads_per_unit, "
              "compute.max_blocks_per_unit and 9 more; add a sources entry for each or for a prefix such as "
              "\"compute\"");
  // A list element is covered by the list's path.
  load_ok(replace(kBase, "  compute: \"fixture\"\n",
                  "  compute.units: \"a\"\n  compute.boost_clock_mhz: \"a\"\n  compute.warp_size: \"a\"\n"
                  "  compute.max_threads_per_unit: \"a\"\n  compute.max_blocks_per_unit: \"a\"\n"
                  "  compute.max_threads_per_block: \"a\"\n  compute.registers_per_unit: \"a\"\n"
                  "  compute.max_registers_per_thread: \"a\"\n  compute.shared_memory_per_unit_kb: \"a\"\n"
                  "  compute.shared_memory_per_block_kb: \"a\"\n  compute.vector_tflops: \"a\"\n"
                  "  compute.matrix_tflops: \"b\"\n"));
}

TEST_CASE("launch figures need a source too", "[profiles][errors]") {
  const std::string tail = "power: {tdp_w: 170, idle_w: 15}\n";
  check_error(tail, tail + "launch: {overhead_us: 3.0}\n",
              "sources: no source for launch.overhead_us; add a sources entry for it or for a prefix such as "
              "\"launch\"");
  load_ok(replace(replace(kBase, tail, tail + "launch: {overhead_us: 3.0}\n"), "  power: \"fixture\"\n",
                  "  power: \"fixture\"\n  launch.overhead_us: \"fixture\"\n"));
}

TEST_CASE("a source may name a key without numeric figures", "[profiles]") {
  // A unified host link has no figures but its source entry names a key the profile has.
  const GpuProfile p = load_ok(replace(kBase, "{type: pcie, generation: 4, lanes: 16}", "{type: unified}"));
  CHECK(p.host_link.unified);
  CHECK(p.sources.at("host_link") == "fixture");
}

TEST_CASE("a source that names no figure is rejected", "[profiles][errors]") {
  check_error("  power: \"fixture\"\n", "  power: \"fixture\"\n  compute.tensor_cores: \"made up\"\n",
              "sources.compute.tensor_cores: names no figure in this profile; remove it or fix the path");
  check_error("  power: \"fixture\"\n", "  power: \"fixture\"\n  memory.infinity_cache: \"not in this profile\"\n",
              "sources.memory.infinity_cache: names no figure in this profile; remove it or fix the path");
}

TEST_CASE("extends naming an unknown profile lists where it searched", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  const std::string path =
      write_profile(dir, "fixture-gpu", replace(kBase, "vendor: nvidia\n", "vendor: nvidia\nextends: ghost-gpu\n"));
  const auto p = gpusim::load_profile(path, {dir});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == path + ": extends: \"ghost-gpu\" is not a known profile (searched " + dir + ")");
}

TEST_CASE("an extends cycle is reported", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  const std::string a = write_profile(dir, "cycle-a", "name: cycle-a\nextends: cycle-b\n");
  write_profile(dir, "cycle-b", "name: cycle-b\nextends: cycle-a\n");
  const auto p = gpusim::load_profile(a, {dir});
  REQUIRE_FALSE(p.ok());
  INFO(p.error().message);
  // Named at the extends that closes the loop, with the whole chain.
  const std::string b = dir + "/cycle-b.yaml";
  CHECK(p.error().message ==
        b + ": extends: \"cycle-a\" forms a cycle (cycle-a -> cycle-b -> cycle-a); remove one of the extends");

  // A profile extending itself.
  const std::string self = write_profile(dir, "cycle-self", "name: cycle-self\nextends: cycle-self\n");
  const auto s = gpusim::load_profile(self, {dir});
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::StartsWith(self + ": extends: \"cycle-self\" forms a cycle"));
}

TEST_CASE("invalid YAML syntax gives file line and column", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  const std::string path =
      write_file(dir, "broken-gpu.yaml", "schema: gpusim.profile/1\nname: broken-gpu\nvendor: [nvidia\n");
  const auto p = gpusim::load_profile(path, {dir});
  REQUIRE_FALSE(p.ok());
  INFO(p.error().message);
  CHECK(p.error().code == gpusim::ErrorCode::kParse);
  CHECK_THAT(p.error().message, Catch::StartsWith(path + ":"));
  CHECK_THAT(p.error().message, Catch::Contains(": not valid YAML: "));
  // FILE:LINE:COL: with 1-based numbers.
  const std::string rest = p.error().message.substr(path.size());
  CHECK_THAT(rest, Catch::Matches(R"(:[1-9][0-9]*:[1-9][0-9]*: not valid YAML: .+)"));

  const std::string tabs = write_file(dir, "tab-gpu.yaml", "name: tab-gpu\ncompute:\n  units: 28\n bad: [1, 2\n");
  const auto t = gpusim::load_profile(tabs, {dir});
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message.substr(tabs.size()), Catch::Matches(R"(:[1-9][0-9]*:[1-9][0-9]*: not valid YAML: .+)"));
}

TEST_CASE("a missing file is named", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  const auto p = gpusim::load_profile(dir + "/nope-gpu.yaml", {dir});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == gpusim::ErrorCode::kIo);
  CHECK(p.error().message == dir + "/nope-gpu.yaml: cannot open: no such file (check the path)");
}

TEST_CASE("a file that is not a mapping is rejected", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  for (const char* text : {"- a\n- b\n", "just a string\n", ""}) {
    INFO("text: " << text);
    const std::string path = write_file(dir, "list-gpu.yaml", text);
    const auto p = gpusim::load_profile(path, {dir});
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().message == path + ": a profile must be a YAML mapping (see gpu_profiles/README.md)");
  }
}

// ---- calibrated block -------------------------------------------------------------------------------

TEST_CASE("a calibrated block with an unknown key is rejected", "[profiles][errors][calibrated]") {
  const std::string tail = "power: {tdp_w: 170, idle_w: 15}\n";
  check_error(tail, tail + "calibrated:\n  device: x\n  voltage: 1\n",
              "calibrated.voltage: unknown key; allowed here: device, date, driver, command, measurements, efficiency, launch, memory, compute");
  check_error(tail, tail + "calibrated:\n  efficiency:\n    dram_speed: {value: 0.8}\n",
              "calibrated.efficiency.dram_speed: unknown key; allowed here: dram_bandwidth, l2_bandwidth, vector_flops, "
              "gemm_vector_flops, matrix_flops, grouped_conv, host_link, launch, own_round_trip, own_value_ns, own_block_us, "
              "own_simt_flops, own_matrix_flops");
  check_error(tail, tail + "calibrated:\n  memory:\n    dram.size_gb: {value: 3}\n",
              "calibrated.memory.dram.size_gb: unknown key; allowed here: dram.latency_ns, l2.size_mb, l2.bandwidth_gbps, "
              "l2.latency_ns, l1.latency_ns");
  check_error(tail, tail + "calibrated:\n  compute:\n    units: {value: 3}\n",
              "calibrated.compute.units: unknown key; allowed here: shared_memory_bandwidth_gbps, barrier_ns, "
              "sustained_clock_mhz");
  check_error(tail, tail + "calibrated:\n  memory:\n    l2.size_mb: {value: -2}\n",
              "calibrated.memory.l2.size_mb.value: -2 is negative; expected 0.001 to 100000");
  check_error(tail, tail + "calibrated:\n  efficiency:\n    dram_bandwidth: {value: 0.8, p99: 1}\n",
              "calibrated.efficiency.dram_bandwidth.p99: unknown key; allowed here: value, p50, p95, repeats, unit");
  check_error(tail, tail + "calibrated:\n  efficiency:\n    dram_bandwidth: {p50: 3984}\n",
              "calibrated.efficiency.dram_bandwidth.value: missing; this key is required");
  check_error(tail, tail + "calibrated:\n  efficiency:\n    dram_bandwidth: {value: 1.5}\n",
              "calibrated.efficiency.dram_bandwidth.value: 1.5 is out of range; expected > 0 and <= 1");
}

TEST_CASE("a calibrated figure overrides the efficiency and is recorded", "[profiles][calibrated]") {
  const std::string tail = "power: {tdp_w: 170, idle_w: 15}\n";
  const GpuProfile p = load_ok(replace(kBase, tail,
                                       tail + "efficiency: {dram_bandwidth: 0.9, l2_bandwidth: 0.7}\n"
                                              "calibrated:\n"
                                              "  device: \"NVIDIA H200 (driver 570.86)\"\n"
                                              "  date: 2026-11-21\n"
                                              "  efficiency:\n"
                                              "    dram_bandwidth: {value: 0.83, p50: 3984, p95: 3990, unit: gbps, "
                                              "repeats: 50}\n"
                                              "  launch:\n"
                                              "    overhead_us: {value: 2.4, p50: 2.4, p95: 2.9, repeats: 200}\n"));
  CHECK(p.efficiency.dram_bandwidth == Approx(0.83));  // calibrated beats the profile's 0.9
  CHECK(p.efficiency.l2_bandwidth == Approx(0.7));     // the profile's own factor
  CHECK(p.efficiency.vector_flops == gpusim::Efficiency{}.vector_flops);
  CHECK(p.launch.overhead_us == Approx(2.4));
  REQUIRE(p.calibrated.has_value());
  CHECK(p.calibrated->device == "NVIDIA H200 (driver 570.86)");
  CHECK(p.calibrated->date == "2026-11-21");
  REQUIRE(p.calibrated->figures.size() == 2);
  const auto& f = p.calibrated->figures.at("efficiency.dram_bandwidth");
  CHECK(f.value == Approx(0.83));
  CHECK(f.p50 == Approx(3984));
  CHECK(f.p95 == Approx(3990));
  CHECK(f.repeats == 50);
  CHECK(f.unit == "gbps");
  const auto& l = p.calibrated->figures.at("launch.overhead_us");
  CHECK(l.value == Approx(2.4));
  CHECK(l.repeats == 200);
  CHECK(l.unit.empty());
}

TEST_CASE("calibrated memory, compute and launch figures override the datasheet", "[profiles][calibrated]") {
  const std::string tail = "power: {tdp_w: 170, idle_w: 15}\n";
  const GpuProfile p = load_ok(replace(kBase, tail,
                                       tail + "calibrated:\n"
                                              "  driver: \"570.86\"\n"
                                              "  command: \"gpusim calibrate --backend cuda\"\n"
                                              "  memory:\n"
                                              "    dram.latency_ns: {value: 612, p50: 612, p95: 640, unit: ns, repeats: 5}\n"
                                              "    l2.size_mb: {value: 48.5}\n"
                                              "    l1.latency_ns: {value: 31}\n"
                                              "  compute:\n"
                                              "    shared_memory_bandwidth_gbps: {value: 21000}\n"
                                              "    barrier_ns: {value: 12}\n"
                                              "  launch:\n"
                                              "    block_us: {value: 0.01}\n"));
  CHECK(p.memory.dram.latency_ns == Approx(612));
  CHECK(p.memory.l2.size_mb == Approx(48.5));
  CHECK(p.memory.l1.latency_ns == Approx(31));
  CHECK(p.compute.shared_memory_bandwidth_gbps == Approx(21000));
  CHECK(p.compute.barrier_ns == Approx(12));
  CHECK(p.launch.block_us == Approx(0.01));
  REQUIRE(p.calibrated);
  CHECK(p.calibrated->driver == "570.86");
  CHECK(p.calibrated->command == "gpusim calibrate --backend cuda");
  CHECK(p.calibrated->figures.at("memory.dram.latency_ns").p95 == Approx(640));
}

// ---- find_profile -----------------------------------------------------------------------------------

TEST_CASE("find_profile with an unknown name suggests the closest names", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "fixture-gpu", kBase);
  write_profile(dir, "fixture-gpu-2", replace(kBase, "name: fixture-gpu", "name: fixture-gpu-2"));
  const auto p = gpusim::find_profile("nope-gpu", {dir});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message ==
        "no GPU profile named \"nope-gpu\"; closest: fixture-gpu, fixture-gpu-2 (or pass a path to a .yaml "
        "file; `gpusim profiles list` shows all 2); for a card without a profile, `gpusim profiles new` writes one "
        "from its spec sheet's numbers and an architecture family (`gpusim profiles families` lists them)");
  const auto none = gpusim::find_profile("nope-gpu", {fixture_dir()});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("known profiles: (none found)"));
}

TEST_CASE("find_profile takes a name or a path", "[profiles]") {
  const std::string dir = fixture_dir();
  const std::string path = write_profile(dir, "fixture-gpu", kBase);
  const auto by_name = gpusim::find_profile("fixture-gpu", {dir});
  REQUIRE(by_name.ok());
  CHECK(by_name->source_path == path);
  const auto by_path = gpusim::find_profile(path, {});
  REQUIRE(by_path.ok());
  CHECK(by_path->name == "fixture-gpu");
  const auto listed = gpusim::list_profiles({dir});
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].name == "fixture-gpu");
  CHECK(listed[0].path == path);
}

// ---- extends ----------------------------------------------------------------------------------------

TEST_CASE("extends merges the child over its parent", "[profiles][extends]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu", replace(kBase, "name: fixture-gpu", "name: base-gpu"));
  const std::string child_path = write_profile(dir, "child-gpu",
                                               "name: child-gpu\n"
                                               "display_name: Child GPU\n"
                                               "extends: base-gpu\n"
                                               "memory:\n"
                                               "  dram: {size_gb: 24, bandwidth_gbps: 936}\n"
                                               "sources:\n"
                                               "  memory: \"child datasheet\"\n");
  const auto c = gpusim::load_profile(child_path, {dir});
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->name == "child-gpu");
  CHECK(c->display_name == "Child GPU");
  CHECK(c->vendor == "nvidia");  // inherited
  CHECK(c->extends_chain == std::vector<std::string>{"base-gpu"});
  CHECK(c->source_path == child_path);
  // The child's DRAM, the parent's compute and other memory levels.
  CHECK(c->memory.dram.size_gb == 24);
  CHECK(c->memory.dram.bandwidth_gbps == 936);
  CHECK(c->memory.l2.size_mb == 3);
  CHECK(c->memory.l1.size_per_unit_kb == 128);
  CHECK(c->compute.units == 28);
  CHECK(c->compute.boost_clock_mhz == 1777);
  CHECK(c->compute.matrix_tflops.size() == 2);
  CHECK(c->power.tdp_w == 170);
  // The child's sources override the parent's; the rest are inherited.
  CHECK(c->sources.at("memory") == "child datasheet");
  CHECK(c->sources.at("compute") == "fixture");
  CHECK(c->sources.size() == 4);

  // One key of a nested mapping: the rest of that mapping is the parent's.
  const std::string partial = write_profile(dir, "partial-gpu",
                                            "name: partial-gpu\nextends: base-gpu\nmemory:\n  dram: {bandwidth_gbps: 448}\n");
  const auto q = gpusim::load_profile(partial, {dir});
  REQUIRE(q.ok());
  CHECK(q->memory.dram.bandwidth_gbps == 448);
  CHECK(q->memory.dram.size_gb == 12);
}

TEST_CASE("extends merges matrix peaks by type: a child listing some keeps its parent's others",
          "[profiles][extends]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu", replace(kBase, "name: fixture-gpu", "name: base-gpu"));
  const std::string child = write_profile(dir, "child-gpu",
                                          "name: child-gpu\nextends: base-gpu\ncompute:\n  matrix_tflops:\n"
                                          "    - {dtype: bf16, accumulate: fp32, tflops: 30}\n"
                                          "    - {dtype: fp16, accumulate: fp32, tflops: 27}\n"
                                          "sources:\n  compute.matrix_tflops: \"child datasheet\"\n");
  const auto c = gpusim::load_profile(child, {dir});
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  // The child's two entries, then the parent's fp16/fp16 it does not list (an int8 or fp16-accumulate
  // path lost to a partial list switched llama.cpp's prompt kernels).
  REQUIRE(c->compute.matrix_tflops.size() == 3);
  CHECK(c->compute.matrix_tflops[0].input == Precision::kBf16);
  CHECK(c->compute.matrix_tflops[0].tflops == 30);
  CHECK(c->matrix_tflops(Precision::kFp16, Precision::kFp32) == Approx(27));
  CHECK(c->matrix_tflops(Precision::kFp16, Precision::kFp16) == Approx(51.0));
  CHECK(c->compute.units == 28);
}

TEST_CASE("extends marks a figure the child sets without a source, and rescales the L2 with the clock",
          "[profiles][extends]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu",
                replace(replace(kBase, "name: fixture-gpu", "name: base-gpu"), "l2: {size_mb: 3}",
                        "l2: {size_mb: 3, bandwidth_gbps: 1500}"));
  // A lower clock and a DRAM figure of its own, neither sourced.
  const std::string child = write_profile(dir, "child-gpu",
                                          "name: child-gpu\nextends: base-gpu\ncompute: {boost_clock_mhz: 1500}\n"
                                          "memory:\n  dram: {bandwidth_gbps: 300}\n");
  const auto c = gpusim::load_profile(child, {dir});
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->memory.dram.bandwidth_gbps == 300);
  CHECK_THAT(c->sources.at("memory.dram.bandwidth_gbps"),
             Catch::StartsWith("unsourced: set by this profile, which gives no source for it (base-gpu's source for "
                               "memory is for base-gpu's value: fixture)"));
  CHECK_THAT(c->sources.at("compute.boost_clock_mhz"), Catch::StartsWith("unsourced: set by this profile"));
  // The parent's own figures keep the parent's source.
  CHECK(c->sources.at("memory") == "fixture");
  // The L2 runs at the core clock: 1500 x 1500 / 1777.
  CHECK(c->memory.l2.bandwidth_gbps == Approx(1500.0 * 1500 / 1777).epsilon(1e-4));
  CHECK_THAT(c->sources.at("memory.l2.bandwidth_gbps"), Catch::Contains("scaled by the boost clock, 1500 / 1777 MHz"));
  // And the matrix peaks by units x clock, as before.
  CHECK(c->matrix_tflops(Precision::kFp16, Precision::kFp16) == Approx(51.0 * 1500 / 1777).epsilon(1e-3));
}

TEST_CASE("extends chains record every parent nearest first", "[profiles][extends]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu", replace(kBase, "name: fixture-gpu", "name: base-gpu"));
  write_profile(dir, "child-gpu", "name: child-gpu\nextends: base-gpu\ncompute:\n  units: 40\n");
  const std::string grand =
      write_profile(dir, "grandchild-gpu", "name: grandchild-gpu\nextends: child-gpu\npower: {tdp_w: 300}\n");
  const auto g = gpusim::load_profile(grand, {dir});
  INFO((g ? std::string() : g.error().message));
  REQUIRE(g.ok());
  CHECK(g->extends_chain == std::vector<std::string>{"child-gpu", "base-gpu"});
  CHECK(g->compute.units == 40);
  CHECK(g->power.tdp_w == 300);
  CHECK(g->power.idle_w == 15);
  // find_profile resolves the same by name.
  const auto by_name = gpusim::find_profile("grandchild-gpu", {dir});
  REQUIRE(by_name.ok());
  CHECK(by_name->compute.units == 40);
}

TEST_CASE("a child is validated after merging", "[profiles][extends][errors]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu", replace(kBase, "name: fixture-gpu", "name: base-gpu"));
  const std::string bad = write_profile(dir, "bad-child", "name: bad-child\nextends: base-gpu\npower: {idle_w: 400}\n");
  const auto b = gpusim::load_profile(bad, {dir});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message == bad + ": power.idle_w: 400 is not below tdp_w (170)");
  // Without its own name the child inherits the parent's, which does not match its file name.
  const std::string unnamed = write_profile(dir, "unnamed-child", "extends: base-gpu\n");
  const auto u = gpusim::load_profile(unnamed, {dir});
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message ==
        unnamed + ": name: \"base-gpu\" does not match the file name \"unnamed-child\"; rename one of them");
}

// ---- derived and assumed figures --------------------------------------------------------------------

TEST_CASE("PCIe bandwidth is derived from generation and lanes", "[profiles][derived]") {
  const GpuProfile g4 = load_ok(kBase);
  CHECK(g4.host_link.generation == 4);
  CHECK(g4.host_link.lanes == 16);
  CHECK(g4.host_link.bandwidth_gbps == Approx(31.5).epsilon(0.01));
  const GpuProfile g3 = load_ok(replace(kBase, "generation: 4", "generation: 3"));
  CHECK(g3.host_link.bandwidth_gbps == Approx(15.75).epsilon(0.01));
  const GpuProfile g5x8 = load_ok(replace(kBase, "generation: 4, lanes: 16", "generation: 5, lanes: 8"));
  CHECK(g5x8.host_link.bandwidth_gbps == Approx(31.5).epsilon(0.01));
  // A given bandwidth wins over the derived one.
  const GpuProfile given = load_ok(replace(kBase, "lanes: 16}", "lanes: 16, bandwidth_gbps: 26}"));
  CHECK(given.host_link.bandwidth_gbps == 26);
  // Unified memory: no host copies.
  const GpuProfile unified = load_ok(replace(kBase, "{type: pcie, generation: 4, lanes: 16}", "{type: unified}"));
  CHECK(unified.host_link.unified);
}

TEST_CASE("missing figures are assumed and the assumptions recorded", "[profiles][derived]") {
  const GpuProfile p = load_ok(kBase);
  CHECK(p.memory.l2.bandwidth_gbps == Approx(3 * 360.0));
  const auto has = [&](const std::string& a) {
    return std::find(p.assumptions.begin(), p.assumptions.end(), a) != p.assumptions.end();
  };
  CHECK(has("L2 bandwidth = 3 x DRAM bandwidth"));
  CHECK(has("DRAM latency 500 ns"));
  CHECK(has("L2 latency 200 ns"));
  CHECK(has("L1 latency 30 ns"));
  CHECK(has("launch overhead 4 us"));
  CHECK(has("kernel latency floor 2 us"));
  CHECK(p.memory.dram.latency_ns == 500);
  CHECK(p.launch.overhead_us == 4.0);
  CHECK(p.launch.latency_floor_us == 2.0);

  // Given figures are used as they are and not reported as assumed.
  const GpuProfile q = load_ok(replace(
      replace(replace(kBase, "l2: {size_mb: 3}", "l2: {size_mb: 3, bandwidth_gbps: 1400, latency_ns: 180}"),
              "  power: \"fixture\"\n", "  power: \"fixture\"\n  launch: \"fixture\"\n"),
      "power: {tdp_w: 170, idle_w: 15}\n",
      "power: {tdp_w: 170, idle_w: 15}\nlaunch: {overhead_us: 3.0, latency_floor_us: 1.5}\n"));
  CHECK(q.memory.l2.bandwidth_gbps == 1400);
  CHECK(q.memory.l2.latency_ns == 180);
  CHECK(q.launch.overhead_us == 3.0);
  CHECK(q.launch.latency_floor_us == 1.5);
  for (const std::string& a : q.assumptions) {
    CHECK_THAT(a, !Catch::Contains("L2") && !Catch::Contains("launch") && !Catch::Contains("floor"));
  }

  // A last-level cache without figures.
  const GpuProfile ic = load_ok(replace(kBase, "  l1: {size_per_unit_kb: 128}\n",
                                        "  l1: {size_per_unit_kb: 128}\n  infinity_cache: {size_mb: 128}\n"));
  CHECK(ic.memory.infinity_cache.present);
  CHECK(ic.memory.infinity_cache.size_mb == 128);
  CHECK(ic.memory.infinity_cache.bandwidth_gbps == Approx(2 * 360.0));
}

// ---- matrix peaks -----------------------------------------------------------------------------------

TEST_CASE("matrix_tflops picks the rate for the accumulate asked", "[profiles][matrix]") {
  const GpuProfile p = load_ok(kBase);  // fp16/fp32 25.5 and fp16/fp16 51
  REQUIRE(p.matrix_tflops(Precision::kFp16, Precision::kFp32).has_value());
  CHECK(*p.matrix_tflops(Precision::kFp16, Precision::kFp32) == Approx(25.5));
  REQUIRE(p.matrix_tflops(Precision::kFp16, Precision::kFp16).has_value());
  CHECK(*p.matrix_tflops(Precision::kFp16, Precision::kFp16) == Approx(51.0));
  CHECK_FALSE(p.matrix_tflops(Precision::kBf16, Precision::kFp32).has_value());
  CHECK_FALSE(p.matrix_tflops(Precision::kFp16, Precision::kFp64).has_value());

  // The same answer whatever order the profile lists them in.
  const GpuProfile r = load_ok(replace(kBase,
                                       "    - {dtype: fp16, accumulate: fp32, tflops: 25.5}\n"
                                       "    - {dtype: fp16, accumulate: fp16, tflops: 51.0}\n",
                                       "    - {dtype: fp16, accumulate: fp16, tflops: 51.0}\n"
                                       "    - {dtype: fp16, accumulate: fp32, tflops: 25.5}\n"));
  CHECK(*r.matrix_tflops(Precision::kFp16, Precision::kFp32) == Approx(25.5));
  CHECK(*r.matrix_tflops(Precision::kFp16, Precision::kFp16) == Approx(51.0));
}

TEST_CASE("matrix_tflops is empty for a GPU without matrix units", "[profiles][matrix]") {
  const GpuProfile p = load_ok(replace(kBase,
                                       "  matrix_tflops:\n"
                                       "    - {dtype: fp16, accumulate: fp32, tflops: 25.5}\n"
                                       "    - {dtype: fp16, accumulate: fp16, tflops: 51.0}\n",
                                       ""));
  CHECK(p.compute.matrix_tflops.empty());
  CHECK_FALSE(p.matrix_tflops(Precision::kFp16, Precision::kFp32).has_value());
  CHECK_FALSE(p.matrix_tflops(Precision::kFp16, Precision::kFp16).has_value());
  CHECK_FALSE(p.matrix_tflops(Precision::kInt8, Precision::kInt32).has_value());
  // Vector peaks fall back to fp32 for a precision without a figure.
  CHECK(p.vector_tflops(Precision::kFp16) == Approx(12.74));
  CHECK(p.vector_tflops(Precision::kFp64) == Approx(12.74));
}

// ---- the gpusim profiles command --------------------------------------------------------------------

TEST_CASE("profiles and its subcommands have --help", "[profiles][cli]") {
  const Run top = run_gpusim("--help");
  CHECK(top.rc == 0);
  CHECK_THAT(top.out, Catch::Contains("profiles"));
  for (const char* cmd : {"profiles", "profiles list", "profiles show", "profiles validate"}) {
    INFO(cmd);
    const Run r = run_gpusim(std::string(cmd) + " --help");
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Catch::Contains("Usage"));
  }
  const Run help = run_gpusim("profiles --help");
  for (const char* sub : {"list", "show", "validate", "--dir"}) CHECK_THAT(help.out, Catch::Contains(sub));
  const Run none = run_gpusim("profiles");
  CHECK(none.rc != 0);
}

TEST_CASE("profiles validate reports each file and exits 1 on a broken one", "[profiles][cli]") {
  const std::string dir = fixture_dir();
  const std::string good = write_profile(dir, "fixture-gpu", kBase);
  const std::string bad = write_profile(dir, "broken-gpu",
                                        replace(replace(kBase, "name: fixture-gpu", "name: broken-gpu"),
                                                "bandwidth_gbps: 360", "bandwidth_gbps: -3"));
  const Run r = run_gpusim("profiles validate " + good + " " + bad);
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("ok   " + good + "\n"));
  CHECK_THAT(r.out, Catch::Contains("FAIL " + bad + ": " + bad +
                                    ": memory.dram.bandwidth_gbps: -3 is negative; expected 1 to 100000\n"));
  CHECK_THAT(r.out, Catch::Contains("2 profiles: 1 valid, 1 invalid"));
  // Figures past what hardware has are unit slips, refused with the range (a DRAM bandwidth of
  // 1e-30 GB/s was taken, and priced a kernel at 1e35 us).
  const std::string tiny = write_profile(dir, "tiny-gpu",
                                         replace(replace(kBase, "name: fixture-gpu", "name: tiny-gpu"),
                                                 "bandwidth_gbps: 360", "bandwidth_gbps: 1e-30"));
  const Run t = run_gpusim("profiles validate " + tiny);
  CHECK(t.rc == 1);
  CHECK_THAT(t.out, Catch::Contains("memory.dram.bandwidth_gbps: 1e-30 is out of range; expected 1 to 100000"));

  const Run ok = run_gpusim("profiles --dir " + dir + " validate fixture-gpu");
  INFO(ok.out);
  CHECK(ok.rc == 0);
  CHECK_THAT(ok.out, Catch::Contains("ok   fixture-gpu"));
  CHECK_THAT(ok.out, Catch::Contains("1 profiles: 1 valid, 0 invalid"));

  // A path the YAML reader cannot read is reported, not fatal.
  const Run directory = run_gpusim("profiles validate " + dir);
  INFO(directory.out);
  CHECK(directory.rc == 1);
  CHECK_THAT(directory.out, Catch::Contains("FAIL " + dir + ": "));
  CHECK_THAT(directory.out, Catch::Contains("1 profiles: 0 valid, 1 invalid"));

  const Run unknown = run_gpusim("profiles --dir " + dir + " validate no-such-gpu");
  CHECK(unknown.rc == 1);
  CHECK_THAT(unknown.out, Catch::Contains("FAIL no-such-gpu: no GPU profile named \"no-such-gpu\""));
}

TEST_CASE("profiles show prints a fixture profile", "[profiles][cli]") {
  const std::string dir = fixture_dir();
  const std::string path = write_profile(dir, "fixture-gpu", kBase);
  write_profile(dir, "tuned-gpu",
                "name: tuned-gpu\nextends: fixture-gpu\nefficiency: {l2_bandwidth: 0.7}\n"
                "calibrated:\n  device: test card\n  efficiency:\n    dram_bandwidth: {value: 0.83, p50: 299, p95: 300, "
                "unit: gbps, repeats: 50}\n");

  const Run r = run_gpusim("profiles show " + path);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("fixture-gpu"));
  CHECK_THAT(r.out, Catch::Contains("Fixture GPU"));
  CHECK_THAT(r.out, Catch::Contains("(default)"));
  CHECK_THAT(r.out, Catch::Contains("fp16 accumulate fp32"));
  CHECK_THAT(r.out, Catch::Contains("L2 bandwidth = 3 x DRAM bandwidth"));
  CHECK_THAT(r.out, Catch::Contains("PCIe gen 4 x16"));
  CHECK_THAT(r.out, Catch::Contains("base clock"));
  CHECK_THAT(r.out, Catch::Contains("(not given: derived by the simulator)"));
  CHECK_THAT(r.out, Catch::Contains("31.5"));

  const Run t = run_gpusim("profiles --dir " + dir + " show tuned-gpu");
  INFO(t.out);
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Catch::Contains("tuned-gpu -> fixture-gpu"));
  CHECK_THAT(t.out, Catch::Contains("(calibrated)"));
  CHECK_THAT(t.out, Catch::Contains("(profile)"));
  CHECK_THAT(t.out, Catch::Contains("test card"));

  const Run j = run_gpusim("profiles show tuned-gpu --json --dir " + dir);
  INFO(j.out);
  REQUIRE(j.rc == 0);
  const auto js = nlohmann::json::parse(j.out);
  CHECK(js["name"] == "tuned-gpu");
  CHECK(js["extends_chain"] == nlohmann::json::array({"fixture-gpu"}));
  CHECK(js["compute"]["units"] == 28);
  CHECK(js["compute"]["base_clock_mhz"] == 0.0);
  CHECK(js["compute"]["sustained_clock_mhz"] == 0.0);
  CHECK(js["memory"]["dram"]["bandwidth_gbps"] == 360.0);
  CHECK(js["host_link"]["bandwidth_gbps"].get<double>() == Approx(31.5).epsilon(0.01));
  CHECK(js["efficiency"]["dram_bandwidth"].get<double>() == Approx(0.83));
  CHECK(js["efficiency_origin"]["dram_bandwidth"] == "calibrated");
  CHECK(js["efficiency_origin"]["l2_bandwidth"] == "profile");
  CHECK(js["efficiency_origin"]["vector_flops"] == "default");
  CHECK(js["calibrated"]["figures"]["efficiency.dram_bandwidth"]["repeats"] == 50);
  CHECK(js["sources"]["compute"] == "fixture");
  CHECK(js["assumptions"].size() > 0);
  CHECK(js["compute"]["matrix_tflops"].size() == 2);

  const Run missing = run_gpusim("profiles --dir " + dir + " show no-such-gpu");
  CHECK(missing.rc == 1);
  CHECK_THAT(missing.out, Catch::Contains("gpusim profiles: no GPU profile named \"no-such-gpu\""));
  const Run bad_dir = run_gpusim("profiles --dir " + dir + "/nowhere show fixture-gpu");
  CHECK(bad_dir.rc == 2);
  CHECK_THAT(bad_dir.out, Catch::Contains("gpusim profiles: --dir " + dir + "/nowhere: not a directory"));
}

TEST_CASE("profiles list marks invalid profiles and exits 1", "[profiles][cli]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "fixture-gpu", kBase);
  write_profile(dir, "fixture-broken", replace(replace(kBase, "name: fixture-gpu", "name: fixture-broken"),
                                               "  units: 28\n", "  units: 5000\n"));
  const Run r = run_gpusim("profiles --dir " + dir + " list");
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("INVALID"));
  CHECK_THAT(r.out, Catch::Contains("compute.units: 5000 is out of range; expected 1 to 1024"));
  CHECK_THAT(r.out, Catch::Contains("fixture-gpu"));

  const Run j = run_gpusim("profiles --dir " + dir + " list --json");
  INFO(j.out);
  CHECK(j.rc == 1);
  const auto js = nlohmann::json::parse(j.out);
  bool saw_good = false, saw_bad = false;
  for (const auto& e : js["profiles"]) {
    if (e["name"] == "fixture-gpu") {
      saw_good = true;
      CHECK(e["valid"] == true);
      CHECK(e["vendor"] == "nvidia");
      CHECK(e["display_name"] == "Fixture GPU");
      CHECK(e["units"] == 28);
      CHECK(e["boost_clock_mhz"] == 1777.0);
      CHECK(e["fp32_tflops"].get<double>() == Approx(12.74));
      CHECK(e["fp16_matrix_tflops"].get<double>() == Approx(51.0));
      CHECK(e["dram_gb"] == 12.0);
      CHECK(e["dram_bandwidth_gbps"] == 360.0);
      CHECK_FALSE(e.contains("error"));
    } else if (e["name"] == "fixture-broken") {
      saw_bad = true;
      CHECK(e["valid"] == false);
      CHECK_THAT(e["error"].get<std::string>(), Catch::Contains("compute.units: 5000 is out of range"));
    }
  }
  CHECK(saw_good);
  CHECK(saw_bad);
}

// Regression tests for loader bugs found in review: each once crashed or loaded garbage.
TEST_CASE("a directory given as a profile is an error not a crash", "[profiles][errors]") {
  const std::string dir = fixture_dir();
  const auto p = gpusim::load_profile(dir, {dir});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == dir + ": is a directory, not a regular file; give the profile as a file");
}

TEST_CASE("whole numbers written as decimals load", "[profiles]") {
  const GpuProfile p = load_ok(replace(replace(kBase, "  units: 28\n", "  units: 28.0\n"), "lanes: 16", "lanes: 1.6e1"));
  CHECK(p.compute.units == 28);
  CHECK(p.host_link.lanes == 16);
}

TEST_CASE("NaN and infinity are not numbers", "[profiles][errors]") {
  check_error("bandwidth_gbps: 360", "bandwidth_gbps: .nan",
              "memory.dram.bandwidth_gbps: \".nan\" is not a number; expected 1 to 100000");
  check_error("bandwidth_gbps: 360", "bandwidth_gbps: .inf",
              "memory.dram.bandwidth_gbps: \".inf\" is not a number; expected 1 to 100000");
}

TEST_CASE("malformed extends and calibrated values are errors not crashes", "[profiles][errors]") {
  std::string path;
  auto p = load_fixture(replace(kBase, "vendor: nvidia\n", "vendor: nvidia\nextends: {a: 1}\n"), &path);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == path + ": extends: is not a profile name; expected the name of the profile to inherit");
  p = load_fixture(kBase + "calibrated: {efficiency: [1, 2]}\n", &path);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == path + ": calibrated.efficiency: a list is not a mapping of figure -> {value, p50, p95, ...}");
  p = load_fixture(kBase + "calibrated: {device: [a]}\n", &path);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == path + ": calibrated.device: a list is not a string");
}

TEST_CASE("an explicit zero launch figure is kept and not assumed", "[profiles]") {
  const GpuProfile p =
      load_ok(replace(kBase, "power: {", "launch: {overhead_us: 0, latency_floor_us: 0}\npower: {") + "  launch: \"fixture\"\n");
  CHECK(p.launch.overhead_us == 0);
  CHECK(p.launch.latency_floor_us == 0);
  for (const auto& a : p.assumptions) CHECK(a.find("launch") == std::string::npos);
}

TEST_CASE("an error in a parent profile names the parent's file", "[profiles][extends][errors]") {
  const std::string dir = fixture_dir();
  const std::string parent =
      write_profile(dir, "par-gpu", replace(replace(kBase, "name: fixture-gpu", "name: par-gpu"), "  units: 28\n", "  units: 5000\n"));
  const std::string child = write_profile(dir, "kid-gpu", "name: kid-gpu\nextends: par-gpu\n");
  const auto p = gpusim::load_profile(child, {dir});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == parent + ": compute.units: 5000 is out of range; expected 1 to 1024");
}

TEST_CASE("a command line usage error exits 2", "[profiles][cli]") {
  CHECK(run_gpusim("profiles").rc == 2);
  CHECK(run_gpusim("predict").rc == 2);
}

TEST_CASE("vendor efficiency defaults apply where a profile sets none, and bad files are named",
          "[profiles][efficiency]") {
  const std::string dir = fixture_dir();
  const std::string path = write_profile(dir, "fixture-gpu", kBase);
  const std::string eff = write_file(dir, "_efficiency.yaml",
                                     "schema: gpusim.efficiency/1\n"
                                     "command: \"gpusim validate --truth T --write-efficiency F\"\n"
                                     "vendors:\n  nvidia: {dram_bandwidth: 0.7, gemm_vector_flops: 0.6}\n"
                                     "  amd: {dram_bandwidth: 0.5}\n");
  auto p = gpusim::load_profile(path, {dir});
  REQUIRE(p.ok());
  CHECK(p->efficiency.dram_bandwidth == 0.7);
  CHECK(p->efficiency.gemm_vector_flops == 0.6);
  CHECK(p->efficiency.l2_bandwidth == gpusim::Efficiency{}.l2_bandwidth);  // not in the file
  CHECK(p->sources.at("efficiency.dram_bandwidth").find(eff) != std::string::npos);
  // The file is not a profile.
  for (const auto& e : gpusim::list_profiles({dir})) CHECK(e.name != "_efficiency");

  // A profile's own figure wins over its vendor's default.
  const std::string own = write_profile(dir, "own-gpu",
                                        replace(replace(kBase, "name: fixture-gpu", "name: own-gpu"),
                                                "sources:", "efficiency: {dram_bandwidth: 0.9}\nsources:"));
  auto q = gpusim::load_profile(own, {dir});
  INFO((q ? std::string() : q.error().message));
  REQUIRE(q.ok());
  CHECK(q->efficiency.dram_bandwidth == 0.9);
  CHECK(q->efficiency.gemm_vector_flops == 0.6);

  auto error_for = [&](const std::string& text) {
    write_file(dir, "_efficiency.yaml", text);
    auto r = gpusim::load_profile(path, {dir});
    REQUIRE(!r.ok());
    return r.error().message;
  };
  CHECK(error_for("schema: gpusim.profile/1\nvendors: {}\n") ==
        eff + ": schema: expected \"gpusim.efficiency/1\"");
  CHECK(error_for("schema: gpusim.efficiency/1\nvendors:\n  nvidia: {dram_bandwidth: 1.5}\n") ==
        eff + ": vendors.nvidia.dram_bandwidth: 1.5 is out of range; an efficiency is a fraction of the peak in (0, 1]");
  CHECK(error_for("schema: gpusim.efficiency/1\nvendors:\n  nvidia: {dram_bw: 0.5}\n") ==
        eff + ": vendors.nvidia.dram_bw: unknown figure; allowed: dram_bandwidth, l2_bandwidth, vector_flops, "
              "gemm_vector_flops, matrix_flops, grouped_conv, host_link, launch, own_round_trip, own_value_ns, own_block_us, "
              "own_simt_flops, own_matrix_flops");
  CHECK(error_for("schema: gpusim.efficiency/1\nvendors:\n  nvidia: {dram_bandwidth: fast}\n") ==
        eff + ": vendors.nvidia.dram_bandwidth: \"fast\" is not a number");
  CHECK(error_for("schema: gpusim.efficiency/1\n") ==
        eff + ": vendors: missing or not a map of vendor -> efficiency figures");
  CHECK(error_for("schema: [gpusim.efficiency/1\n").find(eff + ": not valid YAML") == 0);
  CHECK(error_for("schema: gpusim.efficiency/1\nvendors: {}\nmeasured:\n  Ada: {dram_bandwidth: 0.9}\n") ==
        eff + ": measured.Ada.source: missing: a measured figure names the benchmark and the GPU it was measured on");
}

TEST_CASE("architecture figures win over the vendor's: fitted ones over measured ones", "[profiles][efficiency]") {
  const std::string dir = fixture_dir();
  // The fixture's architecture made an Ampere's.
  const std::string path =
      write_profile(dir, "fixture-gpu", replace(kBase, "architecture: Test architecture", "architecture: Ampere GA102 (CC 8.6)"));
  write_file(dir, "_efficiency.yaml",
             "schema: gpusim.efficiency/1\nvendors:\n  nvidia: {dram_bandwidth: 0.7}\n"
             "measured:\n  Ampere: {dram_bandwidth: 0.8, source: \"a stream benchmark on a GA102\"}\n");
  auto p = gpusim::load_profile(path, {dir});
  REQUIRE(p.ok());
  CHECK(gpusim::architecture_family(*p) == "Ampere");
  CHECK(p->efficiency.dram_bandwidth == 0.8);
  CHECK(p->sources.at("efficiency.dram_bandwidth").find("a stream benchmark on a GA102") != std::string::npos);
  write_file(dir, "_efficiency.yaml",
             "schema: gpusim.efficiency/1\nvendors:\n  nvidia: {dram_bandwidth: 0.7}\n"
             "architectures:\n  Ampere: {dram_bandwidth: 0.88}\n"
             "measured:\n  Ampere: {dram_bandwidth: 0.8, source: \"a stream benchmark\"}\n");
  auto q = gpusim::load_profile(path, {dir});
  REQUIRE(q.ok());
  CHECK(q->efficiency.dram_bandwidth == 0.88);
  CHECK(q->sources.at("efficiency.dram_bandwidth").find("fitted for Ampere GPUs") != std::string::npos);
}

TEST_CASE("GPU names resolve in any case, by display name and by unambiguous short forms", "[profiles]") {
  const std::vector<std::string> dirs = gpusim::default_profile_dirs();
  for (const char* name : {"nvidia-rtx-3060", "NVIDIA-RTX-3060", "nvidia_rtx_3060", "RTX 3060", "3060",
                           "NVIDIA GeForce RTX 3060 12GB", "rtx-3060"}) {
    INFO(name);
    const auto p = gpusim::find_profile(name, dirs);
    REQUIRE(p.ok());
    CHECK(p->name == "nvidia-rtx-3060");
  }
  const auto sxm = gpusim::find_profile("h100-sxm", dirs);
  REQUIRE(sxm.ok());
  CHECK(sxm->name == "nvidia-h100-sxm");
  const auto t4 = gpusim::find_profile("T4", dirs);
  REQUIRE(t4.ok());
  CHECK(t4->name == "nvidia-t4");
  // The id without its vendor word beats a longer id that contains it.
  const auto v100 = gpusim::find_profile("V100", dirs);
  REQUIRE(v100.ok());
  CHECK(v100->name == "nvidia-v100");
}

TEST_CASE("an ambiguous GPU name lists what it matches and a misspelt one the closest ids", "[profiles][errors]") {
  const std::vector<std::string> dirs = gpusim::default_profile_dirs();
  const auto h100 = gpusim::find_profile("h100", dirs);
  REQUIRE_FALSE(h100.ok());
  CHECK(h100.error().code == gpusim::ErrorCode::kNotFound);
  CHECK_THAT(h100.error().message, Catch::Contains("no GPU profile named \"h100\", and it matches 3 profiles: "
                                                   "nvidia-h100-nvl, nvidia-h100-pcie, nvidia-h100-sxm; name one of them"));
  const auto typo = gpusim::find_profile("nvidia-rtx-3600", dirs);
  REQUIRE_FALSE(typo.ok());
  CHECK_THAT(typo.error().message, Catch::Contains("no GPU profile named \"nvidia-rtx-3600\"; closest: nvidia-rtx-3060"));
  CHECK_THAT(typo.error().message, Catch::Contains("`gpusim profiles list` shows all"));
}

TEST_CASE("a profile's problems are all reported at once", "[profiles][errors]") {
  // Three independent mistakes: each named, in document order, one a line.
  std::string text = replace(kBase, "  units: 28\n", "  units: -4\n");
  text = replace(text, "  warp_size: 32\n", "  warp_size: 48\n");
  text = replace(text, "power: {tdp_w: 170, idle_w: 15}\n", "power: {tdp_w: 170, idle_w: 15, peak_w: 300}\n");
  std::string path;
  const auto p = load_fixture(text, &path);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message ==
        path + ": compute.units: -4 is negative; expected 1 to 1024\n" + path +
            ": compute.warp_size: \"48\" is not one of 8, 16, 32, 64\n" + path +
            ": power.peak_w: unknown key; allowed here: tdp_w, idle_w");
  // A value the schema refused is not reported again by the checks that read it.
  std::string clocks = replace(kBase, "  boost_clock_mhz: 1777\n", "  boost_clock_mhz: 1777\n  base_clock_mhz: 9000\n");
  const auto c = load_fixture(clocks, &path);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message == path + ": compute.base_clock_mhz: 9000 is out of range; expected 100 to 5000");
}

TEST_CASE("extends with other units or clock rescales the inherited peaks", "[profiles][extends]") {
  const std::string dir = fixture_dir();
  write_profile(dir, "base-gpu", replace(kBase, "name: fixture-gpu", "name: base-gpu"));
  // A cut-down part: 14 of 28 units at the same clock, no peaks of its own: half the base's.
  const std::string cut = write_profile(dir, "cut-gpu", "name: cut-gpu\nextends: base-gpu\ncompute:\n  units: 14\n"
                                                         "sources:\n  compute.units: \"fixture\"\n");
  const auto c = gpusim::load_profile(cut, {dir});
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->vector_tflops(Precision::kFp32) == Approx(6.37));
  CHECK(c->compute.matrix_tflops.at(0).tflops == Approx(12.75));
  CHECK(c->compute.matrix_tflops.at(1).tflops == Approx(25.5));
  CHECK_THAT(c->sources.at("compute.vector_tflops.fp32"),
             Catch::Contains("base-gpu's figure scaled by units x boost clock, (14 x 1777 MHz) / (28 x 1777 MHz) = 0.5"));
  bool noted = false;
  for (const auto& a : c->assumptions) noted = noted || a.find("rescaled from base-gpu") != std::string::npos;
  CHECK(noted);
  // A faster clock with its own fp32 figure: that one is kept, the rest scale.
  const std::string fast =
      write_profile(dir, "fast-gpu", "name: fast-gpu\nextends: base-gpu\ncompute:\n  boost_clock_mhz: 2132.4\n"
                                     "  vector_tflops: {fp32: 15.0}\nsources:\n  compute.boost_clock_mhz: \"fixture\"\n"
                                     "  compute.vector_tflops.fp32: \"fixture\"\n");
  const auto f = gpusim::load_profile(fast, {dir});
  INFO((f ? std::string() : f.error().message));
  REQUIRE(f.ok());
  CHECK(f->vector_tflops(Precision::kFp32) == Approx(15.0));
  CHECK(f->vector_tflops(Precision::kFp16) == Approx(12.74 * 1.2).epsilon(1e-3));
  CHECK(f->compute.matrix_tflops.at(0).tflops == Approx(25.5 * 1.2).epsilon(1e-3));
  // The same units and clock: inherited unchanged, nothing noted.
  const std::string same = write_profile(dir, "same-gpu", "name: same-gpu\nextends: base-gpu\npower: {tdp_w: 150}\n");
  const auto s = gpusim::load_profile(same, {dir});
  REQUIRE(s.ok());
  CHECK(s->vector_tflops(Precision::kFp32) == Approx(12.74));
  for (const auto& a : s->assumptions) CHECK(a.find("rescaled") == std::string::npos);
}

TEST_CASE("an unreadable folder on the profile search path is skipped with a warning", "[profiles][cli][errors]") {
  namespace fs = std::filesystem;
  const fs::path d = fs::path(gpusim::test::temp_dir()) / "profile_dir_loop";
  fs::remove_all(d);
  fs::create_directories(d);
  fs::create_symlink(d / "loop", d / "loop");  // stat() of loop/x: ELOOP, as an unreadable folder errs
  const std::string bad = (d / "loop" / "x").string();
  std::vector<std::string> warnings;
  const auto found = gpusim::list_profiles({bad, gpusim::test::source_dir() + "/gpu_profiles"}, &warnings);
  CHECK_FALSE(found.empty());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::StartsWith("profile folder " + bad + ": cannot be read (") &&
                              Catch::EndsWith("); skipped"));
  const Run r = run_gpusim("predict " + gpusim::test::source_dir() + "/models/mobilenet_v2.onnx --gpu nvidia-t4 --profiles " + bad);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("warning: profile folder " + bad + ": cannot be read ("));
  CHECK_THAT(r.out, Catch::Contains("Tesla T4"));
  const Run list = run_gpusim("profiles list --dir " + d.string());
  CHECK(list.rc == 0);
}

TEST_CASE("profiles show gives the fitted GEMM efficiency and marks fitted figures, with no zero statistics",
          "[profiles][cli]") {
  const Run r = run_gpusim("profiles show " + gpusim::test::source_dir() + "/gpu_profiles/calibrated/lavapipe-epyc-2c.yaml");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("gemm_vector_flops") && Catch::Contains("(calibrated)"));
  CHECK_THAT(r.out, Catch::Contains("efficiency.gemm_vector_flops") && Catch::Contains("(fitted)"));
  CHECK_THAT(r.out, !Catch::Contains("p50 0,") && !Catch::Contains("p95 0"));
}

namespace {
// Every figure a profile file sets, compared as the writer sees them (its own full document).
void check_same_figures(const GpuProfile& a, const GpuProfile& b) {
  CHECK(a.compute.units == b.compute.units);
  CHECK(a.compute.boost_clock_mhz == b.compute.boost_clock_mhz);
  CHECK(a.compute.sustained_clock_mhz == b.compute.sustained_clock_mhz);
  CHECK(a.compute.vector_tflops == b.compute.vector_tflops);
  CHECK(a.compute.matrix_tflops.size() == b.compute.matrix_tflops.size());
  CHECK(a.memory.dram.bandwidth_gbps == b.memory.dram.bandwidth_gbps);
  CHECK(a.memory.l2.size_mb == b.memory.l2.size_mb);
  CHECK(a.launch.overhead_us == b.launch.overhead_us);
  CHECK(a.efficiency.dram_bandwidth == b.efficiency.dram_bandwidth);
  CHECK(a.power.tdp_w == b.power.tdp_w);
  CHECK(a.calibrated.has_value() == b.calibrated.has_value());
  CHECK(gpusim::profile_to_yaml(a, nullptr) == gpusim::profile_to_yaml(b, nullptr));
}
}  // namespace

TEST_CASE("the profile writer beside the reader: every shipped profile reads back as written", "[profiles][writer]") {
  const auto dirs = gpusim::default_profile_dirs();
  int n = 0, extended = 0;
  for (const auto& e : gpusim::list_profiles(dirs)) {
    auto p = gpusim::load_profile(e.path, dirs);
    REQUIRE(p);
    INFO(e.path);
    // Whole: every figure it has, sources too.
    const std::string whole = gpusim::profile_to_yaml(*p, nullptr, "round trip");
    CHECK(whole.rfind("# round trip\nschema: gpusim.profile/1\n", 0) == 0);
    auto back = gpusim::load_profile_yaml(whole, p->name + ".yaml", dirs);
    REQUIRE(back);
    check_same_figures(*p, *back);
    ++n;
    // Against its parent: only what differs, and it reads back the same.
    if (p->extends_chain.empty()) continue;
    auto parent = gpusim::find_profile(p->extends_chain.front(), dirs);
    REQUIRE(parent);
    const std::string diff = gpusim::profile_to_yaml(*p, &*parent);
    CHECK(diff.find("extends: " + parent->name) != std::string::npos);
    CHECK(diff.size() < whole.size());
    auto child = gpusim::load_profile_yaml(diff, p->name + ".yaml", dirs);
    REQUIRE(child);
    check_same_figures(*p, *child);
    ++extended;
  }
  CHECK(n >= 30);
  CHECK(extended >= 3);
}

TEST_CASE("the vendor efficiency writer beside its reader: the shipped file reads back as written", "[profiles][writer]") {
  const auto dirs = gpusim::default_profile_dirs();
  auto e = gpusim::load_vendor_efficiency(dirs);
  REQUIRE(e);
  REQUIRE_FALSE(e->path.empty());
  const std::string text = gpusim::efficiency_yaml_with_measured_of(
      e->path, gpusim::vendor_efficiency_to_yaml(*e, "test GPUs", "a \"quoted\" how: with a colon"));
  const std::string dir = fixture_dir() + "/efficiency_writer";
  fs::create_directories(dir);
  write_file(dir, "_efficiency.yaml", text);
  auto back = gpusim::load_vendor_efficiency({dir});
  INFO(text);
  REQUIRE(back);
  CHECK(back->command == e->command);
  CHECK(back->vendors == e->vendors);
  CHECK(back->architectures == e->architectures);
  CHECK(back->measured == e->measured);  // the hand-written section, kept as it was
  CHECK(back->measured_sources == e->measured_sources);
}
