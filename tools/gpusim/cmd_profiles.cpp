// gpusim profiles [--dir DIR]... list [--json] | show NAME|FILE [--json] | validate [NAME|FILE ...]
// The GPU profiles (schema gpusim.profile/1, gpu_profiles/README.md): a table of every profile, every
// figure of one (extends resolved, efficiency factors marked default / profile / calibrated), and a
// validation report. Errors go to stderr prefixed "gpusim profiles: "; exit 1 for profiles that do
// not load, 2 for bad arguments.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "gpusim/gpu_profile.h"

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

// The best fp16-input matrix rate (any accumulate), or nullopt when the GPU has no fp16 matrix units.
std::optional<double> best_fp16_matrix(const GpuProfile& p) {
  std::optional<double> best;
  for (const MatrixPeak& m : p.compute.matrix_tflops) {
    if (m.input == Precision::kFp16 && (!best || m.tflops > *best)) best = m.tflops;
  }
  return best;
}

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
    {"matrix_flops", &Efficiency::matrix_flops, "of matrix-unit peaks"},
    {"host_link", &Efficiency::host_link, "of host-link bandwidth"},
    {"launch", &Efficiency::launch, "multiplier on launch overhead"},
};

bool is_calibrated(const GpuProfile& p, const std::string& dotted) {
  return p.calibrated && p.calibrated->figures.count(dotted) > 0;
}

// "calibrated" (measured by gpusim calibrate), "profile" (set in the YAML) or "default" (README table).
std::string efficiency_origin(const GpuProfile& p, const EffField& f) {
  if (is_calibrated(p, std::string("efficiency.") + f.key)) return "calibrated";
  static const Efficiency kDefaults{};
  return p.efficiency.*f.member == kDefaults.*f.member ? "default" : "profile";
}

std::string host_link_text(const HostLinkSpec& h) {
  if (h.unified) return "unified memory (no host copies)";
  std::string link = "PCIe";
  if (h.generation > 0) link += fmt::format(" gen {}", h.generation);
  if (h.lanes > 0) link += fmt::format(" x{}", h.lanes);
  return link;
}

// ---- JSON ---------------------------------------------------------------------------------------

nlohmann::json cache_json(const CacheSpec& c) {
  if (!c.present) return nullptr;
  return {{"size_mb", c.size_mb}, {"bandwidth_gbps", c.bandwidth_gbps}, {"latency_ns", c.latency_ns}};
}

