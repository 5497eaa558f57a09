// GpuProfile: what gpusim knows about one GPU — datasheet figures (each with its source), the
// efficiency factors that turn peaks into sustained rates, and an optional `calibrated` block of
// measured figures. Loaded from gpu_profiles/<vendor>/<name>.yaml (schema gpusim.profile/1,
// documented in gpu_profiles/README.md); nothing downstream sees YAML.
//
// Usage:
//   auto p = gpusim::find_profile("nvidia-rtx-3060", gpusim::default_profile_dirs());
//   if (!p) { fmt::print(stderr, "{}\n", p.error().message); return 1; }
//   double bw = p->memory.dram.bandwidth_gbps * p->efficiency.dram_bandwidth;
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/data_dirs.h"
#include "gpusim/result.h"

namespace gpusim {

// Arithmetic precisions of compute units (tf32 and fp4 are matrix-unit formats, not tensor dtypes).
enum class Precision { kFp64, kFp32, kTf32, kFp16, kBf16, kFp8, kFp4, kInt32, kInt8, kInt4 };
GPUSIM_API std::string_view precision_name(Precision p);
GPUSIM_API std::optional<Precision> precision_from_name(std::string_view s);
// The precision a tensor dtype computes in (fp32 -> kFp32, fp16 -> kFp16, int64 -> kInt32 ...).
GPUSIM_API Precision precision_of(DType t);

struct GPUSIM_API MatrixPeak {
  Precision input = Precision::kFp16;
  Precision accumulate = Precision::kFp32;
  double tflops = 0;
};

struct GPUSIM_API ComputeSpec {
  int units = 0;  // SMs / CUs / Xe-cores / GPU cores
  double boost_clock_mhz = 0;
  // Datasheet base clock (0: not given). A card held at its power limit under sustained load runs
  // between the two; see sustained_clock_mhz.
  double base_clock_mhz = 0;
  // The clock the card holds under sustained load at its power limit (70 W cards do not hold
  // their boost clock). 0 in the YAML: derived from TDP and the base and boost clocks
  // (gpu_profiles/README.md); `gpusim calibrate` may measure it.
  double sustained_clock_mhz = 0;
  int warp_size = 32;
  int max_threads_per_unit = 0;
  int max_blocks_per_unit = 0;
  int max_threads_per_block = 0;
  int64_t registers_per_unit = 0;
  int max_registers_per_thread = 0;
  double shared_memory_per_unit_kb = 0;
  double shared_memory_per_block_kb = 0;
  double shared_memory_bandwidth_gbps = 0;  // whole device; 0 until loaded (assumed when not given)
  double barrier_ns = 0;  // one warp's time in a group barrier; 0 (not modelled) unless given or calibrated
  std::map<Precision, double> vector_tflops;
  std::vector<MatrixPeak> matrix_tflops;
  int matrix_alignment_elements = 8;
  // Where the matrix instructions run (YAML compute.matrix_units): on units of their own beside the
  // vector ALUs (NVIDIA tensor cores, AMD CDNA's MFMA, Intel XMX: "dedicated", the default), or on
  // the vector ALUs themselves (Apple's simdgroup matrices, RDNA3's WMMA: "alus"), where other vector
  // work in the main loop (unpacking quantized weights) takes the same issue slots.
  bool matrix_on_alus = false;
};

struct GPUSIM_API DramSpec {
  double size_gb = 0;
  double bandwidth_gbps = 0;
  int bus_width_bits = 0;
  std::string type;
  double latency_ns = 0;
};

struct GPUSIM_API CacheSpec {
  bool present = false;
  double size_mb = 0;
  double bandwidth_gbps = 0;  // 0: not given (the simulator assumes; see README)
  double latency_ns = 0;
};

struct GPUSIM_API L1Spec {
  double size_per_unit_kb = 0;
  double latency_ns = 0;
};

struct GPUSIM_API MemorySpec {
  DramSpec dram;
  CacheSpec l2;
  CacheSpec infinity_cache;  // AMD Infinity Cache / Apple SLC: a last-level cache behind L2
  L1Spec l1;
};

struct GPUSIM_API HostLinkSpec {
  bool unified = false;  // unified memory: no host copies
  int generation = 0;
  int lanes = 0;
  double bandwidth_gbps = 0;  // one direction; derived from generation and lanes when not given
};

struct GPUSIM_API LaunchSpec {
  double overhead_us = -1;       // < 0 until loaded: absent figures are assumed (gpu_profiles/README.md)
  double latency_floor_us = -1;
  // Device time to start one thread block on a unit; the busiest unit pays it for every block it
  // runs. Negligible on GPUs (0 unless calibrated); large on CPU-backed devices such as lavapipe.
  double block_us = 0;
};

struct GPUSIM_API PowerSpec {
  double tdp_w = 0;
  double idle_w = 0;
};

// Achievable fraction of each peak. Defaults for uncalibrated profiles (gpu_profiles/README.md).
struct GPUSIM_API Efficiency {
  double dram_bandwidth = 0.85;
  double l2_bandwidth = 0.80;
  double vector_flops = 0.80;
  // GEMM-like kernels on the vector units (SIMT GEMM, implicit-GEMM conv without matrix units):
  // their register-tiled inner loop reaches its own fraction of the vector peak. < 0: vector_flops.
  double gemm_vector_flops = -1;
  double matrix_flops = 0.75;
  // Grouped and depthwise convolutions: the fraction of the rates (memory and compute) their
  // library kernels reach against a dense convolution's of the same shape per group.
  double grouped_conv = 1.00;
  double host_link = 0.80;
  double launch = 1.00;
  // gpusim's own GEMM-like kernels, priced by their block's dependent chain (tile.h: KernelChain;
  // core/sim/README.md, "gpusim's own kernels"): one dependent global-load round trip of a loaded
  // GPU as a multiple of the L2 hit latency (memory.l2.latency_ns), the epilogue's time per output
  // value a thread handles (ns at the boost clock), and a block's fixed time (us): its prologue,
  // first tile and last stores; and their SIMT main loop's fraction of the vector peak, and their
  // matrix-unit main loop's of the matrix peak (for one block a unit: a k-step's products run at
  // that fraction of the unit's rate times the block's share of the warps that saturate it; not
  // fitted: the H200's calibration measured gpusim's 4096^3 fp16 wmma MatMul at 0.128). Not
  // fractions of a peak but the other figures a fit sets: these defaults are fitted, in sample, on
  // the 702 GEMM-like kernels of the H200 runs of 2026-11-27 (`gpusim validate --truth
  // bench/gpu/h200-2026-11-27/truth/runs --fit`; leave-one-model-out in bench/RESULTS.md).
  double own_round_trip = 2.37;
  double own_value_ns = 75.59;
  double own_block_us = 1.33;
  double own_simt_flops = 0.376;
  double own_matrix_flops = 0.128;
};

// A measured figure from `gpusim calibrate`.
struct GPUSIM_API CalibratedFigure {
  double value = 0;
  double p50 = 0;
  double p95 = 0;
  int64_t repeats = 0;
  std::string unit;
};

struct GPUSIM_API Calibration {
  std::string device;
  std::string driver;
  std::string date;
  std::string command;  // the command line that measured it
  // The raw measurements' file beside the profile (gpusim.calibration/1), named for its content by
  // `gpusim calibrate` so that the profile, written last, commits the pair; empty in older profiles
  // (then <name>.measurements.json).
  std::string measurements;
  std::map<std::string, CalibratedFigure> figures;  // dotted key: "efficiency.dram_bandwidth", "memory.l2.size_mb"
};

struct GPUSIM_API GpuProfile {
  std::string name;
  std::string display_name;
  // The names drivers report for this card (CUDA's and nvidia-smi's "NVIDIA H200", HIP's, Vulkan's
  // deviceName), matched whole by profile_for_device; empty when the profile names none.
  std::vector<std::string> device_names;
  std::string vendor;
  std::string architecture;
  std::string source_path;
  std::vector<std::string> extends_chain;  // parents, nearest first
  // The family (gpu_profiles/families/<name>.yaml) the profile, or the nearest profile it extends,
  // takes its shared figures and its rates per clock from; empty when none.
  std::string family;
  ComputeSpec compute;
  MemorySpec memory;
  HostLinkSpec host_link;
  LaunchSpec launch;
  PowerSpec power;
  Efficiency efficiency;
  std::optional<Calibration> calibrated;
  std::map<std::string, std::string> sources;
  // Figures the simulator had to assume because the profile does not give them.
  std::vector<std::string> assumptions;

