// gpusim profiles [--dir DIR]... list [--json] | show NAME|FILE [--json] | validate [NAME|FILE ...] [--json]
// The GPU profiles (schema gpusim.profile/1, gpu_profiles/README.md): a table of every profile, every
// figure of one (extends resolved, efficiency factors marked default / profile / calibrated), and a
// validation report. Errors go to stderr prefixed "gpusim profiles: "; exit 1 for profiles that do
// not load, 2 for bad arguments.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "gpusim/gpusim.h"
#include "hw/atomic_file.h"

namespace gpusim::cli {
namespace {

constexpr const char* kPrefix = "gpusim profiles: ";

// Figures as people read them in a table: 4 significant digits, no exponent for large values.
std::string num(double v) {
  if (v >= 1000.0) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

// Exact (shortest round-trip) form for `show`.
std::string exact(double v) { return fmt::format("{}", v); }

// The efficiency factors by key, with a pointer into a profile's Efficiency.
struct EffField {
  const char* key;
  double Efficiency::*member;
  const char* meaning;
};
constexpr EffField kEffFields[] = {
    {"dram_bandwidth", &Efficiency::dram_bandwidth, "of DRAM bandwidth"},
    {"l2_bandwidth", &Efficiency::l2_bandwidth, "of L2 bandwidth"},
    {"vector_flops", &Efficiency::vector_flops, "of vector peaks"},
    {"gemm_vector_flops", &Efficiency::gemm_vector_flops, "of vector peaks, GEMMs and convolutions off the matrix units"},
    {"matrix_flops", &Efficiency::matrix_flops, "of matrix-unit peaks"},
    {"grouped_conv", &Efficiency::grouped_conv, "of the rates, grouped and depthwise convolutions"},
    {"host_link", &Efficiency::host_link, "of host-link bandwidth"},
    {"launch", &Efficiency::launch, "multiplier on launch overhead"},
};

bool is_calibrated(const GpuProfile& p, const std::string& dotted) {
  return p.calibrated && p.calibrated->figures.count(dotted) > 0;
}

std::string host_link_text(const HostLinkSpec& h) {
  if (h.unified) return "unified memory (no host copies)";
  std::string link = "PCIe";
  if (h.generation > 0) link += fmt::format(" gen {}", h.generation);
  if (h.lanes > 0) link += fmt::format(" x{}", h.lanes);
  return link;
}

// ---- show ---------------------------------------------------------------------------------------

void row(const std::string& label, const std::string& value) { fmt::print("  {:<28} {}\n", label, value); }

std::string cache_text(const CacheSpec& c) {
  return fmt::format("{} MB, {} GB/s, {} ns", exact(c.size_mb), exact(c.bandwidth_gbps), exact(c.latency_ns));
}

void print_show(const GpuProfile& p) {
  fmt::print("{}  {}\n", p.name, p.display_name);
  fmt::print("  {:<28} {}\n", "vendor", p.vendor);
  fmt::print("  {:<28} {}\n", "architecture", p.architecture);
  fmt::print("  {:<28} {}\n", "file", p.source_path);
  fmt::print("  {:<28} {}\n", "extends",
             p.extends_chain.empty() ? std::string("(nothing)")
                                     : fmt::format("{} -> {}", p.name, fmt::join(p.extends_chain, " -> ")));
  fmt::print("  {:<28} {}\n", "family", p.family.empty() ? std::string("(none)") : p.family);

  const ComputeSpec& c = p.compute;
  fmt::print("\ncompute\n");
  row("units", fmt::format("{}", c.units));
  row("boost clock", exact(c.boost_clock_mhz) + " MHz");
  row("base clock", c.base_clock_mhz > 0 ? exact(c.base_clock_mhz) + " MHz" : std::string("(not given)"));
  row("sustained clock", c.sustained_clock_mhz > 0
                             ? exact(c.sustained_clock_mhz) + " MHz" +
                                   (is_calibrated(p, "compute.sustained_clock_mhz") ? " (calibrated)" : "")
                             : std::string("(not given: derived by the simulator)"));
  row("warp size", fmt::format("{}", c.warp_size));
  row("max threads per unit", fmt::format("{}", c.max_threads_per_unit));
  row("max blocks per unit", fmt::format("{}", c.max_blocks_per_unit));
  row("max threads per block", fmt::format("{}", c.max_threads_per_block));
  row("registers per unit", fmt::format("{}", c.registers_per_unit));
  row("max registers per thread", fmt::format("{}", c.max_registers_per_thread));
  row("shared memory per unit", exact(c.shared_memory_per_unit_kb) + " KB");
  row("shared memory per block", exact(c.shared_memory_per_block_kb) + " KB");
  for (const auto& [prec, tflops] : c.vector_tflops) {
    row(fmt::format("vector {} TFLOPS", precision_name(prec)),
        fmt::format("{} (sustained {} at {})", exact(tflops), num(tflops * p.efficiency.vector_flops),
                    exact(p.efficiency.vector_flops)));
  }
  row("matrix alignment", fmt::format("{} elements", c.matrix_alignment_elements));
  row("matrix units", c.matrix_on_alus ? "issue on the vector ALUs (alus)" : "their own (dedicated)");

  fmt::print("\nmatrix peaks\n");
  if (c.matrix_tflops.empty()) row("(none)", "no matrix units");
  for (const MatrixPeak& m : c.matrix_tflops) {
    row(fmt::format("{} accumulate {}", precision_name(m.input), precision_name(m.accumulate)),
        fmt::format("{} TFLOPS (sustained {} at {})", exact(m.tflops), num(m.tflops * p.efficiency.matrix_flops),
                    exact(p.efficiency.matrix_flops)));
  }

  const DramSpec& d = p.memory.dram;
  fmt::print("\nmemory\n");
  std::string dram = fmt::format("{} GB", exact(d.size_gb));
  if (!d.type.empty()) dram += " " + d.type;
  if (d.bus_width_bits > 0) dram += fmt::format(", {}-bit", d.bus_width_bits);
  dram += fmt::format(", {} GB/s (sustained {} at {}), {} ns", exact(d.bandwidth_gbps),
                      num(d.bandwidth_gbps * p.efficiency.dram_bandwidth), exact(p.efficiency.dram_bandwidth),
                      exact(d.latency_ns));
  row("DRAM", dram);
  row("L2", cache_text(p.memory.l2));
  if (p.memory.infinity_cache.present) row("last-level cache", cache_text(p.memory.infinity_cache));
  row("L1", fmt::format("{} KB per unit, {} ns", exact(p.memory.l1.size_per_unit_kb), exact(p.memory.l1.latency_ns)));

  fmt::print("\nhost link\n");
  row("type", host_link_text(p.host_link));
  if (!p.host_link.unified) {
    row("bandwidth", fmt::format("{} GB/s one direction (sustained {} at {})", num(p.host_link.bandwidth_gbps),
                                 num(p.host_link.bandwidth_gbps * p.efficiency.host_link),
                                 exact(p.efficiency.host_link)));
  }

  fmt::print("\nlaunch\n");
  row("overhead", fmt::format("{} us{}", exact(p.launch.overhead_us),
                              is_calibrated(p, "launch.overhead_us") ? "  (calibrated)" : ""));
  row("latency floor", fmt::format("{} us{}", exact(p.launch.latency_floor_us),
                                   is_calibrated(p, "launch.latency_floor_us") ? "  (calibrated)" : ""));

  fmt::print("\npower\n");
  row("TDP", exact(p.power.tdp_w) + " W");
  row("idle", exact(p.power.idle_w) + " W");

  fmt::print("\nefficiency\n");
  for (const EffField& f : kEffFields) {
    row(f.key, fmt::format("{:<6} ({})  {}", exact(p.efficiency.*f.member), efficiency_origin(p, f.key, p.efficiency.*f.member), f.meaning));
  }

  if (p.calibrated) {
    fmt::print("\ncalibrated\n");
    if (!p.calibrated->device.empty()) row("device", p.calibrated->device);
    if (!p.calibrated->date.empty()) row("date", p.calibrated->date);
    for (const auto& [key, f] : p.calibrated->figures) {
      // A measured figure has its statistics; a fitted one (the least-squares fit over the
      // microbenchmarks) has none to show.
      const bool measured = f.repeats > 0 || f.p50 != 0 || f.p95 != 0;
      row(key, measured ? fmt::format("{} (p50 {}, p95 {}{}{})", exact(f.value), exact(f.p50), exact(f.p95),
                                      f.unit.empty() ? "" : " " + f.unit,
                                      f.repeats > 0 ? fmt::format(", {} repeats", f.repeats) : "")
                        : fmt::format("{}{} (fitted)", exact(f.value), f.unit.empty() || f.unit == "fraction" ? "" : " " + f.unit));
    }
  }

  fmt::print("\nsources\n");
  size_t w = 0;
  for (const auto& [path, source] : p.sources) w = std::max(w, path.size());
  for (const auto& [path, source] : p.sources) fmt::print("  {:<{}}  {}\n", path, w, source);

  fmt::print("\nassumptions\n");
  if (p.assumptions.empty()) fmt::print("  (none)\n");
  for (const std::string& a : p.assumptions) fmt::print("  - {}\n", a);
}

// ---- list ---------------------------------------------------------------------------------------

using Loaded = std::pair<ProfileEntry, Result<GpuProfile>>;

void print_list(const std::vector<Loaded>& all) {
  size_t w = 4;
  for (const auto& [entry, profile] : all) w = std::max(w, entry.name.size());
  fmt::print("{:<{}}  {:<7} {:>5} {:>10} {:>11} {:>12} {:>8} {:>8}\n", "name", w, "vendor", "units", "boost MHz",
             "FP32 TFLOPS", "FP16 mat TF", "DRAM GB", "GB/s");
  for (const auto& [entry, profile] : all) {
    if (!profile) {
      fmt::print("{:<{}}  INVALID  {}\n", entry.name, w, say(profile.error()));
      continue;
    }
    const GpuProfile& p = *profile;
    const auto m = best_fp16_matrix_tflops(p);
    fmt::print("{:<{}}  {:<7} {:>5} {:>10} {:>11} {:>12} {:>8} {:>8}\n", p.name, w, p.vendor, p.compute.units,
               num(p.compute.boost_clock_mhz), num(p.vector_tflops(Precision::kFp32)), m ? num(*m) : "-",
               num(p.memory.dram.size_gb), num(p.memory.dram.bandwidth_gbps));
  }
}

}  // namespace

void add_profiles(CLI::App& app, int& rc) {
  struct Args {
    std::vector<std::string> dirs;
    bool list_json = false;
    std::string show_name;
    bool show_json = false;
    std::vector<std::string> validate_names;
    bool validate_json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("profiles", "List, show and validate GPU profiles (gpu_profiles/, schema "
                                             "gpusim.profile/1)");
  cmd->require_subcommand(1);
  cmd->fallthrough();  // --dir may also follow the subcommand
  cmd->add_option("--dir", args->dirs,
                  "Also search this directory for *.yaml profiles, before $GPUSIM_PROFILE_PATH and gpu_profiles/ "
                  "(repeatable)");

  // The session searching --dir first, or nullopt (after reporting) when a --dir is not a directory.
  auto dirs = [args, &rc]() -> std::optional<Session> {
    for (const std::string& d : args->dirs) {
      if (!std::filesystem::is_directory(d)) {
        fmt::print(stderr, "{}--dir {}: not a directory\n", kPrefix, d);
        rc = 2;
        return std::nullopt;
      }
    }
    Session s({args->dirs, {}});
    warn_profile_dirs(s.profile_dirs());
    return s;
  };

  auto* list = cmd->add_subcommand("list", "Table of every profile: units, clock, FP32 and FP16 matrix TFLOPS, DRAM "
                                           "size and bandwidth; profiles that do not load are marked INVALID");
  list->add_flag("--json", args->list_json,
                 "Print JSON: {\"profiles\": [{name, path, vendor, display_name, units, boost_clock_mhz, fp32_tflops, "
                 "fp16_matrix_tflops, dram_gb, dram_bandwidth_gbps, valid, error?}]}");
  list->callback([args, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    const std::vector<Loaded> all = d->profiles();
    if (all.empty()) {
      fmt::print(stderr, "{}no profiles found (searched {})\n", kPrefix, fmt::join(d->profile_dirs(), ", "));
      rc = 1;
      return;
    }
    if (args->list_json) {
      fmt::print("{}\n", profile_list_document(all));
    } else {
      print_list(all);
    }
    const bool any_invalid = std::any_of(all.begin(), all.end(), [](const Loaded& l) { return !l.second.ok(); });
    rc = any_invalid ? 1 : 0;
  });

  auto* show = cmd->add_subcommand("show", "Every figure of one profile (extends resolved), its efficiency factors "
                                           "(default, profile or calibrated), sources and assumptions");
  show->add_option("profile", args->show_name, "A profile name (see `gpusim profiles list`) or a .yaml file")
      ->required();
  show->add_flag("--json", args->show_json, "Print all of it as JSON");
  show->callback([args, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    auto p = d->gpu(args->show_name);
    if (!p) {
      fmt::print(stderr, "{}{}\n", kPrefix, say(p.error()));
      rc = 1;
      return;
    }
    if (args->show_json) {
      fmt::print("{}\n", profile_document(*p));
    } else {
      print_show(*p);
    }
    rc = 0;
  });

  auto* families = cmd->add_subcommand("families", "The architecture families (gpu_profiles/families/): what a unit "
                                                   "retires per clock in each precision, for `profiles new --like`");
  families->callback([dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    const std::vector<std::string> names = list_families(d->profile_dirs());
    if (names.empty()) {
      fmt::print(stderr, "{}no families found (searched families/ in {})\n", kPrefix, fmt::join(d->profile_dirs(), ", "));
      rc = 1;
      return;
    }
    rc = 0;
    for (const std::string& n : names) {
      auto f = load_family(n, d->profile_dirs());
      if (!f) {
        fmt::print("{:<26} INVALID  {}\n", n, say(f.error()));
        rc = 1;
        continue;
      }
      std::vector<std::string> vec, mat;
      for (const auto& [prec, rate] : f->vector_per_clock) vec.push_back(fmt::format("{} {}", precision_name(prec), rate));
      for (const MatrixPeak& m : f->matrix_per_clock) {
        mat.push_back(fmt::format("{}/{} {}", precision_name(m.input), precision_name(m.accumulate), m.tflops));
      }
      fmt::print("{:<26} {:<7} {}\n", n, f->vendor, f->architecture);
      fmt::print("{:<26} vector FLOP/clock/unit: {}\n", "", fmt::join(vec, ", "));
      if (!mat.empty()) fmt::print("{:<26} matrix FLOP/clock/unit: {}\n", "", fmt::join(mat, ", "));
    }
  });

  auto* hosts = cmd->add_subcommand("hosts", "The host profiles (runtimes/hosts/) `--host` names, and the host model "
                                             "that scales a framework runtime's per-call host time to each");
  hosts->callback([&rc] {
    const std::vector<std::string> hdirs = default_host_dirs();
    auto model = load_host_model(hdirs);
    if (!model) {
      fmt::print(stderr, "{}{}\n", kPrefix, say(model.error()));
      rc = 1;
      return;
    }
    rc = 0;
    fmt::print("host model  {}\n", model->source_path);
    fmt::print("  per-call host time = the runtime's figure x ({:.0f} / single-thread score)^{:.2f} x driver factor\n",
               model->reference_single_thread, model->cpu_exponent);
    std::vector<std::string> drivers;
    for (const auto& [d, f] : model->driver_factor) drivers.push_back(fmt::format("{} {:.2f}", d, f));
    fmt::print("  driver factors: {}\n  default host: {}\n\n", fmt::join(drivers, ", "), model->default_host);
    fmt::print("{:<22} {:<8} {:<7} {:>6} {:>7}  {}\n", "host", "os", "driver", "ST", "factor", "cpu");
    for (const std::string& n : list_hosts(hdirs)) {
      auto h = find_host(n, hdirs);
      if (!h) {
        fmt::print("{:<22} INVALID  {}\n", n, say(h.error()));
        rc = 1;
        continue;
      }
      fmt::print("{:<22} {:<8} {:<7} {:>6} {:>7.2f}  {}\n", n, h->os, h->driver_model,
                 h->single_thread > 0 ? fmt::format("{:.0f}", h->single_thread) : std::string("-"),
                 host_factor(*h, *model), h->cpu.empty() ? "(not named)" : h->cpu);
    }
  });

  struct NewArgs {
    NewProfile spec;
    std::string like, pcie, out;
    bool unified = false, force = false;
  };
  auto na = std::make_shared<NewArgs>();
  auto* make = cmd->add_subcommand(
      "new", "Write a profile from a spec sheet's numbers, the rest from an architecture family: peaks = units x rate "
             "per clock x boost clock (`profiles families` lists the families)");
  make->add_option("name", na->spec.name, "The profile's name (lower case, words joined by '-': nvidia-rtx-4080)")->required();
  make->add_option("--like", na->like, "A family (nvidia-ada-geforce), or a profile whose family to use")->required();
  make->add_option("--units", na->spec.units, "SMs / CUs / Xe-cores / GPU cores")->required();
  make->add_option("--boost-mhz", na->spec.boost_clock_mhz, "Boost clock, MHz (the clock peaks are quoted at)")->required();
  make->add_option("--base-mhz", na->spec.base_clock_mhz, "Base clock, MHz");
  make->add_option("--memory-gb", na->spec.memory_gb, "Device memory, GB")->required();
  make->add_option("--bandwidth-gbps", na->spec.bandwidth_gbps, "Memory bandwidth, GB/s")->required();
  make->add_option("--bus-bits", na->spec.bus_width_bits, "Memory bus width, bits");
  make->add_option("--memory-type", na->spec.memory_type, "GDDR6X, HBM3, LPDDR5 ...");
  make->add_option("--l2-mb", na->spec.l2_mb, "L2 cache, MB")->required();
  make->add_option("--last-level-cache-mb", na->spec.last_level_cache_mb, "AMD Infinity Cache or Apple SLC, MB");
  make->add_option("--tdp-w", na->spec.tdp_w, "Board power, W")->required();
  make->add_option("--idle-w", na->spec.idle_w, "Idle board power, W (default: the family's fraction of TDP)");
  make->add_option("--pcie", na->pcie, "PCIe link as GENxLANES: 4x16 (default: the family's host link)");
  make->add_flag("--unified", na->unified, "Unified memory with the host (an SoC): no host copies");
  make->add_option("--display-name", na->spec.display_name, "The card's full name");
  make->add_option("--architecture", na->spec.architecture, "Chip and architecture (default: the family's)");
  make->add_option("--device-name", na->spec.device_names, "A name drivers report for the card (repeatable)");
  make->add_option("--source", na->spec.source, "Where the numbers come from: a URL or a datasheet");
  make->add_option("-o,--out", na->out, "File to write (default: NAME.yaml here)");
  make->add_flag("--force", na->force, "Overwrite the file if it exists");
  make->callback([na, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    NewProfile spec = na->spec;
    const std::vector<std::string>& search = d->profile_dirs();
    // --like: a family, else a profile's family.
    const std::vector<std::string> fams = list_families(search);
    if (std::find(fams.begin(), fams.end(), na->like) != fams.end()) {
      spec.family = na->like;
    } else if (auto p = d->gpu(na->like); p && !p->family.empty()) {
      spec.family = p->family;
    } else {
      fmt::print(stderr, "{}--like {}: {}; families: {}\n", kPrefix, na->like,
                 p ? fmt::format("profile {} names no family", p->name) : std::string("no family or profile of that name"),
                 fmt::join(fams, ", "));
      rc = 2;
      return;
    }
    if (na->unified && !na->pcie.empty()) {
      fmt::print(stderr, "{}--unified and --pcie {}: give one of them\n", kPrefix, na->pcie);
      rc = 2;
      return;
    }
    if (na->unified) spec.host_link = "unified";
    if (!na->pcie.empty()) {
      int gen = 0, lanes = 0;
      char x = 0, extra = 0;
      if (std::sscanf(na->pcie.c_str(), "%d%c%d%c", &gen, &x, &lanes, &extra) != 3 || (x != 'x' && x != 'X')) {
        fmt::print(stderr, "{}--pcie {}: expected GENxLANES, such as 4x16 (PCIe 4.0, 16 lanes)\n", kPrefix, na->pcie);
        rc = 2;
        return;
      }
      spec.host_link = "pcie";
      spec.pcie_generation = gen;
      spec.pcie_lanes = lanes;
    }
    if (spec.source.empty()) {
      spec.source = "stated to `gpusim profiles new` without a source (give --source with the datasheet or URL)";
    }
    auto text = new_profile_yaml(spec, search);
    if (!text) {
      const std::string why = say(text.error());
      fmt::print(stderr, "{}{}{}\n", kPrefix, why,
                 why.find("host_link: missing") != std::string::npos
                     ? fmt::format("\n{}family {} has no host link: give --pcie GENxLANES or --unified", kPrefix, spec.family)
                     : std::string());
      rc = 1;
      return;
    }
    const std::string path = na->out.empty() ? spec.name + ".yaml" : na->out;
    if (std::filesystem::path(path).stem() != spec.name) {
      fmt::print(stderr, "{}--out {}: a profile's file is named for it; write {}.yaml\n", kPrefix, path, spec.name);
      rc = 2;
      return;
    }
    std::error_code ec;
    if (!na->force && std::filesystem::exists(path, ec)) {
      fmt::print(stderr, "{}{} exists; give --force to overwrite it, or --out another path\n", kPrefix, path);
      rc = 1;
      return;
    }
    if (auto st = write_file_atomic(path, "# written by gpusim profiles new; the figures not stated here come from family " +
                                            spec.family + "\n" + *text);
        !st) {
      fmt::print(stderr, "{}{}\n", kPrefix, say(st.error()));
      rc = 1;
      return;
    }
    auto p = load_profile(path, search);
    if (!p) {
      fmt::print(stderr, "{}{}\n", kPrefix, say(p.error()));
      rc = 1;
      return;
    }
    const auto m = best_fp16_matrix_tflops(*p);
    fmt::print("wrote {}: {} units at {} MHz, FP32 {} TFLOPS, FP16 matrix {}, {} GB at {} GB/s (family {})\n", path,
               p->compute.units, num(p->compute.boost_clock_mhz), num(p->vector_tflops(Precision::kFp32)),
               m ? num(*m) + " TFLOPS" : std::string("none"), num(p->memory.dram.size_gb), num(p->memory.dram.bandwidth_gbps),
               spec.family);
    fmt::print("use it as --gpu {}, or put it in a folder given by --dir or $GPUSIM_PROFILE_PATH\n", path);
    rc = 0;
  });

  auto* validate = cmd->add_subcommand("validate", "Check profiles against the schema (all of them when none is "
                                                   "named); exit 0 only when every one is valid");
  validate->add_option("profiles", args->validate_names, "Profile names or .yaml files (default: every profile)");
  validate->add_flag("--json", args->validate_json,
                     "Print JSON (schema gpusim.profiles-validate/1): every profile with all its problems");
  validate->callback([args, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    std::vector<std::pair<std::string, Result<GpuProfile>>> results;
    if (args->validate_names.empty()) {
      for (Loaded& l : d->profiles()) results.emplace_back(l.first.name, std::move(l.second));
      if (results.empty()) {
        fmt::print(stderr, "{}no profiles found (searched {})\n", kPrefix, fmt::join(d->profile_dirs(), ", "));
        rc = 1;
        return;
      }
    } else {
      for (const std::string& n : args->validate_names) results.emplace_back(n, d->gpu(n));
    }
    const size_t valid = static_cast<size_t>(
        std::count_if(results.begin(), results.end(), [](const auto& r) { return r.second.ok(); }));
    rc = valid == results.size() ? 0 : 1;
    if (args->validate_json) {
      fmt::print("{}\n", profile_validation_document(results));
      return;
    }
    for (const auto& [name, r] : results) {
      if (r) {
        fmt::print("ok   {}\n", name);
        for (const std::string& a : r->assumptions) fmt::print("     note: {}\n", a);  // derived figures
        continue;
      }
      const std::vector<std::string> problems = profile_problems(r.error());
      if (problems.size() <= 1) {
        fmt::print("FAIL {}: {}\n", name, say(r.error()));
      } else {
        fmt::print("FAIL {}: {} problems\n", name, problems.size());
        for (const std::string& p : problems) fmt::print("     - {}\n", p);
      }
    }
    fmt::print("{} profiles: {} valid, {} invalid\n", results.size(), valid, results.size() - valid);
  });
}

}  // namespace gpusim::cli
