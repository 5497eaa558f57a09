// Loading gpu_profiles/*.yaml: merge `extends:` parents, validate against the schema table below
// (unknown keys, types, ranges, required keys, source coverage), then convert to GpuProfile.
// The schema is data (kSchema), so the rules and the README table stay in one place each.
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <fstream>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "gpusim/gpu_profile.h"

#include "base/closest.h"
#include "base/files.h"

namespace gpusim {
namespace {

namespace fs = std::filesystem;
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Kind { kMap, kList, kInt, kNum, kStr, kEnum, kStrMap, kStrList, kCalibrated };

struct Spec {
  std::string key;
  Kind kind = Kind::kMap;
  double lo = -kInf, hi = kInf;
  bool lo_open = false;  // lo itself not allowed
  bool required = false;
  std::vector<std::string> allowed;  // kEnum
  std::vector<Spec> children;        // kMap fields; kList: fields of each element
};

Spec num(std::string k, double lo, double hi, bool req = false, bool lo_open = false) {
  return {std::move(k), Kind::kNum, lo, hi, lo_open, req, {}, {}};
}
Spec integer(std::string k, double lo, double hi, bool req = false) {
  return {std::move(k), Kind::kInt, lo, hi, false, req, {}, {}};
}
Spec str(std::string k, bool req = false) { return {std::move(k), Kind::kStr, 0, 0, false, req, {}, {}}; }
Spec oneof(std::string k, std::vector<std::string> allowed, bool req = false) {
  return {std::move(k), Kind::kEnum, 0, 0, false, req, std::move(allowed), {}};
}
Spec map(std::string k, std::vector<Spec> children, bool req = false) {
  return {std::move(k), Kind::kMap, 0, 0, false, req, {}, std::move(children)};
}
// A figure within what hardware has: past either end it is a unit slip (GB/s written as TB/s, MB as
// bytes), and left in, it would price every kernel at nothing or at years.
Spec physical(std::string k, double lo, double hi, bool req = false) { return num(std::move(k), lo, hi, req); }

const std::vector<std::string> kVectorPrecisions = {"fp64", "fp32", "fp16", "bf16", "int32", "int8"};
const std::vector<std::string> kMatrixInputs = {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"};
const std::vector<std::string> kAccumulates = {"fp64", "fp32", "fp16", "int32"};

const Spec& schema() {
  static const Spec s = [] {
    std::vector<Spec> vec;
    for (const auto& p : kVectorPrecisions) vec.push_back(physical(p, 1e-4, 1e5));
    Spec vector_tflops = map("vector_tflops", vec, true);
    Spec matrix = {"matrix_tflops", Kind::kList, 0, 0, false, false, {},
                   {oneof("dtype", kMatrixInputs, true), oneof("accumulate", kAccumulates, true), physical("tflops", 1e-3, 1e5, true)}};
    Spec cache_level = map("", {physical("size_mb", 1e-3, 1e5, true), physical("bandwidth_gbps", 1, 1e6),
                                physical("latency_ns", 1, 1e5)});
    Spec l2 = cache_level;
    l2.key = "l2";
    l2.required = true;
    Spec ic = cache_level;
    ic.key = "infinity_cache";
    return map("", {
        oneof("schema", {"gpusim.profile/1"}, true),
        str("name", true),
        str("display_name", true),
        {"device_names", Kind::kStrList, 0, 0, false, false, {}, {}},
        oneof("vendor", {"nvidia", "amd", "intel", "apple", "cpu"}, true),
        str("architecture", true),
        str("extends"),
        str("family"),  // read (and removed) before the check: named here for the list of allowed keys
        map("compute",
            {integer("units", 1, 1024, true), num("boost_clock_mhz", 100, 5000, true),
             num("base_clock_mhz", 100, 5000), num("sustained_clock_mhz", 100, 5000),
             oneof("warp_size", {"8", "16", "32", "64"}, true), integer("max_threads_per_unit", 64, 4096, true),
             integer("max_blocks_per_unit", 1, 64, true), integer("max_threads_per_block", 64, 2048, true),
             integer("registers_per_unit", 1024, 1048576, true), integer("max_registers_per_thread", 16, 1024, true),
             num("shared_memory_per_unit_kb", 0, 1024, true), num("shared_memory_per_block_kb", 0, 1024, true),
             physical("shared_memory_bandwidth_gbps", 1, 1e6), num("barrier_ns", 0, 1e6),
             vector_tflops, matrix, integer("matrix_alignment_elements", 1, 128), oneof("matrix_units", {"dedicated", "alus"})},
            true),
        map("memory",
            {map("dram", {physical("size_gb", 1e-2, 1e5, true), physical("bandwidth_gbps", 1, 1e5, true),
                          integer("bus_width_bits", 1, 65536), str("type"), physical("latency_ns", 1, 1e5)},
                 true),
             l2, ic, map("l1", {physical("size_per_unit_kb", 1, 1e4, true), physical("latency_ns", 1, 1e5)}, true)},
            true),
        map("host_link", {oneof("type", {"pcie", "unified"}, true), integer("generation", 1, 6), integer("lanes", 1, 32),
                          physical("bandwidth_gbps", 0.1, 1e4)},
            true),
        map("launch", {num("overhead_us", 0, 1000), num("latency_floor_us", 0, 1000), num("block_us", 0, 1000)}),
        map("power", {physical("tdp_w", 1, 1e5, true), physical("idle_w", 0.01, 1e5, true)}, true),
        map("efficiency", {num("dram_bandwidth", 0, 1, false, true), num("l2_bandwidth", 0, 1, false, true),
                           num("vector_flops", 0, 1, false, true), num("gemm_vector_flops", 0, 1, false, true),
                           num("matrix_flops", 0, 1, false, true), num("grouped_conv", 0, 1, false, true),
                           num("host_link", 0, 1, false, true), num("launch", 0, 10, false, true),
                           num("own_round_trip", 0, 100, false, true), num("own_value_ns", 0, 10000, false, true),
                           num("own_block_us", 0, 1000, false, true), num("own_simt_flops", 0, 1, false, true),
                           num("own_matrix_flops", 0, 1, false, true)}),
        {"calibrated", Kind::kCalibrated, 0, 0, false, false, {}, {}},
        {"sources", Kind::kStrMap, 0, 0, false, true, {}, {}},
    });
  }();
  return s;
}

std::string join_path(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

std::string range_text(const Spec& s) {
  const bool has_hi = std::isfinite(s.hi);
  if (s.lo_open && s.lo == 0 && !has_hi) return "expected > 0";
  if (s.lo_open && has_hi) return fmt::format("expected > {} and <= {}", s.lo, s.hi);
  if (has_hi) return fmt::format("expected {} to {}", s.lo, s.hi);
  return fmt::format("expected >= {}", s.lo);
}

// Checks a profile against the schema, collecting every problem (a profile's author fixes them all
// in one pass): check() goes on past a bad value to the rest of the tree and returns the first
// problem of the subtree it was given; result() reports them all, in document order.
class Validator {
 public:
  explicit Validator(std::string file) : file_(std::move(file)) {}

  Status check(const YAML::Node& n, const Spec& s, const std::string& path) {
    const size_t before = problems_.size();
    check_tree(n, s, path);
    if (problems_.size() == before) return Ok{};
    return make_error(ErrorCode::kInvalidArgument, problems_[before]);
  }

  // Records a problem; returns it as an error for callers that stop at it.
  Error fail(const std::string& path, const std::string& msg) {
    problems_.push_back(fmt::format("{}: {}: {}", file_, path, msg));
    flagged_.push_back(path);
    return make_error(ErrorCode::kInvalidArgument, problems_.back());
  }

  // Whether a problem was reported at `path`, above it or below it: checks across fields skip such
  // values, so one mistake is reported once rather than again through every check that reads it.
  bool flagged(const std::string& path) const {
    const auto under = [](const std::string& a, const std::string& b) {  // a at or below b
      return a == b || (a.size() > b.size() && a.compare(0, b.size(), b) == 0 && (a[b.size()] == '.' || a[b.size()] == '['));
    };
    for (const std::string& f : flagged_) {
      if (f.empty() || under(path, f) || under(f, path)) return true;
    }
    return false;
  }
  // Checks the tree, adding its problems to those result() reports.
  void collect(const YAML::Node& n, const Spec& s, const std::string& path) { check_tree(n, s, path); }
  // Every problem, one per line; Ok when there are none.
  Status result() const {
    if (problems_.empty()) return Ok{};
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}", fmt::join(problems_, "\n")));
  }

 private:
  void check_tree(const YAML::Node& n, const Spec& s, const std::string& path) {
    switch (s.kind) {
      case Kind::kMap: {
        if (!n.IsMap()) {
          fail(path, fmt::format("{} is not a mapping; expected keys {}", show(n), keys(s)));
          return;
        }
        for (const auto& kv : n) {
          const std::string k = kv.first.Scalar();
          const Spec* child = find(s, k);
          if (!child) {
            fail(join_path(path, k), fmt::format("unknown key; allowed here: {}", keys(s)));
            continue;
          }
          check_tree(kv.second, *child, join_path(path, k));
        }
        for (const Spec& c : s.children) {
          if (c.required && !n[c.key]) fail(join_path(path, c.key), "missing; this key is required");
        }
        return;
      }
      case Kind::kList: {
        if (!n.IsSequence()) {
          fail(path, fmt::format("{} is not a list", show(n)));
          return;
        }
        Spec elem = s;
        elem.kind = Kind::kMap;
        for (size_t i = 0; i < n.size(); ++i) check_tree(n[i], elem, fmt::format("{}[{}]", path, i));
        return;
      }
      case Kind::kInt:
      case Kind::kNum: {
        double v;
        if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
          fail(path, fmt::format("{} is not a number; {}", show(n), range_text(s)));
        } else if (s.kind == Kind::kInt && v != std::floor(v)) {
          fail(path, fmt::format("{} is not a whole number; {}", n.Scalar(), range_text(s)));
        } else if (s.lo_open ? v <= s.lo : v < s.lo) {
          fail(path, fmt::format("{} {}; {}", n.Scalar(), v < 0 && s.lo >= 0 ? "is negative" : "is out of range",
                                 range_text(s)));
        } else if (v > s.hi) {
          fail(path, fmt::format("{} is out of range; {}", n.Scalar(), range_text(s)));
        }
        return;
      }
      case Kind::kStr:
        if (!n.IsScalar()) fail(path, fmt::format("{} is not a string", show(n)));
        return;
      case Kind::kEnum:
        if (!n.IsScalar() || std::find(s.allowed.begin(), s.allowed.end(), n.Scalar()) == s.allowed.end()) {
          fail(path, fmt::format("{} is not one of {}", show(n), fmt::join(s.allowed, ", ")));
        }
        return;
      case Kind::kStrMap:
        if (!n.IsMap()) {
          fail(path, fmt::format("{} is not a mapping of path -> source", show(n)));
          return;
        }
        for (const auto& kv : n) {
          if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
            fail(join_path(path, kv.first.Scalar()), "must be a non-empty string naming the source");
          }
        }
        return;
      case Kind::kStrList:
        if (!n.IsSequence()) {
          fail(path, fmt::format("{} is not a list of names (e.g. [\"NVIDIA H200\"])", show(n)));
          return;
        }
        for (size_t i = 0; i < n.size(); ++i) {
          if (!n[i].IsScalar() || n[i].Scalar().empty()) {
            fail(fmt::format("{}[{}]", path, i), "must be a non-empty string: a device name as its driver reports it");
          }
        }
        return;
      case Kind::kCalibrated:
        check_calibrated(n, path);
        return;
    }
  }