nlohmann::json profile_json(const GpuProfile& p) {
  nlohmann::json j;
  j["schema"] = "gpusim.profile/1";
  j["name"] = p.name;
  j["display_name"] = p.display_name;
  j["vendor"] = p.vendor;
  j["architecture"] = p.architecture;
  j["path"] = p.source_path;
  j["extends_chain"] = p.extends_chain;
  const ComputeSpec& c = p.compute;
  nlohmann::json vec = nlohmann::json::object();
  for (const auto& [prec, tflops] : c.vector_tflops) vec[std::string(precision_name(prec))] = tflops;
  nlohmann::json matrix = nlohmann::json::array();
  for (const MatrixPeak& m : c.matrix_tflops) {
    matrix.push_back({{"dtype", std::string(precision_name(m.input))},
                      {"accumulate", std::string(precision_name(m.accumulate))},
                      {"tflops", m.tflops}});
  }
  j["compute"] = {{"units", c.units},
                  {"boost_clock_mhz", c.boost_clock_mhz},
                  {"base_clock_mhz", c.base_clock_mhz},
                  {"sustained_clock_mhz", c.sustained_clock_mhz},
                  {"warp_size", c.warp_size},
                  {"max_threads_per_unit", c.max_threads_per_unit},
                  {"max_blocks_per_unit", c.max_blocks_per_unit},
                  {"max_threads_per_block", c.max_threads_per_block},
                  {"registers_per_unit", c.registers_per_unit},
                  {"max_registers_per_thread", c.max_registers_per_thread},
                  {"shared_memory_per_unit_kb", c.shared_memory_per_unit_kb},
                  {"shared_memory_per_block_kb", c.shared_memory_per_block_kb},
                  {"vector_tflops", vec},
                  {"matrix_tflops", matrix},
                  {"matrix_alignment_elements", c.matrix_alignment_elements}};
  const DramSpec& d = p.memory.dram;
  j["memory"] = {{"dram",
                  {{"size_gb", d.size_gb},
                   {"bandwidth_gbps", d.bandwidth_gbps},
                   {"bus_width_bits", d.bus_width_bits},
                   {"type", d.type},
                   {"latency_ns", d.latency_ns}}},
                 {"l2", cache_json(p.memory.l2)},
                 {"infinity_cache", cache_json(p.memory.infinity_cache)},
                 {"l1", {{"size_per_unit_kb", p.memory.l1.size_per_unit_kb}, {"latency_ns", p.memory.l1.latency_ns}}}};
  const HostLinkSpec& h = p.host_link;
  j["host_link"] = {{"type", h.unified ? "unified" : "pcie"},
                    {"generation", h.generation},
                    {"lanes", h.lanes},
                    {"bandwidth_gbps", h.bandwidth_gbps},
                    {"sustained_bandwidth_gbps", h.bandwidth_gbps * p.efficiency.host_link}};
  j["launch"] = {{"overhead_us", p.launch.overhead_us}, {"latency_floor_us", p.launch.latency_floor_us}};
  j["power"] = {{"tdp_w", p.power.tdp_w}, {"idle_w", p.power.idle_w}};
  nlohmann::json eff = nlohmann::json::object();
  nlohmann::json origin = nlohmann::json::object();
  for (const EffField& f : kEffFields) {
    eff[f.key] = p.efficiency.*f.member;
    origin[f.key] = efficiency_origin(p, f);
  }
  j["efficiency"] = eff;
  j["efficiency_origin"] = origin;
  if (p.calibrated) {
    nlohmann::json figs = nlohmann::json::object();
    for (const auto& [key, f] : p.calibrated->figures) {
      figs[key] = {{"value", f.value}, {"p50", f.p50}, {"p95", f.p95}, {"repeats", f.repeats}, {"unit", f.unit}};
    }
    j["calibrated"] = {{"device", p.calibrated->device}, {"date", p.calibrated->date}, {"figures", figs}};
  } else {
    j["calibrated"] = nullptr;
  }
  j["sources"] = p.sources;
  j["assumptions"] = p.assumptions;
  return j;
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
    row(f.key, fmt::format("{:<6} ({})  {}", exact(p.efficiency.*f.member), efficiency_origin(p, f), f.meaning));
  }

  if (p.calibrated) {
    fmt::print("\ncalibrated\n");
    if (!p.calibrated->device.empty()) row("device", p.calibrated->device);
    if (!p.calibrated->date.empty()) row("date", p.calibrated->date);
    for (const auto& [key, f] : p.calibrated->figures) {
      row(key, fmt::format("{} (p50 {}, p95 {}{}{})", exact(f.value), exact(f.p50), exact(f.p95),
                           f.unit.empty() ? "" : " " + f.unit,
                           f.repeats > 0 ? fmt::format(", {} repeats", f.repeats) : ""));
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

// ---- loading ------------------------------------------------------------------------------------

// find_profile, with an exception from the YAML library (a file it cannot read, a value it cannot
// convert) turned into an error naming the profile, so that one bad file does not end list/validate.
Result<GpuProfile> safe_find(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  try {
    return find_profile(name_or_path, dirs);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: cannot load: {}", name_or_path, e.what()));
  }
}

// ---- list ---------------------------------------------------------------------------------------

struct Loaded {
  ProfileEntry entry;
  Result<GpuProfile> profile;
};

std::vector<Loaded> load_all(const std::vector<std::string>& dirs) {
  std::vector<Loaded> out;
  for (const ProfileEntry& e : list_profiles(dirs)) out.push_back({e, safe_find(e.path, dirs)});
  return out;
}

nlohmann::json list_entry_json(const Loaded& l) {
  nlohmann::json j;
  j["name"] = l.entry.name;
  j["path"] = l.entry.path;
  if (l.profile) {
    const GpuProfile& p = *l.profile;
    j["vendor"] = p.vendor;
    j["display_name"] = p.display_name;
    j["units"] = p.compute.units;
    j["boost_clock_mhz"] = p.compute.boost_clock_mhz;
    j["fp32_tflops"] = p.vector_tflops(Precision::kFp32);
    const auto m = best_fp16_matrix(p);
    j["fp16_matrix_tflops"] = m ? nlohmann::json(*m) : nlohmann::json(nullptr);
    j["dram_gb"] = p.memory.dram.size_gb;
    j["dram_bandwidth_gbps"] = p.memory.dram.bandwidth_gbps;
    j["valid"] = true;
  } else {
    for (const char* k : {"vendor", "display_name", "units", "boost_clock_mhz", "fp32_tflops", "fp16_matrix_tflops",
                          "dram_gb", "dram_bandwidth_gbps"}) {
      j[k] = nullptr;
    }
    j["valid"] = false;
    j["error"] = l.profile.error().message;
  }
  return j;
}

void print_list(const std::vector<Loaded>& all) {
  size_t w = 4;
  for (const Loaded& l : all) w = std::max(w, l.entry.name.size());
  fmt::print("{:<{}}  {:<7} {:>5} {:>10} {:>11} {:>12} {:>8} {:>8}\n", "name", w, "vendor", "units", "boost MHz",
             "FP32 TFLOPS", "FP16 mat TF", "DRAM GB", "GB/s");
  for (const Loaded& l : all) {
    if (!l.profile) {
      fmt::print("{:<{}}  INVALID  {}\n", l.entry.name, w, l.profile.error().message);
      continue;
    }
    const GpuProfile& p = *l.profile;
    const auto m = best_fp16_matrix(p);
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
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("profiles", "List, show and validate GPU profiles (gpu_profiles/, schema "
                                             "gpusim.profile/1)");
  cmd->require_subcommand(1);
  cmd->fallthrough();  // --dir may also follow the subcommand
  cmd->add_option("--dir", args->dirs,
                  "Also search this directory for *.yaml profiles, before $GPUSIM_PROFILE_PATH and gpu_profiles/ "
                  "(repeatable)");

  // The search path, or nullopt (after reporting) when a --dir is not a directory.
  auto dirs = [args, &rc]() -> std::optional<std::vector<std::string>> {
    for (const std::string& d : args->dirs) {
      if (!std::filesystem::is_directory(d)) {
        fmt::print(stderr, "{}--dir {}: not a directory\n", kPrefix, d);
        rc = 2;
        return std::nullopt;
      }
    }
    std::vector<std::string> out = args->dirs;
    for (std::string& d : default_profile_dirs()) out.push_back(std::move(d));
    return out;
  };

  auto* list = cmd->add_subcommand("list", "Table of every profile: units, clock, FP32 and FP16 matrix TFLOPS, DRAM "
                                           "size and bandwidth; profiles that do not load are marked INVALID");
  list->add_flag("--json", args->list_json,
                 "Print JSON: {\"profiles\": [{name, path, vendor, display_name, units, boost_clock_mhz, fp32_tflops, "
                 "fp16_matrix_tflops, dram_gb, dram_bandwidth_gbps, valid, error?}]}");
  list->callback([args, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    const std::vector<Loaded> all = load_all(*d);
    if (all.empty()) {
      fmt::print(stderr, "{}no profiles found (searched {})\n", kPrefix, fmt::join(*d, ", "));
      rc = 1;
      return;
    }
    if (args->list_json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const Loaded& l : all) arr.push_back(list_entry_json(l));
      fmt::print("{}\n", nlohmann::json{{"profiles", arr}}.dump(2));
    } else {
      print_list(all);
    }
    const bool any_invalid = std::any_of(all.begin(), all.end(), [](const Loaded& l) { return !l.profile.ok(); });
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
    auto p = safe_find(args->show_name, *d);
    if (!p) {
      fmt::print(stderr, "{}{}\n", kPrefix, p.error().message);
      rc = 1;
      return;
    }
    if (args->show_json) {
      fmt::print("{}\n", profile_json(*p).dump(2));
    } else {
      print_show(*p);
    }
    rc = 0;
  });

  auto* validate = cmd->add_subcommand("validate", "Check profiles against the schema (all of them when none is "
                                                   "named); exit 0 only when every one is valid");
  validate->add_option("profiles", args->validate_names, "Profile names or .yaml files (default: every profile)");
  validate->callback([args, dirs, &rc] {
    const auto d = dirs();
    if (!d) return;
    std::vector<std::pair<std::string, Result<GpuProfile>>> results;
    if (args->validate_names.empty()) {
      for (Loaded& l : load_all(*d)) results.emplace_back(l.entry.name, std::move(l.profile));
      if (results.empty()) {
        fmt::print(stderr, "{}no profiles found (searched {})\n", kPrefix, fmt::join(*d, ", "));
        rc = 1;
        return;
      }
    } else {
      for (const std::string& n : args->validate_names) results.emplace_back(n, safe_find(n, *d));
    }
    size_t valid = 0;
    for (const auto& [name, r] : results) {
      if (r) {
        ++valid;
        fmt::print("ok   {}\n", name);
      } else {
        fmt::print("FAIL {}: {}\n", name, r.error().message);
      }
    }
    fmt::print("{} profiles: {} valid, {} invalid\n", results.size(), valid, results.size() - valid);
    rc = valid == results.size() ? 0 : 1;
  });
}

}  // namespace gpusim::cli