  // Peak of the matrix units for this input precision (the best accumulate at least as wide as
  // `min_accumulate`), or nullopt when the GPU has none for it.
  std::optional<double> matrix_tflops(Precision input, Precision min_accumulate) const;
  // Vector (non-matrix) peak for a precision; falls back to fp32 for precisions without a figure.
  double vector_tflops(Precision p) const;
};

// The profile for a device by the name its driver reports: one that lists the name among its
// `device_names` (case aside: "NVIDIA H200" -> nvidia-h200), else one whose display name occurs in
// it ("NVIDIA A10" in "NVIDIA A10 (driver ...)"), the longest display name winning. On a tie a
// calibrated profile beats a datasheet one, unless `datasheet_only` (calibration wants the
// datasheet profile to extend).
GPUSIM_API std::optional<GpuProfile> profile_for_device(const std::string& device_name, const std::vector<std::string>& dirs,
                                             bool datasheet_only = false);
// Every efficiency figure by its YAML key ("dram_bandwidth", ...): a profile's `efficiency` block,
// its calibrated figures and the vendor defaults file all name them so.
GPUSIM_API const std::vector<std::pair<const char*, double Efficiency::*>>& efficiency_fields();

// Loads one file (resolving `extends:` by name in `dirs`). Errors name the file, the YAML path, the
// value and the allowed range.
GPUSIM_API Result<GpuProfile> load_profile(const std::string& path, const std::vector<std::string>& dirs);
// A profile from YAML text in memory (an upload, a string in a program); `source` names it in
// messages, and when it ends in .yaml its stem must match the profile's name, as a file's does.
// `extends:` resolves by name in `dirs`.
GPUSIM_API Result<GpuProfile> load_profile_yaml(const std::string& text, const std::string& source,
                                     const std::vector<std::string>& dirs);
// The writer beside the reader: `p` as a gpusim.profile/1 document. With a `base`, the document
// extends it and holds only the figures that differ (a map or list whole where any entry
// differs) and the sources it adds or changes; without one, every figure the profile has. A
// calibrated block is written as such, and (with a base) the figures it sets are not repeated above
// it. A whole document states the figures the profile has a source for, its efficiencies and its
// calibrated figures; what the loader assumed or defaulted it assumes again.
// `comment`: lines written first, each as "# line". load_profile_yaml reads it back to `p`'s figures.
GPUSIM_API std::string profile_to_yaml(const GpuProfile& p, const GpuProfile* base, const std::string& comment = "");
// NAME (searched in dirs) or a path to a .yaml file. A NAME that is no profile's id as written
// resolves when, in any case and with spaces, '-' or '_' between words, it is one profile's id or
// display name ("NVIDIA_T4", "NVIDIA GeForce RTX 3060 12GB"), or a run of words only one profile's
// id or display name has ("3060", "RTX 3060", "h100-sxm"). Otherwise kNotFound names the profiles
// it matches (when several) or the three closest ids.
GPUSIM_API Result<GpuProfile> find_profile(const std::string& name_or_path, const std::vector<std::string>& dirs);

// Efficiency figures fitted per vendor on measured GPUs (gpusim validate --write-efficiency), the
// defaults of every profile of that vendor that does not set its own: gpu_profiles/_efficiency.yaml
// (schema gpusim.efficiency/1), the first found in the profile dirs. Without one, the built-in
// defaults of Efficiency hold.
inline constexpr const char* kVendorEfficiencyFile = "_efficiency.yaml";
struct GPUSIM_API VendorEfficiency {
  std::string path;     // "" when no file was found
  std::string command;  // the command that fitted it
  std::map<std::string, std::map<std::string, double>> vendors;  // vendor -> figure -> value
  // Figures fitted per architecture (architecture_family: "Ampere", "Pascal", "CDNA2"), which win
  // over the vendor's for profiles of that architecture: memory controllers differ by generation
  // (sustained DRAM bandwidth is 75% of the datasheet's on Pascal, 91% on Volta).
  std::map<std::string, std::map<std::string, double>> architectures;
  // Measured, not fitted: figures a published benchmark measured on a GPU of an architecture the
  // fitted data lacks (`measured:` in the file, each with its `source`). They stand for that
  // architecture below a fitted figure and above the vendor's.
  std::map<std::string, std::map<std::string, double>> measured;
  std::map<std::string, std::string> measured_sources;  // architecture -> where the figures come from
};

// The architecture's family name: the first word of the profile's `architecture` ("Ampere GA102
// (CC 8.6)" -> "Ampere", "CDNA2 (gfx90a)" -> "CDNA2"); "" when none is given.
GPUSIM_API std::string architecture_family(const GpuProfile& p);
GPUSIM_API Result<VendorEfficiency> load_vendor_efficiency(const std::vector<std::string>& dirs);
// The writer beside that reader: `e`'s fitted figures (vendors, architectures; e.command as the
// command) as a gpusim.efficiency/1 document, with `fitted_on` and `how` saying on what and how.
// Its `measured:` section is hand-written: efficiency_yaml_with_measured_of keeps it from a file.
GPUSIM_API std::string vendor_efficiency_to_yaml(const VendorEfficiency& e, const std::string& fitted_on,
                                                 const std::string& how);
GPUSIM_API std::string efficiency_yaml_with_measured_of(const std::string& path, const std::string& fitted);

// An architecture family (gpu_profiles/families/<name>.yaml, schema gpusim.family/1): what every
// chip of it shares. A profile that names it (`family: NAME`) states its datasheet numbers (units,
// clocks, memory, L2, power) and gets the rest from the family, its peaks derived as units x rate
// per clock x boost clock; a peak it states must agree with that within 2%.
struct GPUSIM_API ProfileFamily {
  std::string name;
  std::string path;
  std::string vendor;
  std::string architecture;
  std::vector<std::string> extends_chain;  // parent families, nearest first
  std::map<Precision, double> vector_per_clock;  // FLOP a unit retires per clock
  std::vector<MatrixPeak> matrix_per_clock;      // `tflops` holds FLOP per clock per unit
  std::map<std::string, std::string> sources;
};
// Family names under <dir>/families/ of each dir, sorted (a name found twice: the first dir wins).
GPUSIM_API std::vector<std::string> list_families(const std::vector<std::string>& dirs);
// One family, its parents merged; errors name the file, the key and the value.
GPUSIM_API Result<ProfileFamily> load_family(const std::string& name, const std::vector<std::string>& dirs);

// A profile from the handful of numbers a spec sheet gives, the rest from a family
// (`gpusim profiles new`). Numbers <= 0 and empty strings are left out of the document.
struct GPUSIM_API NewProfile {
  std::string name;          // the profile's id, and its file's stem
  std::string family;        // gpu_profiles/families/<family>.yaml
  std::string display_name;  // default: the name
  std::string architecture;  // default: the family's
  std::vector<std::string> device_names;
  int units = 0;
  double boost_clock_mhz = 0;
  double base_clock_mhz = 0;
  double memory_gb = 0;
  double bandwidth_gbps = 0;
  int bus_width_bits = 0;
  std::string memory_type;
  double l2_mb = 0;
  double last_level_cache_mb = 0;  // AMD Infinity Cache, Apple SLC
  double tdp_w = 0;
  double idle_w = 0;  // default: the family's fraction of TDP
  // "pcie" with generation and lanes, or "unified"; empty: the family's host link.
  std::string host_link;
  int pcie_generation = 0;
  int pcie_lanes = 0;
  std::string source;  // where the numbers come from (a URL, a datasheet); every figure given cites it
};
// The gpusim.profile/1 document for `spec`, checked by loading it (so a family unknown, a figure out
// of range or a host link missing is an error naming it), or the loader's error.
GPUSIM_API Result<std::string> new_profile_yaml(const NewProfile& spec, const std::vector<std::string>& dirs);

// Files in profile dirs whose name starts with '_' are not profiles, nor are the files of a
// `families` folder directly under a profile dir.
struct GPUSIM_API ProfileEntry {
  std::string name;
  std::string path;
};
// Every *.yaml under the dirs, sorted by name (a name found twice: the first dir wins). A folder
// that cannot be read is skipped, with a line in `warnings` naming it and why.
GPUSIM_API std::vector<ProfileEntry> list_profiles(const std::vector<std::string>& dirs, std::vector<std::string>* warnings = nullptr);
// The warnings list_profiles gives for `dirs` (the CLI prints them once per command).
GPUSIM_API std::vector<std::string> profile_dir_warnings(const std::vector<std::string>& dirs);

}  // namespace gpusim