  static const Spec* find(const Spec& s, const std::string& k) {
    for (const Spec& c : s.children) {
      if (c.key == k) return &c;
    }
    return nullptr;
  }
  static std::string keys(const Spec& s) {
    std::vector<std::string> k;
    for (const Spec& c : s.children) k.push_back(c.key);
    return fmt::format("{}", fmt::join(k, ", "));
  }
  static std::string show(const YAML::Node& n) {
    if (n.IsScalar()) return fmt::format("\"{}\"", n.Scalar());
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return "an empty value";
  }

  // calibrated: {device, date, driver, command, <group>: {<figure>: {value, p50, p95, repeats, unit}}}.
  // Groups mirror the profile's own mappings; a figure of `memory` is a dotted path in it
  // ("dram.latency_ns", "l2.size_mb"), checked against the profile schema's range.
  void check_calibrated(const YAML::Node& n, const std::string& path) {
    if (!n.IsMap()) {
      fail(path, "is not a mapping");
      return;
    }
    static const std::set<std::string> kGroups = {"efficiency", "launch", "memory", "compute"};
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string p = join_path(path, k);
      if (k == "device" || k == "date" || k == "driver" || k == "command" || k == "measurements") {
        if (!kv.second.IsScalar()) fail(p, fmt::format("{} is not a string", show(kv.second)));
        continue;
      }
      if (!kGroups.count(k)) {
        fail(p, "unknown key; allowed here: device, date, driver, command, measurements, efficiency, launch, memory, compute");
        continue;
      }
      if (!kv.second.IsMap()) {
        fail(p, fmt::format("{} is not a mapping of figure -> {{value, p50, p95, ...}}", show(kv.second)));
        continue;
      }
      const Spec& target = *find(schema(), k);
      for (const auto& fig : kv.second) {
        const std::string name = fig.first.Scalar();
        const Spec* t = k == "memory"    ? find_dotted(target, name)
                        : k == "compute" ? (std::find(kCalibratedCompute.begin(), kCalibratedCompute.end(), name) != kCalibratedCompute.end()
                                                ? find(target, name)
                                                : nullptr)
                                         : find(target, name);
        if (!t) {
          fail(join_path(p, name), fmt::format("unknown key; allowed here: {}",
                                               k == "memory"    ? kCalibratedMemory
                                               : k == "compute" ? fmt::format("{}", fmt::join(kCalibratedCompute, ", "))
                                                                : keys(target)));
          continue;
        }
        static const Spec kFigure = map("", {num("value", -kInf, kInf, true), num("p50", -kInf, kInf),
                                             num("p95", -kInf, kInf), integer("repeats", 1, 1e12), str("unit")});
        if (auto st = check(fig.second, kFigure, join_path(p, name)); !st) continue;
        Spec value_spec = *t;
        value_spec.key = "value";
        check_tree(fig.second["value"], value_spec, join_path(join_path(p, name), "value"));
      }
    }
  }

  // The compute figures calibration measures (a figure of the `compute` mapping), in the order errors list them.
  inline static const std::vector<std::string> kCalibratedCompute = {"shared_memory_bandwidth_gbps", "barrier_ns",
                                                                     "sustained_clock_mhz"};
  // The memory figures calibration measures: a dotted path below `memory`.
  static constexpr const char* kCalibratedMemory = "dram.latency_ns, l2.size_mb, l2.bandwidth_gbps, l2.latency_ns, l1.latency_ns";
  static const Spec* find_dotted(const Spec& memory, const std::string& name) {
    static const std::set<std::string> kAllowed = {"dram.latency_ns", "l2.size_mb", "l2.bandwidth_gbps", "l2.latency_ns",
                                                    "l1.latency_ns"};
    if (!kAllowed.count(name)) return nullptr;
    const size_t dot = name.find('.');
    const Spec* level = find(memory, name.substr(0, dot));
    return level ? find(*level, name.substr(dot + 1)) : nullptr;
  }

  std::string file_;
  std::vector<std::string> problems_;
  std::vector<std::string> flagged_;  // the paths of problems_
};

// Deep merge: mappings merge key by key, anything else in `over` replaces `base`.
YAML::Node merge(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return YAML::Clone(over);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : over) {
    const std::string k = kv.first.Scalar();
    out[k] = out[k] ? merge(out[k], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

// Limits on a profile's YAML, checked before anything reads it: real profiles are a few KB, about
// 200 nodes, nested 4 deep, and extend at most one or two others.
constexpr size_t kMaxProfileBytes = 1 << 20;
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxNodes = 100000;  // visits, aliases counted each time they are reached
constexpr size_t kMaxExtends = 16;

// Every key is a plain scalar (a mapping or list as a key has no name to report or merge by), the
// nesting is bounded, and so is the tree as seen through its aliases (an alias "bomb" expands
// exponentially when walked).
Status check_structure(const YAML::Node& n, const std::string& source, const std::string& path, int depth,
                       int64_t& visited) {
  if (++visited > kMaxNodes) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: more than {} values once aliases (*name) are expanded; a "
                                                     "profile is a few hundred: remove the aliases",
                                                     source, kMaxNodes));
  }
  if (depth > kMaxDepth) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: {}: nested more than {} levels deep; a profile is 4",
                                                     source, path.empty() ? "(top)" : path, kMaxDepth));
  }
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) {
        return make_error(ErrorCode::kParse, fmt::format("{}: {}: a key is a {}; keys must be plain names",
                                                         source, path.empty() ? "(top)" : path,
                                                         kv.first.IsMap() ? "mapping" : kv.first.IsSequence() ? "list" : "null"));
      }
      if (auto st = check_structure(kv.second, source, join_path(path, kv.first.Scalar()), depth + 1, visited); !st) return st;
    }
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (auto st = check_structure(n[i], source, fmt::format("{}[{}]", path, i), depth + 1, visited); !st) return st;
    }
  }
  return Ok{};
}

Result<YAML::Node> parse_yaml_text(const std::string& text, const std::string& source) {
  if (text.size() > kMaxProfileBytes) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: {} bytes; a profile is a few KB (limit {} bytes)", source,
                                                     text.size(), kMaxProfileBytes));
  }
  try {
    YAML::Node n = YAML::Load(text);
    if (!n.IsMap()) {
      return make_error(ErrorCode::kParse, fmt::format("{}: a profile must be a YAML mapping (see gpu_profiles/README.md)",
                                                       source));
    }
    int64_t visited = 0;
    if (auto st = check_structure(n, source, "", 0, visited); !st) return st.error();
    return n;
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}:{}:{}: not valid YAML: {}", source, e.mark.line + 1,
                                                     e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: cannot read: {}", source, e.what()));
  }
}

Result<YAML::Node> read_yaml(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: no such file (check the path)", path));
  }
  // A profile is a few kilobytes; 16 MiB bounds a wrong file. Regular files only (no FIFO, device).
  auto read = base::read_regular_file(path, 16 << 20, "the profile");
  if (!read) return make_error(ErrorCode::kIo, read.error().message);
  const std::string& text = *read;
  return parse_yaml_text(text, path);
}

// Numeric leaves under the datasheet sections, as dotted paths (list elements as path[i]); every
// path, numeric or not, goes to `all`.
void figure_paths(const YAML::Node& n, const std::string& path, std::vector<std::string>& out,
                  std::set<std::string>& all) {
  all.insert(path);
  if (n.IsMap()) {
    for (const auto& kv : n) figure_paths(kv.second, join_path(path, kv.first.Scalar()), out, all);
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) figure_paths(n[i], fmt::format("{}[{}]", path, i), out, all);
  } else if (n.IsScalar()) {
    double v;
    if (YAML::convert<double>::decode(n, v)) out.push_back(path);
  }
}

bool covered(const std::string& figure, const std::set<std::string>& sources) {
  for (std::string p = figure;;) {
    if (sources.count(p)) return true;
    const auto cut = p.find_last_of(".[");
    if (cut == std::string::npos) return false;
    p = p.substr(0, cut);
  }
}

double pcie_lane_gbps(int generation) {
  // One direction, after line encoding: 2.5, 5 GT/s (8b/10b); 8, 16, 32 GT/s (128b/130b); 64 GT/s (PAM4, FLIT).
  static const double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  return kLane[std::clamp(generation, 0, 6)];
}

Precision prec(const YAML::Node& n) { return *precision_from_name(n.as<std::string>()); }

CacheSpec cache(const YAML::Node& n) {
  CacheSpec c;
  if (!n) return c;
  c.present = true;
  c.size_mb = n["size_mb"].as<double>();
  if (n["bandwidth_gbps"]) c.bandwidth_gbps = n["bandwidth_gbps"].as<double>();
  if (n["latency_ns"]) c.latency_ns = n["latency_ns"].as<double>();
  return c;
}

}  // namespace

// Every efficiency figure by its YAML key: a profile's `efficiency` block, its calibrated figures
// and the vendor defaults file all name them so.
const std::vector<std::pair<const char*, double Efficiency::*>>& efficiency_fields() {
  static const std::vector<std::pair<const char*, double Efficiency::*>> kFields = {
      {"dram_bandwidth", &Efficiency::dram_bandwidth}, {"l2_bandwidth", &Efficiency::l2_bandwidth},
      {"vector_flops", &Efficiency::vector_flops},     {"gemm_vector_flops", &Efficiency::gemm_vector_flops},
      {"matrix_flops", &Efficiency::matrix_flops},     {"grouped_conv", &Efficiency::grouped_conv},
      {"host_link", &Efficiency::host_link},           {"launch", &Efficiency::launch},
      {"own_round_trip", &Efficiency::own_round_trip}, {"own_value_ns", &Efficiency::own_value_ns},
      {"own_block_us", &Efficiency::own_block_us},     {"own_simt_flops", &Efficiency::own_simt_flops},
      {"own_matrix_flops", &Efficiency::own_matrix_flops}};
  return kFields;
}

namespace {

GpuProfile convert(const YAML::Node& y) {
  GpuProfile p;
  p.name = y["name"].as<std::string>();
  p.display_name = y["display_name"].as<std::string>();
  if (y["device_names"]) {
    for (const auto& n : y["device_names"]) p.device_names.push_back(n.as<std::string>());
  }
  p.vendor = y["vendor"].as<std::string>();
  p.architecture = y["architecture"].as<std::string>();
  const YAML::Node c = y["compute"];
  p.compute.units = static_cast<int>(c["units"].as<double>());
  p.compute.boost_clock_mhz = c["boost_clock_mhz"].as<double>();
  if (c["base_clock_mhz"]) p.compute.base_clock_mhz = c["base_clock_mhz"].as<double>();
  if (c["sustained_clock_mhz"]) p.compute.sustained_clock_mhz = c["sustained_clock_mhz"].as<double>();
  p.compute.warp_size = static_cast<int>(c["warp_size"].as<double>());
  p.compute.max_threads_per_unit = static_cast<int>(c["max_threads_per_unit"].as<double>());
  p.compute.max_blocks_per_unit = static_cast<int>(c["max_blocks_per_unit"].as<double>());
  p.compute.max_threads_per_block = static_cast<int>(c["max_threads_per_block"].as<double>());
  p.compute.registers_per_unit = static_cast<int64_t>(c["registers_per_unit"].as<double>());
  p.compute.max_registers_per_thread = static_cast<int>(c["max_registers_per_thread"].as<double>());
  p.compute.shared_memory_per_unit_kb = c["shared_memory_per_unit_kb"].as<double>();
  p.compute.shared_memory_per_block_kb = c["shared_memory_per_block_kb"].as<double>();
  if (c["shared_memory_bandwidth_gbps"]) p.compute.shared_memory_bandwidth_gbps = c["shared_memory_bandwidth_gbps"].as<double>();
  if (c["barrier_ns"]) p.compute.barrier_ns = c["barrier_ns"].as<double>();
  for (const auto& kv : c["vector_tflops"]) p.compute.vector_tflops[prec(kv.first)] = kv.second.as<double>();
  if (c["matrix_tflops"]) {
    for (const auto& m : c["matrix_tflops"]) {
      p.compute.matrix_tflops.push_back({prec(m["dtype"]), prec(m["accumulate"]), m["tflops"].as<double>()});
    }
  }
  if (c["matrix_alignment_elements"]) p.compute.matrix_alignment_elements = static_cast<int>(c["matrix_alignment_elements"].as<double>());
  if (c["matrix_units"]) p.compute.matrix_on_alus = c["matrix_units"].as<std::string>() == "alus";
  const YAML::Node m = y["memory"];
  p.memory.dram.size_gb = m["dram"]["size_gb"].as<double>();
  p.memory.dram.bandwidth_gbps = m["dram"]["bandwidth_gbps"].as<double>();
  if (m["dram"]["bus_width_bits"]) p.memory.dram.bus_width_bits = static_cast<int>(m["dram"]["bus_width_bits"].as<double>());
  if (m["dram"]["type"]) p.memory.dram.type = m["dram"]["type"].as<std::string>();
  if (m["dram"]["latency_ns"]) p.memory.dram.latency_ns = m["dram"]["latency_ns"].as<double>();
  p.memory.l2 = cache(m["l2"]);
  p.memory.infinity_cache = cache(m["infinity_cache"]);
  p.memory.l1.size_per_unit_kb = m["l1"]["size_per_unit_kb"].as<double>();
  if (m["l1"]["latency_ns"]) p.memory.l1.latency_ns = m["l1"]["latency_ns"].as<double>();
  const YAML::Node h = y["host_link"];
  p.host_link.unified = h["type"].as<std::string>() == "unified";
  if (h["generation"]) p.host_link.generation = static_cast<int>(h["generation"].as<double>());
  if (h["lanes"]) p.host_link.lanes = static_cast<int>(h["lanes"].as<double>());
  p.host_link.bandwidth_gbps = h["bandwidth_gbps"] ? h["bandwidth_gbps"].as<double>()
                                                   : pcie_lane_gbps(p.host_link.generation) * p.host_link.lanes;
  if (y["launch"]) {
    if (y["launch"]["overhead_us"]) p.launch.overhead_us = y["launch"]["overhead_us"].as<double>();
    if (y["launch"]["latency_floor_us"]) p.launch.latency_floor_us = y["launch"]["latency_floor_us"].as<double>();
    if (y["launch"]["block_us"]) p.launch.block_us = y["launch"]["block_us"].as<double>();
  }
  p.power.tdp_w = y["power"]["tdp_w"].as<double>();
  p.power.idle_w = y["power"]["idle_w"].as<double>();
  if (const YAML::Node e = y["efficiency"]) {
    for (const auto& [key, field] : efficiency_fields()) {
      if (e[key]) p.efficiency.*field = e[key].as<double>();
    }
  }
  for (const auto& kv : y["sources"]) p.sources[kv.first.Scalar()] = kv.second.as<std::string>();
  return p;
}

void apply_calibration(const YAML::Node& cal, GpuProfile& p) {
  Calibration c;
  if (cal["device"]) c.device = cal["device"].as<std::string>();
  if (cal["date"]) c.date = cal["date"].as<std::string>();
  if (cal["driver"]) c.driver = cal["driver"].as<std::string>();
  if (cal["command"]) c.command = cal["command"].as<std::string>();
  if (cal["measurements"]) c.measurements = cal["measurements"].as<std::string>();
  for (const char* group : {"efficiency", "launch", "memory", "compute"}) {
    if (!cal[group]) continue;
    for (const auto& kv : cal[group]) {
      const std::string key = kv.first.Scalar();
      CalibratedFigure f;
      f.value = kv.second["value"].as<double>();
      if (kv.second["p50"]) f.p50 = kv.second["p50"].as<double>();
      if (kv.second["p95"]) f.p95 = kv.second["p95"].as<double>();
      if (kv.second["repeats"]) f.repeats = static_cast<int64_t>(kv.second["repeats"].as<double>());
      if (kv.second["unit"]) f.unit = kv.second["unit"].as<std::string>();
      c.figures[std::string(group) + "." + key] = f;
      double* slot = nullptr;
      const std::string g = group;
      if (g == "efficiency") {
        for (const auto& [name, field] : efficiency_fields()) {
          if (key == name) slot = &(p.efficiency.*field);
        }
      } else if (g == "launch") {
        slot = key == "overhead_us" ? &p.launch.overhead_us
             : key == "block_us"    ? &p.launch.block_us : &p.launch.latency_floor_us;
      } else if (g == "compute") {
        slot = key == "barrier_ns"            ? &p.compute.barrier_ns
             : key == "sustained_clock_mhz" ? &p.compute.sustained_clock_mhz
                                            : &p.compute.shared_memory_bandwidth_gbps;
      } else {
        MemorySpec& m = p.memory;
        slot = key == "dram.latency_ns" ? &m.dram.latency_ns : key == "l2.size_mb" ? &m.l2.size_mb
             : key == "l2.bandwidth_gbps" ? &m.l2.bandwidth_gbps : key == "l1.latency_ns" ? &m.l1.latency_ns
             : &m.l2.latency_ns;
      }
      if (slot) *slot = f.value;  // the schema check admits only these keys
    }
  }
  p.calibrated = std::move(c);
}

// Fills figures the profile leaves out with the documented assumptions, recording each.
void apply_assumptions(GpuProfile& p) {
  auto assume = [&](double& v, double value, const std::string& what) {
    if (v > 0) return;
    v = value;
    p.assumptions.push_back(what);
  };
  assume(p.memory.l2.bandwidth_gbps, 3 * p.memory.dram.bandwidth_gbps, "L2 bandwidth = 3 x DRAM bandwidth");
  assume(p.memory.dram.latency_ns, 500, "DRAM latency 500 ns");
  assume(p.compute.shared_memory_bandwidth_gbps, p.compute.units * 128 * p.compute.boost_clock_mhz * 1e-3,
         "shared-memory bandwidth = units x 128 B/clock x boost clock");
  assume(p.memory.l2.latency_ns, 200, "L2 latency 200 ns");
  assume(p.memory.l1.latency_ns, 30, "L1 latency 30 ns");
  if (p.memory.infinity_cache.present) {
    assume(p.memory.infinity_cache.bandwidth_gbps, 2 * p.memory.dram.bandwidth_gbps,
           "last-level cache bandwidth = 2 x DRAM bandwidth");
    assume(p.memory.infinity_cache.latency_ns, 300, "last-level cache latency 300 ns");
  }
  auto assume_absent = [&](double& v, double value, const std::string& what) {
    if (v >= 0) return;  // given, zero included
    v = value;
    p.assumptions.push_back(what);
  };
  assume_absent(p.launch.overhead_us, 4.0, "launch overhead 4 us");
  assume_absent(p.launch.latency_floor_us, 2.0, "kernel latency floor 2 us");
}

std::optional<double> finite_number(const YAML::Node& n) {
  double d;
  if (n && n.IsScalar() && YAML::convert<double>::decode(n, d) && std::isfinite(d)) return d;
  return std::nullopt;
}

// A profile that extends another with more or fewer units, or another boost clock, but gives no
// peaks of its own would inherit its parent's peaks, wrong by that ratio. The figures that scale
// with units x clock (vector and matrix TFLOPS, shared-memory bandwidth) are rescaled where the
// child does not set them, each with a source saying so, and `derived` gets one line naming them.
void rescale_inherited_peaks(const YAML::Node& base, const YAML::Node& child, YAML::Node& merged,
                             const std::string& parent, std::vector<std::string>* derived) {
  // Only well-formed mappings are touched: anything else is left for the schema check to report
  // (operator[] of an absent key on a const node is not a node to ask more of, hence the guards).
  if (!base["compute"] || !child["compute"] || !merged["compute"] || !merged["sources"]) return;
  const YAML::Node bc = base["compute"], cc = child["compute"];
  if (!bc.IsMap() || !cc.IsMap() || !merged["compute"].IsMap() || !merged["sources"].IsMap()) return;
  const auto bu = finite_number(bc["units"]), bclk = finite_number(bc["boost_clock_mhz"]);
  if (!bu || !bclk || *bu <= 0 || *bclk <= 0) return;
  const double cu = finite_number(cc["units"]).value_or(*bu), cclk = finite_number(cc["boost_clock_mhz"]).value_or(*bclk);
  if (cu <= 0 || cclk <= 0) return;  // refused by the schema
  const double ratio = (cu * cclk) / (*bu * *bclk);
  if (std::abs(ratio - 1.0) < 1e-9) return;
  const std::string why = fmt::format("{}'s figure scaled by units x boost clock, ({:g} x {:g} MHz) / ({:g} x {:g} MHz) "
                                      "= {:.4g}: this profile changes them without giving its own",
                                      parent, cu, cclk, *bu, *bclk, ratio);
  YAML::Node mc = merged["compute"];
  YAML::Node sources = merged["sources"];
  const auto scaled = [&](double v) { return std::round(v * ratio * 1e4) / 1e4; };
  std::vector<std::string> names;
  bool derived_l2 = false;
  const bool child_vector = static_cast<bool>(cc["vector_tflops"]);
  if (bc["vector_tflops"] && bc["vector_tflops"].IsMap() && mc["vector_tflops"].IsMap() &&
      (!child_vector || cc["vector_tflops"].IsMap())) {
    for (const auto& kv : bc["vector_tflops"]) {
      if (!kv.first.IsScalar()) continue;
      const std::string key = kv.first.Scalar();
      if (child_vector && cc["vector_tflops"][key]) continue;
      if (auto v = finite_number(kv.second)) {
        mc["vector_tflops"][key] = scaled(*v);
        sources["compute.vector_tflops." + key] = why;
        names.push_back("vector_tflops." + key);
      }
    }
  }
  if (cc["matrix_tflops"] && cc["matrix_tflops"].IsSequence() && mc["matrix_tflops"].IsSequence()) {
    // A partial list: the parent's entries it does not list were kept (merge_rate_lists) and scale.
    const size_t own = cc["matrix_tflops"].size();
    YAML::Node list = mc["matrix_tflops"];
    bool any = false;
    for (size_t i = own; i < list.size(); ++i) {
      YAML::Node e = list[i];
      if (!e.IsMap()) continue;
      if (auto v = finite_number(e["tflops"])) {
        e["tflops"] = scaled(*v);
        sources[fmt::format("compute.matrix_tflops[{}]", i)] = why;
        any = true;
      }
    }
    if (any) names.push_back("matrix_tflops (the types it does not list)");
  }
  if (!cc["matrix_tflops"] && bc["matrix_tflops"] && bc["matrix_tflops"].IsSequence()) {
    YAML::Node list(YAML::NodeType::Sequence);
    bool all_maps = true;
    for (const auto& m : bc["matrix_tflops"]) {
      if (!m.IsMap()) {
        all_maps = false;
        break;
      }
      YAML::Node e = YAML::Clone(m);
      if (auto v = finite_number(m["tflops"])) e["tflops"] = scaled(*v);
      list.push_back(e);
    }
    if (all_maps) {
      mc["matrix_tflops"] = list;
      sources["compute.matrix_tflops"] = why;
      names.push_back("matrix_tflops");
    }
  }
  if (!cc["shared_memory_bandwidth_gbps"]) {
    if (auto v = finite_number(bc["shared_memory_bandwidth_gbps"])) {
      mc["shared_memory_bandwidth_gbps"] = scaled(*v);
      sources["compute.shared_memory_bandwidth_gbps"] = why;
      names.push_back("shared_memory_bandwidth_gbps");
    }
  }
  // The L2's bandwidth runs at the core clock (its slices follow the memory bus, not the units).
  const YAML::Node bm = base["memory"], cm = child["memory"];
  YAML::Node mm = merged["memory"];
  const double clock_ratio = cclk / *bclk;
  if (std::abs(clock_ratio - 1.0) > 1e-9 && bm.IsMap() && bm["l2"] && bm["l2"].IsMap() && mm.IsMap() && mm["l2"] &&
      mm["l2"].IsMap() && !(cm.IsMap() && cm["l2"] && cm["l2"].IsMap() && cm["l2"]["bandwidth_gbps"])) {
    if (auto v = finite_number(bm["l2"]["bandwidth_gbps"])) {
      mm["l2"]["bandwidth_gbps"] = std::round(*v * clock_ratio * 1e4) / 1e4;
      sources["memory.l2.bandwidth_gbps"] =
          fmt::format("{}'s figure scaled by the boost clock, {:g} / {:g} MHz = {:.4g} (the L2 runs at the core clock): "
                      "this profile changes the clock without giving its own",
                      parent, cclk, *bclk, clock_ratio);
      derived_l2 = true;
    }
  }
  if (derived != nullptr && derived_l2) {
    derived->push_back(fmt::format("memory.l2.bandwidth_gbps rescaled from {} by the boost clock ({:g} / {:g} MHz); give "
                                   "this profile's own figure to override",
                                   parent, cclk, *bclk));
  }
  if (derived != nullptr && !names.empty()) {
    derived->push_back(fmt::format("compute.{{{}}} rescaled from {}: {:g} units at {:g} MHz against its {:g} at {:g} MHz "
                                   "(x{:.4g}); give this profile's own figures to override",
                                   fmt::join(names, ", "), parent, cu, cclk, *bu, *bclk, ratio));
  }
}

// ---- Families ----------------------------------------------------------------------------------
// A family (gpu_profiles/families/<name>.yaml, schema gpusim.family/1) holds what every chip of an
// architecture shares: per-unit resources, what a unit retires per clock in each precision, cache
// latencies in cycles, launch figures. A card that names it (`family:`) gives its datasheet numbers
// (units, clocks, memory, L2, power); its peaks are derived as units x rate per clock x boost clock.

// Every figure under `sections` of `doc` has a source (its path or a prefix of it in `sources`;
// the figures without one are listed in one problem), and every source names a path the document
// (`what`: profile, family) has. Checked when `sources` itself is a mapping the schema accepted.
void check_sources(const YAML::Node& doc, std::initializer_list<const char*> sections, const char* what, Validator& v) {
  if (!doc["sources"] || !doc["sources"].IsMap() || v.flagged("sources")) return;
  std::set<std::string> sources;
  for (const auto& kv : doc["sources"]) sources.insert(kv.first.Scalar());
  std::vector<std::string> figures, unsourced;
  std::set<std::string> paths;
  for (const char* section : sections) {
    if (doc[section]) figure_paths(doc[section], section, figures, paths);
  }
  for (const std::string& f : figures) {
    if (!covered(f, sources)) unsourced.push_back(f);
  }
  if (!unsourced.empty()) {
    const std::string& f = unsourced.front();
    constexpr size_t kListed = 4;
    const size_t listed = std::min(unsourced.size(), kListed);
    v.fail("sources", fmt::format("no source for {}{}; add a sources entry for {} or for a prefix such as \"{}\"",
                                  fmt::join(unsourced.begin(), unsourced.begin() + static_cast<long>(listed), ", "),
                                  unsourced.size() > listed ? fmt::format(" and {} more", unsourced.size() - listed) : "",
                                  unsourced.size() > 1 ? "each" : "it", f.substr(0, f.find_first_of(".["))));
  }
  for (const std::string& src : sources) {
    if (!paths.count(src) && !v.flagged(src)) {
      v.fail("sources." + src, fmt::format("names no figure in this {}; remove it or fix the path", what));
    }
  }
}

// The schema of a family file. `required` holds for the family with its parents merged; each file
// alone is checked with nothing required.
const Spec& family_schema() {
  static const Spec s = [] {
    const Spec& profile = schema();
    const auto child = [](const Spec& m, const std::string& k) {
      for (const Spec& c : m.children) {
        if (c.key == k) return c;
      }
      return Spec{};
    };
    Spec compute = child(profile, "compute");
    std::vector<Spec> resources;
    for (Spec c : compute.children) {
      static const std::set<std::string> kCardOnly = {"units", "boost_clock_mhz", "base_clock_mhz", "sustained_clock_mhz",
                                                      "vector_tflops", "matrix_tflops", "shared_memory_bandwidth_gbps"};
      if (kCardOnly.count(c.key)) continue;
      c.required = false;
      resources.push_back(c);
    }
    compute.children = resources;
    compute.required = false;
    std::vector<Spec> vector;
    for (const auto& p : kVectorPrecisions) vector.push_back(physical(p, 1e-3, 1e6));
    Spec matrix = {"matrix", Kind::kList, 0, 0, false, false, {},
                   {oneof("dtype", kMatrixInputs, true), oneof("accumulate", kAccumulates, true),
                    physical("per_clock", 1e-3, 1e7, true)}};
    Spec rates = map("rates", {map("vector", vector, true), matrix, physical("shared_memory_bytes_per_clock", 1, 1e4),
                               physical("l1_latency_cycles", 1, 1e5), physical("l2_latency_cycles", 1, 1e6),
                               num("idle_fraction", 0, 1, false, true)},
                     true);
    Spec memory = map("memory", {map("dram", {str("type"), physical("latency_ns", 1, 1e5)}),
                                 map("l1", {physical("size_per_unit_kb", 1, 1e4)})});
    Spec host = child(profile, "host_link");
    host.required = false;
    return map("", {oneof("schema", {"gpusim.family/1"}, true), str("name", true), str("extends"),
                    oneof("vendor", {"nvidia", "amd", "intel", "apple", "cpu"}, true), str("architecture", true),
                    compute, rates, memory, host, child(profile, "launch"),
                    {"sources", Kind::kStrMap, 0, 0, false, true, {}, {}}});
  }();
  return s;
}

Spec without_required(Spec s) {
  s.required = false;
  for (Spec& c : s.children) c = without_required(c);
  return s;
}

// The family file for `name`: <dir>/families/<name>.yaml, the first dir that has one.
std::string family_file(const std::string& name, const std::vector<std::string>& dirs) {
  if (name.empty() || name.find_first_of("/\\") != std::string::npos || name.starts_with(".")) return "";
  for (const std::string& d : dirs) {
    const fs::path f = fs::path(d) / "families" / (name + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(f, ec)) return f.string();
  }
  return "";
}

// The source a family gives for `path` (or the nearest prefix of it).
std::string source_of(const YAML::Node& sources, std::string path) {
  for (;;) {
    if (sources.IsMap() && sources[path] && sources[path].IsScalar()) return sources[path].Scalar();
    const auto cut = path.find_last_of(".[");
    if (cut == std::string::npos) return "";
    path = path.substr(0, cut);
  }
}

// n[key] when n is a mapping that has it, else an undefined node (false, and safe to ask anything):
// a const node's missing key is an invalid node that throws when asked more than whether it is.
YAML::Node at(const YAML::Node& n, const std::string& key) {
  if (n.IsMap() && n[key]) return n[key];
  return YAML::Node(YAML::NodeType::Undefined);
}

// Merges a family's `rates.matrix` lists by (dtype, accumulate): the child's entry replaces its
// parent's, the rest are kept.
YAML::Node merge_rate_lists(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsSequence() || !over.IsSequence()) return YAML::Clone(over);
  YAML::Node out = YAML::Clone(over);
  const auto key = [](const YAML::Node& e) {
    return e.IsMap() && e["dtype"].IsScalar() && e["accumulate"].IsScalar() ? e["dtype"].Scalar() + "/" + e["accumulate"].Scalar()
                                                                              : std::string();
  };
  for (const auto& b : base) {
    bool replaced = false;
    for (const auto& o : over) replaced = replaced || (!key(b).empty() && key(b) == key(o));
    if (!replaced) out.push_back(YAML::Clone(b));
  }
  return out;
}

// A family with its `extends:` parents merged and checked.
Result<YAML::Node> load_family_node(const std::string& name, const std::vector<std::string>& dirs, const std::string& from,
                               std::vector<std::string>& chain) {
  const std::string file = family_file(name, dirs);
  if (file.empty()) {
    std::vector<std::string> known = list_families(dirs);
    const std::vector<std::string> close = closest_names(name, known, 3);
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: family: \"{}\" is not a known family (searched families/ in {}); {}", from,
                                  name.substr(0, 64), fmt::join(dirs, ", "),
                                  known.empty() ? std::string("no families found")
                                                : fmt::format("closest: {} (`gpusim profiles families` lists all {})",
                                                              fmt::join(close, ", "), known.size())));
  }
  if (std::find(chain.begin(), chain.end(), name) != chain.end()) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: extends: \"{}\" forms a cycle ({} -> {}); remove one "
                                                               "of the extends",
                                                               file, name, fmt::join(chain, " -> "), name));
  }
  if (chain.size() > kMaxExtends) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: extends: a chain of more than {} families", file, kMaxExtends));
  }
  chain.push_back(name);
  auto node = read_yaml(file);
  if (!node) return node.error();
  {
    Validator alone(file);
    alone.collect(*node, without_required(family_schema()), "");
    if ((*node)["name"] && (*node)["name"].IsScalar() && (*node)["name"].Scalar() != name) {
      alone.fail("name", fmt::format("\"{}\" does not match the file name \"{}\"; rename one of them",
                                     (*node)["name"].Scalar(), name));
    }
    if (auto st = alone.result(); !st) return st.error();
  }
  YAML::Node merged = *node;
  if ((*node)["extends"]) {
    auto parent = load_family_node((*node)["extends"].Scalar(), dirs, file, chain);
    if (!parent) return parent.error();
    YAML::Node rates_list = at(at(*node, "rates"), "matrix");
    merged = merge(*parent, *node);
    if (rates_list && (*parent)["rates"] && (*parent)["rates"]["matrix"]) {
      merged["rates"]["matrix"] = merge_rate_lists((*parent)["rates"]["matrix"], rates_list);
    }
    merged.remove("extends");
  }
  Validator v(file);
  v.collect(merged, family_schema(), "");
  check_sources(merged, {"compute", "rates", "memory", "host_link", "launch"}, "family", v);
  if (auto st = v.result(); !st) return st.error();
  return merged;
}

double round4(double v) { return std::round(v * 1e4) / 1e4; }


// What a card inherits from its family: everything but the rates, the sources saying whose they are.
YAML::Node family_base(const YAML::Node& family, const std::string& name) {
  YAML::Node b(YAML::NodeType::Map);
  b["vendor"] = YAML::Clone(family["vendor"]);
  b["architecture"] = YAML::Clone(family["architecture"]);
  for (const char* key : {"compute", "memory", "host_link", "launch"}) {
    if (family[key]) b[key] = YAML::Clone(family[key]);
  }
  YAML::Node sources(YAML::NodeType::Map);
  for (const auto& kv : family["sources"]) {
    const std::string k = kv.first.Scalar();
    if (!k.starts_with("rates")) sources[k] = fmt::format("{} (family {})", kv.second.Scalar(), name);
  }
  b["sources"] = sources;
  return b;
}

// The figures a card derives from its family's rates where it does not state them: vector and
// matrix peaks (units x rate x boost clock), shared-memory bandwidth, L1 and L2 latencies (cycles
// at the boost clock), idle power (a fraction of TDP). Each gets a source with its formula.
void derive_from_family(const YAML::Node& family, const std::string& name, const YAML::Node& card, YAML::Node& merged,
                        std::vector<std::string>* derived) {
  const YAML::Node cc = card["compute"].IsMap() ? card["compute"] : YAML::Node(YAML::NodeType::Map);
  if (!merged["compute"].IsMap() || !merged["sources"].IsMap()) return;  // the schema check reports it
  YAML::Node mc = merged["compute"];
  const auto units = finite_number(at(mc, "units")), clock = finite_number(at(mc, "boost_clock_mhz"));
  if (!units || !clock || *units <= 0 || *clock <= 0) return;
  const YAML::Node rates = family["rates"];
  YAML::Node sources = merged["sources"];
  const YAML::Node fs = family["sources"];
  std::vector<std::string> names;
  const auto because = [&](double rate, const char* unit, const std::string& rate_path) {
    return fmt::format("derived: {:g} units x {:g} {} x {:g} MHz (family {}: {})", *units, rate, unit, *clock, name,
                       source_of(fs, rate_path));
  };
  if (at(rates, "vector").IsMap()) {
    if (!at(mc, "vector_tflops").IsMap()) mc["vector_tflops"] = YAML::Node(YAML::NodeType::Map);
    for (const auto& kv : rates["vector"]) {
      const std::string d = kv.first.Scalar();
      if (at(at(cc, "vector_tflops"), d)) continue;
      const auto rate = finite_number(kv.second);
      if (!rate) continue;
      mc["vector_tflops"][d] = round4(*units * *rate * *clock * 1e-6);
      sources["compute.vector_tflops." + d] = because(*rate, "FLOP/clock", "rates.vector." + d);
      names.push_back("vector_tflops." + d);
    }
  }
  if (at(rates, "matrix").IsSequence()) {
    // The card's entries first, as it wrote them (its sources name them by index), then the
    // family's for the (dtype, accumulate) pairs it does not state.
    YAML::Node list(YAML::NodeType::Sequence);
    std::set<std::string> stated;
    if (at(cc, "matrix_tflops").IsSequence()) {
      for (const auto& e : at(cc, "matrix_tflops")) {
        list.push_back(YAML::Clone(e));
        if (e.IsMap() && e["dtype"].IsScalar() && e["accumulate"].IsScalar()) {
          stated.insert(e["dtype"].Scalar() + "/" + e["accumulate"].Scalar());
        }
      }
    }
    for (size_t i = 0; i < rates["matrix"].size(); ++i) {
      const YAML::Node r = rates["matrix"][i];
      const auto rate = finite_number(r["per_clock"]);
      if (!rate || stated.count(r["dtype"].Scalar() + "/" + r["accumulate"].Scalar())) continue;
      YAML::Node e(YAML::NodeType::Map);
      e["dtype"] = r["dtype"].Scalar();
      e["accumulate"] = r["accumulate"].Scalar();
      e["tflops"] = round4(*units * *rate * *clock * 1e-6);
      sources[fmt::format("compute.matrix_tflops[{}]", list.size())] =
          because(*rate, "FLOP/clock", fmt::format("rates.matrix[{}]", i));
      list.push_back(e);
    }
    if (list.size() > 0) {
      mc["matrix_tflops"] = list;
      if (list.size() > stated.size()) names.push_back("matrix_tflops");
    }
  }
  if (const auto bytes = finite_number(at(rates, "shared_memory_bytes_per_clock")); bytes && !at(cc, "shared_memory_bandwidth_gbps")) {
    mc["shared_memory_bandwidth_gbps"] = round4(*units * *bytes * *clock * 1e-3);
    sources["compute.shared_memory_bandwidth_gbps"] = because(*bytes, "B/clock", "rates.shared_memory_bytes_per_clock");
    names.push_back("shared_memory_bandwidth_gbps");
  }
  const YAML::Node cm = card["memory"].IsMap() ? card["memory"] : YAML::Node(YAML::NodeType::Map);
  YAML::Node mm = merged["memory"];
  for (const char* level : {"l1", "l2"}) {
    const auto cycles = finite_number(at(rates, std::string(level) + "_latency_cycles"));
    if (!cycles || !mm.IsMap() || !mm[level].IsMap() || at(at(cm, level), "latency_ns")) continue;
    mm[level]["latency_ns"] = round4(*cycles * 1e3 / *clock);
    sources[fmt::format("memory.{}.latency_ns", level)] =
        fmt::format("derived: {:g} cycles at {:g} MHz (family {}: {})", *cycles, *clock, name,
                    source_of(fs, std::string("rates.") + level + "_latency_cycles"));
    names.push_back(std::string("memory.") + level + ".latency_ns");
  }
  if (const auto idle = finite_number(at(rates, "idle_fraction"));
      idle && merged["power"].IsMap() && !at(merged["power"], "idle_w")) {
    if (const auto tdp = finite_number(at(merged["power"], "tdp_w")); tdp && *tdp > 0) {
      merged["power"]["idle_w"] = round4(*tdp * *idle);
      sources["power.idle_w"] = fmt::format("derived: {:g} x TDP {:g} W (family {}: {})", *idle, *tdp, name,
                                            source_of(fs, "rates.idle_fraction"));
      names.push_back("power.idle_w");
    }
  }
  if (derived != nullptr && !names.empty()) {
    derived->push_back(fmt::format("{} derived from family {}'s rates per clock at {:g} units and {:g} MHz; state a "
                                   "figure in the profile to override it",
                                   fmt::join(names, ", "), name, *units, *clock));
  }
}

// A card's stated peaks against its family's rates: a peak is units x rate per clock x boost clock,
// within 2% (datasheets round). A figure off by more is a slip in the figure, the units or the clock.
void check_peaks(const YAML::Node& family, const std::string& name, const YAML::Node& merged, Validator& v) {
  const YAML::Node c = merged["compute"];
  if (!c.IsMap() || v.flagged("compute.units") || v.flagged("compute.boost_clock_mhz")) return;
  const auto units = finite_number(at(c, "units")), clock = finite_number(at(c, "boost_clock_mhz"));
  if (!units || !clock) return;
  const auto check = [&](const std::string& path, const YAML::Node& value, double rate) {
    const auto stated = finite_number(value);
    if (!stated || v.flagged(path)) return;
    const double want = *units * rate * *clock * 1e-6;
    if (std::abs(*stated / want - 1.0) <= 0.02) return;
    v.fail(path, fmt::format("{} TFLOPS is not {:g} units x {:g} FLOP/clock (family {}) x {:g} MHz = {:.4g} TFLOPS; fix "
                             "the figure, compute.units or compute.boost_clock_mhz, or leave the figure out to have "
                             "it derived",
                             value.Scalar(), *units, rate, name, *clock, want));
  };
  const YAML::Node rates = family["rates"];
  if (at(c, "vector_tflops").IsMap() && at(rates, "vector").IsMap()) {
    for (const auto& kv : c["vector_tflops"]) {
      if (const auto rate = finite_number(at(rates["vector"], kv.first.Scalar()))) {
        check("compute.vector_tflops." + kv.first.Scalar(), kv.second, *rate);
      }
    }
  }
  if (at(c, "matrix_tflops").IsSequence() && at(rates, "matrix").IsSequence()) {
    for (size_t i = 0; i < c["matrix_tflops"].size(); ++i) {
      const YAML::Node e = c["matrix_tflops"][i];
      if (!e.IsMap() || !e["dtype"].IsScalar() || !e["accumulate"].IsScalar()) continue;
      for (const auto& r : rates["matrix"]) {
        if (r["dtype"].Scalar() != e["dtype"].Scalar() || r["accumulate"].Scalar() != e["accumulate"].Scalar()) continue;
        if (const auto rate = finite_number(at(r, "per_clock"))) {
          check(fmt::format("compute.matrix_tflops[{}].tflops", i), at(e, "tflops"), *rate);
        }
      }
    }
  }
}

// The family a profile (or the nearest of its parents) names, for the checks after the merge.
struct FamilyUse {
  std::string name;
  YAML::Node node;
};

// What a profile that extends another inherits besides the deep merge: a `matrix_tflops` list it
// gives in part keeps the parent's other types (by dtype and accumulate), and a figure it sets
// without a source of its own is marked so, instead of showing the parent's source for the
// parent's value.
void inherit_lists_and_sources(const YAML::Node& base, const YAML::Node& child, YAML::Node& merged,
                               const std::string& parent, std::vector<std::string>* derived) {
  const YAML::Node bc = at(base, "compute"), cc = at(child, "compute");
  if (bc.IsMap() && cc.IsMap() && merged["compute"].IsMap() && at(bc, "matrix_tflops").IsSequence() &&
      at(cc, "matrix_tflops").IsSequence()) {
    const YAML::Node list = merge_rate_lists(bc["matrix_tflops"], cc["matrix_tflops"]);
    if (list.size() > cc["matrix_tflops"].size() && derived != nullptr) {
      derived->push_back(fmt::format("compute.matrix_tflops: the {} type(s) this profile does not list kept from {}",
                                     list.size() - cc["matrix_tflops"].size(), parent));
    }
    merged["compute"]["matrix_tflops"] = list;
  }
  if (!merged["sources"] || !merged["sources"].IsMap()) return;
  std::set<std::string> own, inherited;
  if (const YAML::Node cs = at(child, "sources"); cs.IsMap()) {
    for (const auto& kv : cs) own.insert(kv.first.Scalar());
  }
  if (const YAML::Node bs = at(base, "sources"); bs.IsMap()) {
    for (const auto& kv : bs) inherited.insert(kv.first.Scalar());
  }
  std::vector<std::string> figures;
  std::set<std::string> paths;
  for (const char* section : {"compute", "memory", "host_link", "launch", "power"}) {
    if (child.IsMap() && child[section]) figure_paths(child[section], section, figures, paths);
  }
  YAML::Node sources = merged["sources"];
  for (const std::string& f : figures) {
    if (covered(f, own) || !covered(f, inherited)) continue;
    std::string key = f;
    while (!inherited.count(key)) key = key.substr(0, key.find_last_of(".["));
    sources[f] = fmt::format("unsourced: set by this profile, which gives no source for it ({}'s source for {} is for "
                             "{}'s value: {})",
                             parent, key, parent, base["sources"][key].IsScalar() ? base["sources"][key].Scalar() : "");
  }
}

// `text`: the profile's YAML when it comes from memory (then `path` only names it in messages).
// `derived` (may be null) hears of figures computed rather than inherited as written.
Result<YAML::Node> load_merged(const std::string& path, const std::vector<std::string>& dirs,
                               std::vector<std::string>& chain, const std::string* text = nullptr,
                               std::vector<std::string>* derived = nullptr, FamilyUse* family = nullptr) {
  auto node = text != nullptr ? parse_yaml_text(*text, path) : read_yaml(path);
  if (!node) return node.error();
  if (chain.empty()) chain.push_back(fs::path(path).stem().string());
  if ((*node)["family"]) {
    if ((*node)["extends"]) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: family: a profile takes its figures from a family or from the profile it "
                                    "extends, not both; remove one of family and extends",
                                    path));
    }
    if (!(*node)["family"].IsScalar()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: family: is not a family name; expected the name of a file in "
                                    "gpu_profiles/families/ (`gpusim profiles families` lists them)",
                                    path));
    }
    const std::string name = (*node)["family"].Scalar();
    std::vector<std::string> family_chain;
    auto fam = load_family_node(name, dirs, path, family_chain);
    if (!fam) return fam.error();
    YAML::Node merged = merge(family_base(*fam, name), *node);
    merged.remove("family");
    try {
      derive_from_family(*fam, name, *node, merged, derived);
    } catch (const YAML::Exception&) {
      // A shape the guards did not foresee: nothing is derived, and the schema check names the problem.
    }
    if (family != nullptr) *family = {name, *fam};
    return merged;
  }
  if (!(*node)["extends"]) return node;
  if (!(*node)["extends"].IsScalar()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: extends: is not a profile name; expected the name of the profile to inherit", path));
  }
  const std::string parent = (*node)["extends"].Scalar();
  if (chain.size() > kMaxExtends) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: extends: a chain of more than {} profiles ({} -> ...); "
                                                     "extend a datasheet profile directly",
                                                     path, kMaxExtends, fmt::join(chain.begin(), chain.begin() + 3, " -> ")));
  }
  if (std::find(chain.begin(), chain.end(), parent) != chain.end()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: extends: \"{}\" forms a cycle ({} -> {}); remove one of the extends",
                                  path, parent, fmt::join(chain, " -> "), parent));
  }
  std::string parent_path;
  for (const ProfileEntry& e : list_profiles(dirs)) {
    if (e.name == parent) parent_path = e.path;
  }
  if (parent_path.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: extends: \"{}\" is not a known profile (searched {})", path, parent,
                                  fmt::join(dirs, ", ")));
  }
  chain.push_back(parent);
  auto base = load_merged(parent_path, dirs, chain, nullptr, derived, family);
  if (!base) return base.error();
  Validator parent_check(parent_path);
  parent_check.collect(*base, schema(), "");
  if (auto st = parent_check.result(); !st) return st.error();
  YAML::Node merged = merge(*base, *node);
  merged.remove("extends");
  try {
    inherit_lists_and_sources(*base, *node, merged, parent, derived);
    rescale_inherited_peaks(*base, *node, merged, parent, derived);
  } catch (const YAML::Exception&) {
    // A shape the guards above did not foresee: nothing is rescaled, and the schema check that
    // follows names what is wrong with the profile.
  }
  return merged;
}

}  // namespace

namespace {
Result<GpuProfile> load_profile_from(const std::string& path, const std::vector<std::string>& dirs,
                                     const std::string* text);
}  // namespace

Result<GpuProfile> load_profile(const std::string& path, const std::vector<std::string>& dirs) {
  return load_profile_from(path, dirs, nullptr);
}

Result<GpuProfile> load_profile_yaml(const std::string& text, const std::string& source,
                                     const std::vector<std::string>& dirs) {
  return load_profile_from(source, dirs, &text);
}

namespace {

Result<GpuProfile> load_profile_from(const std::string& path, const std::vector<std::string>& dirs,
                                     const std::string* text) {
  std::vector<std::string> chain, derived;
  FamilyUse family;
  auto y = load_merged(path, dirs, chain, text, &derived, &family);
  if (!y) return y.error();
  // Every problem at once: the schema, then the checks across fields (on the values that are
  // numbers; a value the schema refused is reported once, by the schema).
  Validator v(path);
  v.collect(*y, schema(), "");
  // A value the schema accepted, as a number; nothing where the schema reported a problem at it.
  const auto number = [&v](const YAML::Node& n, const std::string& at) -> std::optional<double> {
    if (v.flagged(at)) return std::nullopt;
    return finite_number(n);
  };
  const std::string stem = fs::path(path).stem().string();
  const YAML::Node name = (*y)["name"];
  if ((text == nullptr || fs::path(path).extension() == ".yaml") && name && name.IsScalar() && name.Scalar() != stem) {
    v.fail("name", fmt::format("\"{}\" does not match the file name \"{}\"; rename one of them", name.Scalar(), stem));
  }
  const YAML::Node power = (*y)["power"];
  if (power.IsMap()) {
    const auto idle = number(power["idle_w"], "power.idle_w"), tdp = number(power["tdp_w"], "power.tdp_w");
    if (idle && tdp && *idle >= *tdp) {
      v.fail("power.idle_w", fmt::format("{} is not below tdp_w ({})", power["idle_w"].Scalar(), power["tdp_w"].Scalar()));
    }
  }
  const YAML::Node c = (*y)["compute"];
  if (c.IsMap()) {
    const auto block = number(c["shared_memory_per_block_kb"], "compute.shared_memory_per_block_kb");
    const auto unit = number(c["shared_memory_per_unit_kb"], "compute.shared_memory_per_unit_kb");
    if (block && unit && *block > *unit) {
      v.fail("compute.shared_memory_per_block_kb",
             fmt::format("{} exceeds shared_memory_per_unit_kb ({})", c["shared_memory_per_block_kb"].Scalar(),
                         c["shared_memory_per_unit_kb"].Scalar()));
    }
    // The base and sustained clocks lie at or below the boost clock the peaks are quoted at. (A
    // calibrated sustained clock is a measurement and may exceed the datasheet boost clock.)
    const auto boost = number(c["boost_clock_mhz"], "compute.boost_clock_mhz");
    for (const char* key : {"base_clock_mhz", "sustained_clock_mhz"}) {
      const auto clock = number(c[key], std::string("compute.") + key);
      if (clock && boost && *clock > *boost) {
        v.fail(std::string("compute.") + key,
               fmt::format("{} exceeds boost_clock_mhz ({}); it must be at most the boost clock: {}", c[key].Scalar(),
                           c["boost_clock_mhz"].Scalar(),
                           std::string(key) == "base_clock_mhz"
                               ? "give the datasheet base clock, or fix boost_clock_mhz"
                               : "give the clock held under sustained load, or omit it to have it derived"));
      }
    }
  }
  const YAML::Node h = (*y)["host_link"];
  if (h.IsMap() && !v.flagged("host_link") && h["type"].IsScalar() && h["type"].Scalar() == "pcie" &&
      !(h["bandwidth_gbps"] || (h["generation"] && h["lanes"]))) {
    v.fail("host_link", "a pcie link needs generation and lanes (or bandwidth_gbps)");
  }
  check_sources(*y, {"compute", "memory", "host_link", "launch", "power"}, "profile", v);
  if (!family.name.empty()) {
    try {
      check_peaks(family.node, family.name, *y, v);
    } catch (const YAML::Exception&) {
      // Shapes the schema refused are reported by it.
    }
  }
  if (auto st = v.result(); !st) return st.error();
  GpuProfile p = convert(*y);
  p.family = family.name;
  // Efficiencies the profile does not set come from its vendor's fitted defaults, if any.
  auto defaults = load_vendor_efficiency(dirs);
  if (!defaults) return defaults.error();
  const YAML::Node own = (*y)["efficiency"];
  auto apply = [&](const std::map<std::string, double>& figs, const std::string& whose) {
    for (const auto& [key, field] : efficiency_fields()) {
      auto f = figs.find(key);
      if (f == figs.end() || (own && own[key])) continue;
      p.efficiency.*field = f->second;
      p.sources[std::string("efficiency.") + key] = fmt::format("fitted for {} in {} ({})", whose, defaults->path,
                                                                defaults->command);
    }
  };
  if (auto it = defaults->vendors.find(p.vendor); it != defaults->vendors.end()) apply(it->second, p.vendor + " GPUs");
  if (auto it = defaults->measured.find(architecture_family(p)); it != defaults->measured.end()) {
    for (const auto& [key, field] : efficiency_fields()) {
      auto f = it->second.find(key);
      if (f == it->second.end() || (own && own[key])) continue;
      p.efficiency.*field = f->second;
      p.sources[std::string("efficiency.") + key] =
          fmt::format("measured for {} GPUs: {} ({})", it->first, defaults->measured_sources[it->first], defaults->path);
    }
  }
  if (auto it = defaults->architectures.find(architecture_family(p)); it != defaults->architectures.end()) {
    apply(it->second, it->first + " GPUs");
  }
  p.source_path = path;
  p.extends_chain.assign(chain.begin() + (chain.empty() ? 0 : 1), chain.end());  // parents only
  for (std::string& d : derived) p.assumptions.push_back(std::move(d));
  if ((*y)["calibrated"]) apply_calibration((*y)["calibrated"], p);
  apply_assumptions(p);
  return p;
}

}  // namespace

Result<ProfileFamily> load_family(const std::string& name, const std::vector<std::string>& dirs) {
  std::vector<std::string> chain;
  auto node = load_family_node(name, dirs, "family", chain);
  if (!node) return node.error();
  ProfileFamily f;
  f.name = name;
  f.path = family_file(name, dirs);
  f.vendor = (*node)["vendor"].Scalar();
  f.architecture = (*node)["architecture"].Scalar();
  f.extends_chain.assign(chain.begin() + 1, chain.end());
  for (const auto& kv : (*node)["rates"]["vector"]) f.vector_per_clock[prec(kv.first)] = kv.second.as<double>();
  if ((*node)["rates"]["matrix"]) {
    for (const auto& m : (*node)["rates"]["matrix"]) {
      f.matrix_per_clock.push_back({prec(m["dtype"]), prec(m["accumulate"]), m["per_clock"].as<double>()});
    }
  }
  for (const auto& kv : (*node)["sources"]) f.sources[kv.first.Scalar()] = kv.second.Scalar();
  return f;
}

Result<std::string> new_profile_yaml(const NewProfile& spec, const std::vector<std::string>& dirs) {
  auto family = load_family(spec.family, dirs);
  if (!family) return family.error();
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "schema" << YAML::Value << "gpusim.profile/1";
  out << YAML::Key << "name" << YAML::Value << spec.name;
  out << YAML::Key << "family" << YAML::Value << spec.family;
  out << YAML::Key << "display_name" << YAML::Value << (spec.display_name.empty() ? spec.name : spec.display_name);
  if (!spec.device_names.empty()) {
    out << YAML::Key << "device_names" << YAML::Value << YAML::Flow << spec.device_names;
  }
  if (!spec.architecture.empty()) out << YAML::Key << "architecture" << YAML::Value << spec.architecture;
  const auto number = [&](const char* key, double v) {
    if (v > 0) out << YAML::Key << key << YAML::Value << fmt::format("{}", v);
  };
  std::vector<std::string> given;  // the sections the source covers
  out << YAML::Key << "compute" << YAML::Value << YAML::BeginMap;
  number("units", spec.units);
  number("boost_clock_mhz", spec.boost_clock_mhz);
  number("base_clock_mhz", spec.base_clock_mhz);
  out << YAML::EndMap;
  given.push_back("compute");
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dram" << YAML::Value << YAML::Flow << YAML::BeginMap;
  number("size_gb", spec.memory_gb);
  number("bandwidth_gbps", spec.bandwidth_gbps);
  number("bus_width_bits", spec.bus_width_bits);
  if (!spec.memory_type.empty()) out << YAML::Key << "type" << YAML::Value << spec.memory_type;
  out << YAML::EndMap;
  given.push_back("memory.dram");
  if (spec.l2_mb > 0) {
    out << YAML::Key << "l2" << YAML::Value << YAML::Flow << YAML::BeginMap;
    number("size_mb", spec.l2_mb);
    out << YAML::EndMap;
    given.push_back("memory.l2");
  }
  if (spec.last_level_cache_mb > 0) {
    out << YAML::Key << "infinity_cache" << YAML::Value << YAML::Flow << YAML::BeginMap;
    number("size_mb", spec.last_level_cache_mb);
    out << YAML::EndMap;
    given.push_back("memory.infinity_cache");
  }
  out << YAML::EndMap;
  if (!spec.host_link.empty()) {
    out << YAML::Key << "host_link" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << spec.host_link;
    number("generation", spec.pcie_generation);
    number("lanes", spec.pcie_lanes);
    out << YAML::EndMap;
    given.push_back("host_link");
  }
  if (spec.tdp_w > 0 || spec.idle_w > 0) {
    out << YAML::Key << "power" << YAML::Value << YAML::Flow << YAML::BeginMap;
    number("tdp_w", spec.tdp_w);
    number("idle_w", spec.idle_w);
    out << YAML::EndMap;
    if (spec.tdp_w > 0) given.push_back("power.tdp_w");
    if (spec.idle_w > 0) given.push_back("power.idle_w");
  }
  out << YAML::Key << "sources" << YAML::Value << YAML::BeginMap;
  const std::string source = spec.source.empty() ? std::string("stated by whoever wrote this profile (no source given)")
                                                 : spec.source;
  for (const std::string& g : given) out << YAML::Key << g << YAML::Value << YAML::DoubleQuoted << source;
  out << YAML::EndMap;
  out << YAML::EndMap;
  std::string text = std::string(out.c_str()) + "\n";
  // Checked as the file it will be: every figure in range, a host link, the peaks derivable.
  auto loaded = load_profile_yaml(text, spec.name + ".yaml", dirs);
  if (!loaded) return loaded.error();
  return text;
}

std::string architecture_family(const GpuProfile& p) {
  std::string out;
  for (char c : p.architecture) {
    if (c == ' ' || c == '(' || c == ',') {
      if (!out.empty()) break;
      continue;
    }
    if (c != '"') out += c;
  }
  return out;
}

Result<VendorEfficiency> load_vendor_efficiency(const std::vector<std::string>& dirs) {
  VendorEfficiency out;
  std::string path;
  for (const std::string& d : dirs) {
    const fs::path f = fs::path(d) / kVendorEfficiencyFile;
    std::error_code ec;  // an unreadable folder is skipped (list_profiles warns about it)
    if (fs::is_regular_file(f, ec)) {
      path = f.string();
      break;
    }
  }
  if (path.empty()) return out;
  out.path = path;
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not valid YAML ({}); fix the file or delete it (profiles "
                                                     "then use the built-in efficiency defaults)",
                                                     path, e.what()));
  }
  auto fail = [&](const std::string& key, const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", path, key, why));
  };
  if (!y.IsMap() || !y["schema"] || y["schema"].as<std::string>("") != "gpusim.efficiency/1") {
    return fail("schema", "expected \"gpusim.efficiency/1\"");
  }
  if (y["command"]) out.command = y["command"].as<std::string>("");
  const YAML::Node v = y["vendors"];
  if (!v || !v.IsMap()) return fail("vendors", "missing or not a map of vendor -> efficiency figures");
  for (const char* section : {"vendors", "architectures", "measured"}) {
    const YAML::Node sec = y[section];
    if (!sec) continue;
    if (!sec.IsMap()) return fail(section, "is not a map of name -> efficiency figures");
    for (const auto& kv : sec) {
      const std::string name = kv.first.as<std::string>("");
      const std::string at = fmt::format("{}.{}", section, name);
      if (!kv.second.IsMap()) return fail(at, "is not a map of efficiency figures");
      for (const auto& fig : kv.second) {
        const std::string key = fig.first.as<std::string>("");
        if (std::string(section) == "measured" && key == "source") {
          out.measured_sources[name] = fig.second.as<std::string>("");
          continue;
        }
        const bool known = std::any_of(efficiency_fields().begin(), efficiency_fields().end(),
                                       [&](const auto& f) { return key == f.first; });
        if (!known) {
          std::vector<std::string> names;
          for (const auto& f : efficiency_fields()) names.emplace_back(f.first);
          return fail(at + "." + key, fmt::format("unknown figure; allowed: {}", fmt::join(names, ", ")));
        }
        double x = 0;
        try {
          x = fig.second.as<double>();
        } catch (const YAML::Exception&) {
          return fail(at + "." + key, fmt::format("\"{}\" is not a number", fig.second.Scalar()));
        }
        if (!(x > 0 && x <= 1)) {
          return fail(at + "." + key, fmt::format("{} is out of range; an efficiency is a fraction of the peak in (0, 1]", x));
        }
        const std::string which(section);
        (which == "vendors" ? out.vendors : which == "architectures" ? out.architectures : out.measured)[name][key] = x;
      }
      if (std::string(section) == "measured" && out.measured_sources[name].empty()) {
        return fail(at + ".source", "missing: a measured figure names the benchmark and the GPU it was measured on");
      }
    }
  }
  return out;
}


// ---- The writer beside the reader ---------------------------------------------------------------

namespace {

// A number as its shortest text that reads back to the same double.
std::string number_text(double v) { return fmt::format("{}", v); }

// One field of the document: its dotted key (as calibrated figures and sources name it) and its
// value as YAML, or a null node when the profile does not give it (an absent optional figure).
struct Field {
  std::string key;
  YAML::Node value;
};

YAML::Node scalar(double v) { return YAML::Node(number_text(v)); }
YAML::Node scalar_int(int64_t v) { return YAML::Node(std::to_string(v)); }
YAML::Node positive_or_null(double v) { return v > 0 ? scalar(v) : YAML::Node(); }

std::vector<Field> fields_of(const GpuProfile& p) {
  const ComputeSpec& c = p.compute;
  std::vector<Field> f = {
      {"compute.units", scalar_int(c.units)},
      {"compute.boost_clock_mhz", scalar(c.boost_clock_mhz)},
      {"compute.base_clock_mhz", positive_or_null(c.base_clock_mhz)},
      {"compute.sustained_clock_mhz", positive_or_null(c.sustained_clock_mhz)},
      {"compute.warp_size", scalar_int(c.warp_size)},
      {"compute.max_threads_per_unit", scalar_int(c.max_threads_per_unit)},
      {"compute.max_blocks_per_unit", scalar_int(c.max_blocks_per_unit)},
      {"compute.max_threads_per_block", scalar_int(c.max_threads_per_block)},
      {"compute.registers_per_unit", scalar_int(c.registers_per_unit)},
      {"compute.max_registers_per_thread", scalar_int(c.max_registers_per_thread)},
      {"compute.shared_memory_per_unit_kb", scalar(c.shared_memory_per_unit_kb)},
      {"compute.shared_memory_per_block_kb", scalar(c.shared_memory_per_block_kb)},
      {"compute.shared_memory_bandwidth_gbps", positive_or_null(c.shared_memory_bandwidth_gbps)},
      {"compute.barrier_ns", c.barrier_ns > 0 ? scalar(c.barrier_ns) : YAML::Node()},
  };
  YAML::Node vec(YAML::NodeType::Map);
  for (const auto& [prec, t] : c.vector_tflops) vec[std::string(precision_name(prec))] = number_text(t);
  f.push_back({"compute.vector_tflops", vec});
  if (!c.matrix_tflops.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const MatrixPeak& m : c.matrix_tflops) {
      YAML::Node e(YAML::NodeType::Map);
      e["dtype"] = std::string(precision_name(m.input));
      e["accumulate"] = std::string(precision_name(m.accumulate));
      e["tflops"] = number_text(m.tflops);
      e.SetStyle(YAML::EmitterStyle::Flow);
      list.push_back(e);
    }
    f.push_back({"compute.matrix_tflops", list});
  }
  f.push_back({"compute.matrix_alignment_elements", scalar_int(c.matrix_alignment_elements)});
  f.push_back({"compute.matrix_units", YAML::Node(c.matrix_on_alus ? "alus" : "dedicated")});
  const MemorySpec& m = p.memory;
  f.push_back({"memory.dram.size_gb", scalar(m.dram.size_gb)});
  f.push_back({"memory.dram.bandwidth_gbps", scalar(m.dram.bandwidth_gbps)});
  f.push_back({"memory.dram.bus_width_bits", m.dram.bus_width_bits > 0 ? scalar_int(m.dram.bus_width_bits) : YAML::Node()});
  f.push_back({"memory.dram.type", m.dram.type.empty() ? YAML::Node() : YAML::Node(m.dram.type)});
  f.push_back({"memory.dram.latency_ns", positive_or_null(m.dram.latency_ns)});
  for (const auto& [name, cache] : {std::pair<const char*, const CacheSpec*>{"l2", &m.l2}, {"infinity_cache", &m.infinity_cache}}) {
    if (!cache->present) continue;
    f.push_back({fmt::format("memory.{}.size_mb", name), scalar(cache->size_mb)});
    f.push_back({fmt::format("memory.{}.bandwidth_gbps", name), positive_or_null(cache->bandwidth_gbps)});
    f.push_back({fmt::format("memory.{}.latency_ns", name), positive_or_null(cache->latency_ns)});
  }
  f.push_back({"memory.l1.size_per_unit_kb", scalar(m.l1.size_per_unit_kb)});
  f.push_back({"memory.l1.latency_ns", positive_or_null(m.l1.latency_ns)});
  const HostLinkSpec& h = p.host_link;
  f.push_back({"host_link.type", YAML::Node(h.unified ? "unified" : "pcie")});
  f.push_back({"host_link.generation", h.generation > 0 ? scalar_int(h.generation) : YAML::Node()});
  f.push_back({"host_link.lanes", h.lanes > 0 ? scalar_int(h.lanes) : YAML::Node()});
  f.push_back({"host_link.bandwidth_gbps", positive_or_null(h.bandwidth_gbps)});
  f.push_back({"launch.overhead_us", p.launch.overhead_us >= 0 ? scalar(p.launch.overhead_us) : YAML::Node()});
  f.push_back({"launch.latency_floor_us", p.launch.latency_floor_us >= 0 ? scalar(p.launch.latency_floor_us) : YAML::Node()});
  f.push_back({"launch.block_us", p.launch.block_us > 0 ? scalar(p.launch.block_us) : YAML::Node()});
  f.push_back({"power.tdp_w", scalar(p.power.tdp_w)});
  f.push_back({"power.idle_w", scalar(p.power.idle_w)});
  for (const auto& [key, field] : efficiency_fields()) {
    const double v = p.efficiency.*field;
    f.push_back({std::string("efficiency.") + key, v > 0 ? scalar(v) : YAML::Node()});
  }
  return f;
}

bool same(const YAML::Node& a, const YAML::Node& b) {
  if (!a || !b || a.IsNull() || b.IsNull()) return (!a || a.IsNull()) == (!b || b.IsNull());
  YAML::Emitter ea, eb;
  ea << a;
  eb << b;
  return std::string(ea.c_str()) == eb.c_str();
}

// Sets doc[a][b][c] for the dotted key "a.b.c".
void put(YAML::Node doc, const std::string& key, const YAML::Node& value) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    doc[key] = value;
    return;
  }
  const std::string head = key.substr(0, dot);
  if (!doc[head]) doc[head] = YAML::Node(YAML::NodeType::Map);
  put(doc[head], key.substr(dot + 1), value);
}

}  // namespace

std::string profile_to_yaml(const GpuProfile& p, const GpuProfile* base, const std::string& comment) {
  YAML::Node doc(YAML::NodeType::Map);
  doc["schema"] = "gpusim.profile/1";
  doc["name"] = p.name;
  doc["display_name"] = p.display_name;
  if (!p.device_names.empty() && !(base && base->device_names == p.device_names)) doc["device_names"] = p.device_names;
  doc["vendor"] = p.vendor;
  doc["architecture"] = p.architecture;
  if (base) doc["extends"] = base->name;
  // What the calibrated block sets is written there, not again above it (in a document that
  // extends a base).
  std::set<std::string> calibrated;
  if (p.calibrated) {
    for (const auto& [key, fig] : p.calibrated->figures) calibrated.insert(key);
  }
  const std::vector<Field> mine = fields_of(p);
  const std::vector<Field> theirs = base ? fields_of(*base) : std::vector<Field>{};
  auto differs = [&](const Field& f) {
    auto it = std::find_if(theirs.begin(), theirs.end(), [&](const Field& t) { return t.key == f.key; });
    return it == theirs.end() || !same(it->value, f.value);
  };
  // The loader rescales inherited peaks when a child changes units or clocks: a child that
  // changes them states its peaks, so they read back as they are.
  bool peaks = false;
  for (const Field& f : mine) {
    const bool sets_peaks = f.key == "compute.units" || f.key.ends_with("clock_mhz");
    if (base && sets_peaks && differs(f)) peaks = true;
  }
  // A whole document writes the figures the profile has a source for (and its efficiencies): the
  // ones it had to assume or left at their defaults read back the same without being written.
  auto sourced = [&](const std::string& key) {
    if (key.starts_with("efficiency.")) return true;
    for (const auto& [k, v] : p.sources) {
      if (k.starts_with(key + ".")) return true;  // a source for one entry of a map or list
    }
    for (std::string k = key;;) {
      if (p.sources.count(k)) return true;
      const size_t dot = k.rfind('.');
      if (dot == std::string::npos) return false;
      k.resize(dot);
    }
  };
  std::vector<std::string> written;  // the figures this document states
  for (const Field& f : mine) {
    if (!f.value || f.value.IsNull()) continue;
    if (base && calibrated.count(f.key)) continue;  // a whole document also states them: some are required
    if (!base && !sourced(f.key) && !calibrated.count(f.key)) continue;
    const bool peak = f.key == "compute.vector_tflops" || f.key == "compute.matrix_tflops";
    if (base && !(peak && peaks) && !differs(f)) continue;
    put(doc, f.key, f.value);
    written.push_back(f.key);
  }
  if (p.calibrated) {
    const Calibration& c = *p.calibrated;
    YAML::Node cal(YAML::NodeType::Map);
    cal["device"] = c.device;
    cal["driver"] = c.driver;
    cal["date"] = c.date;
    if (!c.command.empty()) cal["command"] = c.command;
    if (!c.measurements.empty()) cal["measurements"] = c.measurements;
    for (const char* group : {"efficiency", "launch", "memory", "compute"}) {
      for (const auto& [key, fig] : c.figures) {
        const size_t dot = key.find('.');
        if (key.substr(0, dot) != group) continue;
        YAML::Node e(YAML::NodeType::Map);
        e["value"] = number_text(fig.value);
        if (fig.repeats > 0) {
          e["p50"] = number_text(fig.p50);
          e["p95"] = number_text(fig.p95);
        }
        e["unit"] = fig.unit;
        if (fig.repeats > 0) e["repeats"] = std::to_string(fig.repeats);
        e.SetStyle(YAML::EmitterStyle::Flow);
        cal[group][key.substr(dot + 1)] = e;
      }
    }
    doc["calibrated"] = cal;
  }
  // Sources: a full document carries them all; one that extends a base, those it adds or changes.
  std::map<std::string, std::string> sources;
  for (const auto& [k, v] : p.sources) {
    // The loader's own notes of which efficiencies came from the vendor defaults are not the file's.
    if (k.starts_with("efficiency.")) continue;
    if (base) {
      // A source the base has too is written only for a figure this document states: the loader
      // marks a figure a child sets without a source of its own.
      const auto under = [](const std::string& a, const std::string& b) {
        return a == b || (a.size() > b.size() && a.starts_with(b) && (a[b.size()] == '.' || a[b.size()] == '['));
      };
      const std::string& key = k;  // a structured binding: clang 14 cannot capture it in a lambda
      const bool states = std::any_of(written.begin(), written.end(),
                                      [&](const std::string& f) { return under(f, key) || under(key, f); });
      auto it = base->sources.find(k);
      if (it != base->sources.end() && it->second == v && !states) continue;
    }
    sources[k] = v;
  }
  // A whole document states the calibrated figures in their sections too; one the datasheet never
  // gave (an H200's barrier time) has no source of its own: the calibration is its source.
  if (!base && p.calibrated) {
    for (const Field& f : mine) {
      if (!f.value || f.value.IsNull() || !calibrated.count(f.key)) continue;
      if (sourced(f.key) || f.key.starts_with("efficiency.")) continue;
      sources[f.key] = fmt::format("measured by gpusim calibrate on {} ({})", p.calibrated->device, p.calibrated->date);
    }
  }
  YAML::Node src(YAML::NodeType::Map);
  for (const auto& [k, v] : sources) src[k] = v;
  if (src.size() > 0 || !base) doc["sources"] = src;
  YAML::Emitter out;
  out.SetIndent(2);
  out << doc;
  std::string text;
  size_t start = 0;
  while (start < comment.size()) {
    size_t end = comment.find('\n', start);
    if (end == std::string::npos) end = comment.size();
    text += "# " + comment.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return text + out.c_str() + "\n";
}

std::string vendor_efficiency_to_yaml(const VendorEfficiency& e, const std::string& fitted_on, const std::string& how) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  out << YAML::Key << "schema" << YAML::Value << "gpusim.efficiency/1";
  out << YAML::Comment("Efficiency defaults per GPU vendor, fitted on measured ops; every profile of the vendor that "
                       "does not set its own figure uses them. Re-fit with the command below (bench/validate/README.md).");
  out << YAML::Key << "command" << YAML::Value << YAML::DoubleQuoted << e.command;
  out << YAML::Key << "fitted_on" << YAML::Value << YAML::DoubleQuoted << fitted_on;
  out << YAML::Key << "how" << YAML::Value << YAML::DoubleQuoted << how;
  for (const auto& [key, groups] : {std::pair<const char*, const std::map<std::string, std::map<std::string, double>>*>{
                                        "vendors", &e.vendors},
                                    {"architectures", &e.architectures}}) {
    if (groups->empty() && std::string(key) != "vendors") continue;
    out << YAML::Key << key << YAML::Value << YAML::BeginMap;
    for (const auto& [who, figs] : *groups) {
      out << YAML::Key << who << YAML::Value << YAML::BeginMap;
      for (const auto& [k, v] : figs) out << YAML::Key << k << YAML::Value << number_text(v);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string efficiency_yaml_with_measured_of(const std::string& path, const std::string& fitted) {
  std::ifstream in(path);
  std::string line, kept;
  bool keep = false;
  while (in && std::getline(in, line)) {
    if (line.rfind("measured:", 0) == 0 || line.rfind("# --- measured", 0) == 0) keep = true;
    if (keep) kept += line + "\n";
  }
  return fitted + kept;
}

}  // namespace gpusim
