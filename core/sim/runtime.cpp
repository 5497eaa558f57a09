// Runtimes (include/gpusim/runtime.h): built-ins and YAML files of schema gpusim.runtime/1.
#include "gpusim/runtime.h"

#include "gpusim/gpu_profile.h"
#include "gpusim/op_catalog.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace gpusim {
namespace {

namespace fs = std::filesystem;

RuntimeModel builtin_device() {
  RuntimeModel r;
  r.name = "gpusim";
  r.description = "device time of each kernel, as gpusim's executor and calibration time it: no host time";
  r.combine = "device";
  return r;
}

RuntimeModel builtin_cuda_graph() {
  RuntimeModel r;
  r.name = "cuda-graph";
  r.description = "kernels replayed from a CUDA graph: one launch, then no host dispatch; at most 1 us between "
                  "kernels (the profile's launch overhead when less)";
  r.combine = "overlap";
  r.replay = true;
  r.extra_kernel_us = 1.0;
  r.default_us = 1.0;
  return r;
}

Error bad(const std::string& path, const std::string& key, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", path, key, why));
}

// --- lowering: patterns, fuse rules, views, inserts, autocast

const char* const kClasses[] = {"gemm", "conv", "elementwise", "reduction", "normalization", "data-movement", "attention"};
const char* const kKinds[] = {"pointwise", "main-loop", "rowwise"};

// The kinds a node of this op may have (node_kind): main loops may degenerate to streaming kernels.
std::vector<std::string> possible_kinds(const std::string& op) {
  const auto c = op_class("", op);
  if (!c) return {};
  if (*c == OpClass::kGemm || *c == OpClass::kConv || *c == OpClass::kAttention) return {"main-loop", "pointwise"};
  if (*c == OpClass::kNormalization || *c == OpClass::kReduction) {
    const bool pw = op == "BatchNormalization" || op == "LRN" || op == "MaxPool" || op == "AveragePool";
    return {pw ? "pointwise" : "rowwise"};
  }
  return {"pointwise"};
}

std::vector<std::string> class_kinds(const std::string& cls) {
  if (cls == "gemm" || cls == "conv" || cls == "attention") return {"main-loop", "pointwise"};
  if (cls == "normalization" || cls == "reduction") return {"pointwise", "rowwise"};
  return {"pointwise"};
}

class LoweringReader {
 public:
  explicit LoweringReader(std::string path) : path_(std::move(path)) {}

  // Each key given replaces `base`'s (the lowering of the runtime a file extends; empty otherwise).
  Result<RuntimeLowering> read(const YAML::Node& y, RuntimeLowering base = {}) {
    RuntimeLowering low = std::move(base);
    if (!y.IsMap()) {
      return err("lowering", "expected a map with kernels, fuse, views, inserts, autocast and layout_optimization");
    }
    for (const auto& kv : y) {
      const std::string k = kv.first.as<std::string>();
      if (k != "kernels" && k != "fuse" && k != "views" && k != "inserts" && k != "autocast" &&
          k != "layout_optimization" && k != "layout" && k != "half_accumulate") {
        return err("lowering." + k, "unknown key; allowed: kernels, fuse, views, inserts, autocast, layout_optimization, "
                                    "layout, half_accumulate");
      }
    }
    for (const char* list : {"kernels", "fuse"}) {
      const YAML::Node n = y[list];
      if (!n) continue;
      if (!n.IsSequence()) return err(fmt::format("lowering.{}", list), "expected a list of patterns");
      (std::string(list) == "fuse" ? low.fuse : low.kernels).clear();
      for (size_t i = 0; i < n.size(); ++i) {
        const std::string where = fmt::format("lowering.{}[{}]", list, i);
        auto p = pattern(n[i], where, std::string(list) == "fuse");
        if (!p) return p.error();
        (std::string(list) == "fuse" ? low.fuse : low.kernels).push_back(std::move(*p));
      }
    }
    if (auto s = check_overlaps(low.kernels); !s) return s.error();
    if (const YAML::Node v = y["views"]) {
      if (!v.IsMap()) return err("lowering.views", "expected a map with ops, readers, reader_fusions, channels_last_free");
      for (const auto& kv : v) {
        const std::string k = kv.first.as<std::string>();
        if (k != "ops" && k != "readers" && k != "reader_fusions" && k != "channels_last_free" && k != "why") {
          return err("lowering.views." + k, "unknown key; allowed: ops, readers, reader_fusions, channels_last_free, why");
        }
      }
      low.views = {};
      auto ops = op_list(v["ops"], "lowering.views.ops");
      if (!ops) return ops.error();
      for (const std::string& op : *ops) {
        if (op_class("", op) != OpClass::kDataMovement) {
          return err("lowering.views.ops", fmt::format("\"{}\" is not data movement; only data movement can be a view", op));
        }
      }
      low.views.ops = *ops;
      if (const YAML::Node r = v["readers"]) {
        if (!r.IsSequence()) return err("lowering.views.readers", "expected a list of node selectors");
        for (size_t i = 0; i < r.size(); ++i) {
          auto s = selector(r[i], fmt::format("lowering.views.readers[{}]", i), false);
          if (!s) return s.error();
          low.views.readers.push_back(*s);
        }
      }
      auto fus = strings(v["reader_fusions"], "lowering.views.reader_fusions");
      if (!fus) return fus.error();
      low.views.reader_fusions = *fus;
      if (v["channels_last_free"]) low.views.channels_last_free = v["channels_last_free"].as<bool>();
    }
    if (const YAML::Node ins = y["inserts"]) {
      if (!ins.IsSequence()) return err("lowering.inserts", "expected a list");
      low.inserts.clear();
      for (size_t i = 0; i < ins.size(); ++i) {
        auto x = insert(ins[i], fmt::format("lowering.inserts[{}]", i));
        if (!x) return x.error();
        low.inserts.push_back(std::move(*x));
      }
    }
    if (const YAML::Node a = y["autocast"]) {
      if (!a.IsMap()) return err("lowering.autocast", "expected a map with lower, fp32 and promote op lists");
      for (const auto& kv : a) {
        const std::string k = kv.first.as<std::string>();
        if (k != "lower" && k != "fp32" && k != "promote" && k != "why") {
          return err("lowering.autocast." + k, "unknown key; allowed: lower, fp32, promote, why");
        }
      }
      low.autocast = {};
      low.autocast.present = true;
      for (auto [key, out] : {std::pair<const char*, std::vector<std::string>*>{"lower", &low.autocast.lower},
                              {"fp32", &low.autocast.fp32},
                              {"promote", &low.autocast.promote}}) {
        auto ops = op_list(a[key], fmt::format("lowering.autocast.{}", key));
        if (!ops) return ops.error();
        *out = *ops;
      }
    }
    if (const YAML::Node l = y["layout_optimization"]) {
      auto lo = layout_optimization(l);
      if (!lo) return lo.error();
      low.layout_optimization = *lo;
      low.layout = {};
    }
    if (const YAML::Node l = y["layout"]) {
      if (!l.IsMap()) return err("lowering.layout", "expected a map with use (nhwc or nchw) and why");
      for (const auto& kv : l) {
        const std::string k = kv.first.as<std::string>();
        if (k != "use" && k != "why") return err("lowering.layout." + k, "unknown key; allowed: use, why");
      }
      const std::string use = l["use"] && l["use"].IsScalar() ? l["use"].Scalar() : "";
      if (use != "nhwc" && use != "nchw") {
        return err("lowering.layout.use",
                   fmt::format("\"{}\"; expected nhwc or nchw, the format the runtime runs 4-D activations in", use));
      }
      if (y["layout_optimization"]) {
        return err("lowering.layout", "a runtime that fixes its layout has no layout_optimization to choose one; keep "
                                      "one of the two");
      }
      low.layout_optimization = {};
      low.layout.use = use;
      if (l["why"]) low.layout.why = l["why"].as<std::string>();
    }
    if (const YAML::Node h = y["half_accumulate"]) {
      const std::string key = "lowering.half_accumulate";
      if (!h.IsMap()) return err(key, "expected a map with classes (conv, gemm) and why");
      for (const auto& kv : h) {
        const std::string k = kv.first.as<std::string>();
        if (k != "classes" && k != "why") return err(key + "." + k, "unknown key; allowed: classes, why");
      }
      auto cls = strings(h["classes"], key + ".classes");
      if (!cls) return cls.error();
      if (cls->empty()) return err(key + ".classes", "missing or empty; give the main loops it applies to: conv, gemm");
      for (const std::string& c : *cls) {
        if (c != "conv" && c != "gemm") {
          return err(key + ".classes", fmt::format("\"{}\"; expected conv or gemm (the main loops on matrix units)", c));
        }
      }
      low.half_accumulate.classes = *cls;
      if (h["why"]) low.half_accumulate.why = h["why"].as<std::string>();
    }
    return low;
  }

 private:
  Error err(const std::string& key, const std::string& why) const { return bad(path_, key, why); }

  // lowering.layout_optimization: {nodes_per_conv, cost: {grouped, small, in_out, default}, why}.
  Result<RuntimeLowering::LayoutOptimization> layout_optimization(const YAML::Node& l) const {
    const std::string key = "lowering.layout_optimization";
    if (!l.IsMap()) return err(key, "expected a map with nodes_per_conv, cost and why");
    for (const auto& kv : l) {
      const std::string k = kv.first.as<std::string>();
      if (k != "nodes_per_conv" && k != "cost" && k != "why") {
        return err(key + "." + k, "unknown key; allowed: nodes_per_conv, cost, why");
      }
    }
    RuntimeLowering::LayoutOptimization lo;
    lo.present = true;
    if (l["why"]) lo.why = l["why"].as<std::string>();
    auto number = [&](const YAML::Node& n, const std::string& k, double lo_bound, double hi) -> Result<double> {
      double v = 0;
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !(v > lo_bound && v <= hi)) {
        return err(k, fmt::format("\"{}\" is not a number in ({}, {}]", n.IsScalar() ? n.Scalar() : "(not a number)",
                                  lo_bound, hi));
      }
      return v;
    };
    if (const YAML::Node n = l["nodes_per_conv"]) {
      auto v = number(n, key + ".nodes_per_conv", 0, 1e6);
      if (!v) return v.error();
      lo.nodes_per_conv = *v;
    }
    const YAML::Node c = l["cost"];
    if (!c || !c.IsMap()) {
      return err(key + ".cost", "expected a map giving channels-last's cost against NCHW for each kind of convolution: "
                                "grouped, small, in_out and default");
    }
    for (const auto& kv : c) {
      const std::string k = kv.first.as<std::string>();
      if (k != "grouped" && k != "small" && k != "in_out" && k != "default") {
        return err(key + ".cost." + k, "unknown kind of convolution; allowed: grouped, small, in_out, default");
      }
    }
    for (auto [name, out] : {std::pair<const char*, double*>{"grouped", &lo.grouped},
                             {"small", &lo.small},
                             {"in_out", &lo.in_out},
                             {"default", &lo.other}}) {
      const YAML::Node n = c[name];
      if (!n) return err(fmt::format("{}.cost.{}", key, name), "missing; give channels-last's cost for this kind");
      auto v = number(n, fmt::format("{}.cost.{}", key, name), 0, 100);
      if (!v) return v.error();
      *out = *v;
    }
    return lo;
  }

  Result<std::vector<std::string>> strings(const YAML::Node& n, const std::string& key) const {
    std::vector<std::string> out;
    if (!n) return out;
    if (!n.IsSequence()) return err(key, "expected a list of names");
    for (const auto& x : n) {
      if (!x.IsScalar()) return err(key, "expected a list of names");
      out.push_back(x.as<std::string>());
    }
    return out;
  }

  Result<std::vector<std::string>> op_list(const YAML::Node& n, const std::string& key) const {
    auto v = strings(n, key);
    if (!v) return v;
    for (const std::string& op : *v) {
      if (!op_supported("", op)) {
        return err(key, fmt::format("\"{}\" is not an ONNX op gpusim knows, so it matches nothing (`gpusim ops` lists "
                                    "them)",
                                    op));
      }
    }
    return v;
  }

  Result<NodeSelector> selector(const YAML::Node& n, const std::string& key, bool chain_step) const {
    if (!n.IsMap()) return err(key, "expected a map (ops, classes, kinds, others, elements, ...)");
    NodeSelector s;
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      static const std::set<std::string> kKeys = {"ops", "classes", "kinds", "others", "elements",
                                                  "swaps_last_two", "min", "max", "optional"};
      if (!kKeys.count(k)) {
        return err(key + "." + k, "unknown key; allowed: ops, classes, kinds, others, elements, swaps_last_two, min, "
                                  "max, optional");
      }
    }
    auto ops = op_list(n["ops"], key + ".ops");
    if (!ops) return ops.error();
    s.ops = *ops;
    auto cls = strings(n["classes"], key + ".classes");
    if (!cls) return cls.error();
    for (const std::string& c : *cls) {
      if (std::find(std::begin(kClasses), std::end(kClasses), c) == std::end(kClasses)) {
        return err(key + ".classes", fmt::format("\"{}\" is not an op class; expected one of gemm, conv, elementwise, "
                                                 "reduction, normalization, data-movement, attention",
                                                 c));
      }
    }
    s.classes = *cls;
    auto kinds = strings(n["kinds"], key + ".kinds");
    if (!kinds) return kinds.error();
    for (const std::string& k : *kinds) {
      if (std::find(std::begin(kKinds), std::end(kKinds), k) == std::end(kKinds)) {
        return err(key + ".kinds", fmt::format("\"{}\" is not a kernel kind; expected pointwise, main-loop or rowwise", k));
      }
    }
    s.kinds = *kinds;
    if (!s.kinds.empty() && (!s.ops.empty() || !s.classes.empty())) {
      // Some op or class it names must be able to run as some kind it names, else it matches nothing.
      bool possible = false;
      for (const std::string& op : s.ops) {
        for (const std::string& k : possible_kinds(op)) possible = possible || std::count(s.kinds.begin(), s.kinds.end(), k);
      }
      for (const std::string& c : s.classes) {
        for (const std::string& k : class_kinds(c)) possible = possible || std::count(s.kinds.begin(), s.kinds.end(), k);
      }
      if (!possible) {
        return err(key, fmt::format("no op it names ({}) runs as a {} kernel, so it matches nothing",
                                    fmt::join(s.ops.empty() ? s.classes : s.ops, ", "), fmt::join(s.kinds, " or ")));
      }
    }
    if (const YAML::Node o = n["others"]) {
      const std::string v = o.as<std::string>();
      if (v == "any") {
        s.others = NodeSelector::Operand::kAny;
      } else if (v == "constant") {
        s.others = NodeSelector::Operand::kConstant;
      } else if (v == "weight") {
        s.others = NodeSelector::Operand::kWeight;
      } else if (v == "bias") {
        s.others = NodeSelector::Operand::kBias;
      } else if (v == "none") {
        s.others = NodeSelector::Operand::kNone;
      } else {
        return err(key + ".others", fmt::format("\"{}\"; expected any, constant, weight, bias or none", v));
      }
    }
    if (const YAML::Node e = n["elements"]) {
      const std::string v = e.as<std::string>();
      if (v == "any") {
        s.elements = NodeSelector::Elements::kAny;
      } else if (v == "same") {
        s.elements = NodeSelector::Elements::kSame;
      } else if (v == "not-fewer") {
        s.elements = NodeSelector::Elements::kNotFewer;
      } else {
        return err(key + ".elements", fmt::format("\"{}\"; expected any, same or not-fewer", v));
      }
    }
    if (n["swaps_last_two"]) s.swaps_last_two = n["swaps_last_two"].as<bool>();
    if (n["optional"] && n["optional"].as<bool>()) s.min = 0;
    if (n["min"]) s.min = n["min"].as<int>();
    if (n["max"]) s.max = n["max"].as<int>();
    if (s.min < 0 || s.max < 1 || s.max > 64 || s.min > s.max) {
      return err(key, fmt::format("min {} and max {}: expected 0 <= min <= max, 1 <= max <= 64", s.min, s.max));
    }
    if (!chain_step && (s.min != 1 || s.max != 1)) return err(key, "min, max and optional apply to chain steps only");
    return s;
  }

  Result<Pattern> pattern(const YAML::Node& n, const std::string& key, bool fuse) const {
    if (!n.IsMap()) return err(key, "expected a map with name and chain or region");
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      static const std::set<std::string> kKeys = {"name", "chain", "region", "call", "fusion", "anchor", "why"};
      if (!kKeys.count(k)) return err(key + "." + k, "unknown key; allowed: name, chain, region, call, fusion, anchor, why");
    }
    Pattern p;
    if (!n["name"]) return err(key + ".name", "missing; every pattern has a name");
    p.name = n["name"].as<std::string>();
    p.origin = fmt::format("{}: {}", path_, key);
    if (n["call"]) p.call = n["call"].as<std::string>();
    if (n["fusion"]) p.fusion = n["fusion"].as<std::string>();
    if (n["anchor"]) p.anchor_step = n["anchor"].as<int>();
    if (static_cast<bool>(n["chain"]) == static_cast<bool>(n["region"])) {
      return err(key, fmt::format("pattern \"{}\": give exactly one of chain (a list of steps) or region (op: count)",
                                  p.name));
    }
    if (const YAML::Node c = n["chain"]) {
      if (!c.IsSequence() || c.size() == 0) return err(key + ".chain", "expected a list of steps");
      p.shape = Pattern::Shape::kChain;
      for (size_t i = 0; i < c.size(); ++i) {
        auto s = selector(c[i], fmt::format("{}.chain[{}]", key, i), true);
        if (!s) return s.error();
        p.steps.push_back(*s);
      }
      if (std::none_of(p.steps.begin(), p.steps.end(), [](const NodeSelector& s) { return s.min > 0; })) {
        return err(key + ".chain", fmt::format("pattern \"{}\": every step is optional, so it matches nothing", p.name));
      }
      if (p.anchor_step >= static_cast<int>(p.steps.size())) {
        return err(key + ".anchor", fmt::format("{} is not a step of the chain (0 to {})", p.anchor_step, p.steps.size() - 1));
      }
      if (fuse && (p.steps.size() != 2 || p.steps[0].max != 1 || p.steps[1].max != 1 || p.steps[0].min != 1 ||
                   p.steps[1].min != 1)) {
        return err(key + ".chain", fmt::format("fuse rule \"{}\": a fuse rule is a producer and a reader: two steps, "
                                               "neither optional nor repeated",
                                               p.name));
      }
    } else {
      if (fuse) return err(key + ".region", "a fuse rule is a chain of two steps, not a region");
      const YAML::Node r = n["region"];
      if (!r.IsMap()) return err(key + ".region", "expected a map of op type: count");
      p.shape = Pattern::Shape::kRegion;
      int total = 0;
      for (const auto& kv : r) {
        const std::string op = kv.first.as<std::string>();
        if (!op_supported("", op)) {
          return err(key + ".region." + op, "not an ONNX op gpusim knows, so the region matches nothing (`gpusim ops`)");
        }
        const auto cls = op_class("", op);
        if (cls != OpClass::kElementwise && cls != OpClass::kDataMovement) {
          return err(key + ".region." + op, "a region holds elementwise and data-movement ops only (one input, one output)");
        }
        const int count = kv.second.as<int>();
        if (count < 1 || count > 64) return err(key + ".region." + op, fmt::format("{}: expected 1 to 64", count));
        p.region_ops[op] = count;
        total += count;
      }
      if (total < 2) return err(key + ".region", fmt::format("pattern \"{}\": a region of one node is that node's own kernel", p.name));
    }
    return p;
  }

  // Two kernel patterns that can claim the same nodes: the same name, the same region or one region
  // inside another, or the same chain.
  Status check_overlaps(const std::vector<Pattern>& ps) const {
    for (size_t i = 0; i < ps.size(); ++i) {
      for (size_t j = i + 1; j < ps.size(); ++j) {
        const Pattern& a = ps[i];
        const Pattern& b = ps[j];
        std::string why;
        if (a.name == b.name) {
          why = "they have the same name";
        } else if (a.shape == Pattern::Shape::kRegion && b.shape == Pattern::Shape::kRegion) {
          auto inside = [](const Pattern& x, const Pattern& y) {
            for (const auto& [op, n] : x.region_ops) {
              auto it = y.region_ops.find(op);
              if (it == y.region_ops.end() || it->second < n) return false;
            }
            return true;
          };
          if (inside(a, b) || inside(b, a)) why = "one region's ops are all in the other's, so both can claim its nodes";
        } else if (a.shape == Pattern::Shape::kChain && b.shape == Pattern::Shape::kChain && a.steps.size() == b.steps.size()) {
          bool same = true;
          for (size_t k = 0; k < a.steps.size() && same; ++k) {
            same = a.steps[k].ops == b.steps[k].ops && a.steps[k].classes == b.steps[k].classes &&
                   a.steps[k].kinds == b.steps[k].kinds && a.steps[k].others == b.steps[k].others;
          }
          if (same) why = "their chains are the same";
        }
        if (!why.empty()) {
          return make_error(ErrorCode::kInvalidArgument,
                            fmt::format("{}: kernel patterns \"{}\" ({}) and \"{}\" ({}) overlap: {}; a node runs in one "
                                        "kernel, so remove or narrow one of them",
                                        path_, a.name, a.origin, b.name, b.origin, why));
        }
      }
    }
    return Ok{};
  }

  Result<RuntimeLowering::Insert> insert(const YAML::Node& n, const std::string& key) const {
    if (!n.IsMap()) return err(key, "expected a map with name, what, on, layout, dtypes, why");
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      if (k != "name" && k != "what" && k != "on" && k != "layout" && k != "dtypes" && k != "convert" && k != "why") {
        return err(key + "." + k, "unknown key; allowed: name, what, on, layout, dtypes, convert, why");
      }
    }
    RuntimeLowering::Insert x;
    if (!n["name"]) return err(key + ".name", "missing");
    x.name = n["name"].as<std::string>();
    x.origin = fmt::format("{}: {}", path_, key);
    x.what = n["what"] ? n["what"].as<std::string>() : "";
    if (x.what != "bias" && x.what != "layout") {
      return err(key + ".what", fmt::format("\"{}\"; expected bias (the op's bias added by a kernel of its own) or "
                                            "layout (NCHW to NHWC and back around it)",
                                            x.what));
    }
    if (!n["on"]) return err(key + ".on", "missing: the nodes it applies to (a selector)");
    auto on = selector(n["on"], key + ".on", false);
    if (!on) return on.error();
    x.on = *on;
    if (n["layout"]) {
      x.layout = n["layout"].as<std::string>();
      if (x.layout != "nchw" && x.layout != "nhwc") return err(key + ".layout", fmt::format("\"{}\"; expected nchw or nhwc", x.layout));
    }
    auto dts = strings(n["dtypes"], key + ".dtypes");
    if (!dts) return dts.error();
    for (const std::string& d : *dts) {
      auto t = float_dtype_from_name(d);
      if (!t) return err(key + ".dtypes", fmt::format("\"{}\"; expected fp32, fp16 or bf16", d));
      x.dtypes.push_back(*t);
    }
    auto conv = strings(n["convert"], key + ".convert");
    if (!conv) return conv.error();
    for (const std::string& c : *conv) {
      if (c != "input" && c != "weight" && c != "output") {
        return err(key + ".convert", fmt::format("\"{}\"; expected input, weight or output", c));
      }
    }
    if (!conv->empty() && x.what != "layout") return err(key + ".convert", "applies to layout inserts only");
    x.convert = conv->empty() && x.what == "layout" ? std::vector<std::string>{"input", "weight", "output"} : *conv;
    if (n["why"]) x.why = n["why"].as<std::string>();
    return x;
  }

  std::string path_;
};

}  // namespace

double RuntimeModel::host_us(const std::string& op, const std::string& op_class, int kernels) const {
  double h = default_us;
  if (auto it = op_us.find(op); it != op_us.end()) {
    h = it->second;
  } else if (auto jt = class_us.find(op_class); jt != class_us.end()) {
    h = jt->second;
  }
  return h + std::max(0, kernels - 1) * extra_kernel_us;
}

double RuntimeModel::op_time_us(const std::string& op, const std::string& op_class, double kernels_us,
                                int kernels) const {
  // Device time; where a fit found the timer's own cost a kernel (`gpusim validate --fit` on gpusim's
  // event-timed runs: the launch inside the events), that too.
  if (combine == "device") return kernels_us + launch_latency_us;
  const double call = host_us(op, op_class, kernels);
  if (combine == "serial") return call + kernels_us;
  return std::max(call, kernels_us + launch_latency_us);
}

const std::map<std::string, std::string>& framework_ops() {
  static const std::map<std::string, std::string> kOps = {
      {"add", "Add"},   {"mul", "Mul"},   {"div", "Div"},   {"pow", "Pow"},         {"relu", "Relu"},
      {"gelu", "Gelu"}, {"tanh", "Tanh"}, {"conv", "Conv"}, {"linear", "Gemm"},     {"bmm", "MatMul"},
      {"ln", "LayerNormalization"},       {"softmax", "Softmax"}};
  return kOps;
}

std::vector<std::string> default_runtime_dirs() { return search_dirs("GPUSIM_RUNTIME_PATH", "runtimes", "runtimes"); }

namespace {
Result<RuntimeModel> load_runtime_at(const std::string& path, int depth);
}  // namespace

Result<RuntimeModel> load_runtime(const std::string& path) { return load_runtime_at(path, 0); }

namespace {
Result<RuntimeModel> load_runtime_at(const std::string& path, int depth) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the runtime file", path));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not valid YAML ({})", path, e.what()));
  }
  if (!y.IsMap()) return bad(path, "(top level)", "expected a map with schema: gpusim.runtime/1");
  static const std::set<std::string> kKeys = {"schema", "name", "description", "combine", "default_us", "class_us",
                                              "op_us", "extra_kernel_us", "launch_latency_us", "sources", "fit",
                                              "lowering", "host_scaled", "workload", "replay", "extends", "vendors"};
  RuntimeModel r;
  r.combine = "overlap";
  try {
    for (const auto& kv : y) {
      const std::string k = kv.first.as<std::string>();
      if (!kKeys.count(k)) {
        return bad(path, k, "unknown key; allowed: schema, name, description, extends, combine, default_us, class_us, "
                            "op_us, extra_kernel_us, launch_latency_us, host_scaled, replay, workload, vendors, sources, "
                            "fit, lowering");
      }
    }
    const std::string schema = y["schema"] ? y["schema"].as<std::string>() : "";
    if (schema != "gpusim.runtime/1") {
      return bad(path, "schema", fmt::format("\"{}\"; expected gpusim.runtime/1", schema));
    }
    if (!y["name"]) return bad(path, "name", "missing; give the runtime's name (the file's stem)");
    if (const YAML::Node e = y["extends"]) {
      // Another runtime file beside this one: its figures and lowering, each key given here replacing its.
      const std::string parent = e.IsScalar() ? e.Scalar() : "";
      if (parent.empty() || parent.find_first_of("/\\") != std::string::npos || parent == ".." || parent == ".") {
        return bad(path, "extends", fmt::format("\"{}\"; expected the name of a runtime file in the same directory "
                                                "(torch-compile for torch-compile.yaml)",
                                                e.IsScalar() ? e.Scalar() : "(not a name)"));
      }
      if (depth >= 8) return bad(path, "extends", fmt::format("\"{}\": more than 8 files extend one another (a cycle?)", parent));
      const std::string ppath = (fs::path(path).parent_path() / (parent + ".yaml")).string();
      std::error_code ec;
      if (!fs::exists(ppath, ec)) {
        return bad(path, "extends", fmt::format("\"{}\": there is no {} beside this file; name a runtime file in the "
                                                "same directory",
                                                parent, ppath));
      }
      auto base = load_runtime_at(ppath, depth + 1);
      if (!base) return base.error();
      r = std::move(*base);
      r.extends = parent;
    }
    r.source_path = path;
    r.name = y["name"].as<std::string>();
    if (y["description"]) r.description = y["description"].as<std::string>();
    if (y["combine"]) r.combine = y["combine"].as<std::string>();
    if (r.combine != "overlap" && r.combine != "serial" && r.combine != "device") {
      return bad(path, "combine", fmt::format("\"{}\"; expected overlap, serial or device", r.combine));
    }
    auto num = [&](const YAML::Node& n, const std::string& key, double& out) -> Result<Ok> {
      if (!n) return Ok{};
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        return bad(path, key, fmt::format("\"{}\" is not a number of microseconds", n.Scalar()));
      }
      if (!(v >= 0 && v <= 1e6)) return bad(path, key, fmt::format("{} is out of range; expected 0 to 1e6 us", v));
      out = v;
      return Ok{};
    };
    for (auto [key, out] : {std::pair<const char*, double*>{"default_us", &r.default_us},
                            {"extra_kernel_us", &r.extra_kernel_us},
                            {"launch_latency_us", &r.launch_latency_us}}) {
      if (auto s = num(y[key], key, *out); !s) return s.error();
    }
    for (auto [key, out] : {std::pair<const char*, std::map<std::string, double>*>{"op_us", &r.op_us},
                            {"class_us", &r.class_us}}) {
      const YAML::Node m = y[key];
      if (!m) continue;
      if (!m.IsMap()) return bad(path, key, "expected a map of name: microseconds");
      out->clear();  // a map given replaces the one extended
      for (const auto& kv : m) {
        const std::string name = kv.first.as<std::string>();
        double v = 0;
        if (auto s = num(kv.second, fmt::format("{}.{}", key, name), v); !s) return s.error();
        (*out)[name] = v;
      }
    }
    if (const YAML::Node hs = y["host_scaled"]) {
      if (hs.Scalar() != "true" && hs.Scalar() != "false") {
        return bad(path, "host_scaled", fmt::format("\"{}\"; expected true (the figures are host time a host profile "
                                                    "scales) or false (device time)",
                                                    hs.Scalar()));
      }
      r.host_scaled = hs.Scalar() == "true";
    }
    if (const YAML::Node v = y["vendors"]) {
      static const std::set<std::string> kVendors = {"nvidia", "amd", "intel", "apple", "cpu"};
      if (!v.IsSequence() || v.size() == 0) {
        return bad(path, "vendors", "expected a list of GPU vendors (nvidia, amd, intel, apple, cpu) it runs on");
      }
      r.vendors.clear();
      for (const auto& x : v) {
        const std::string name = x.IsScalar() ? x.Scalar() : "";
        if (!kVendors.count(name)) {
          return bad(path, "vendors", fmt::format("\"{}\"; expected nvidia, amd, intel, apple or cpu (a profile's vendor)",
                                                  x.IsScalar() ? name : "(not a name)"));
        }
        r.vendors.push_back(name);
      }
    }
    if (const YAML::Node rp = y["replay"]) {
      if (rp.Scalar() != "true" && rp.Scalar() != "false") {
        return bad(path, "replay", fmt::format("\"{}\"; expected true (the kernels are replayed from a recorded CUDA "
                                               "graph: one launch, then the device dispatches them) or false",
                                               rp.Scalar()));
      }
      r.replay = rp.Scalar() == "true";
    }
    if (const YAML::Node w = y["workload"]) {
      r.workload = w.IsScalar() ? w.Scalar() : "";
      if (r.workload != "graphs" && r.workload != "language-models") {
        return bad(path, "workload", fmt::format("\"{}\"; expected graphs (an ONNX graph's kernels) or language-models "
                                                 "(a described model's generations, as llama.cpp runs them)",
                                                 w.IsScalar() ? w.Scalar() : "(not a name)"));
      }
    }
    if (const YAML::Node low = y["lowering"]) {
      auto l = LoweringReader(path).read(low, r.lowering);
      if (!l) return l.error();
      r.lowering = std::move(*l);
    }
  } catch (const YAML::Exception& e) {
    return bad(path, "(document)", e.what());
  }
  return r;
}
}  // namespace

std::vector<std::string> list_runtimes(const std::vector<std::string>& dirs) {
  std::set<std::string> names = {"gpusim", "cuda-graph"};
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".yaml") names.insert(it->path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

Result<RuntimeModel> find_runtime(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  if (name_or_path.size() > 5 && name_or_path.ends_with(".yaml")) return load_runtime(name_or_path);
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + name_or_path + ".yaml";
    std::error_code ec;
    if (fs::exists(p, ec)) return load_runtime(p);
  }
  if (name_or_path == "gpusim") return builtin_device();
  if (name_or_path == "cuda-graph") return builtin_cuda_graph();
  std::string known;
  for (const std::string& n : list_runtimes(dirs)) known += (known.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("runtime \"{}\" is unknown; known runtimes: {} (or give a path to a gpusim.runtime/1 "
                                "YAML file)",
                                name_or_path, known));
}

std::string runtime_to_yaml(const RuntimeModel& r, const std::string& fit, const std::map<std::string, std::string>& sources) {
  auto num = [](double v) { return fmt::format("{}", v); };
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  out << YAML::Key << "schema" << YAML::Value << "gpusim.runtime/1";
  out << YAML::Key << "name" << YAML::Value << r.name;
  if (!r.extends.empty()) out << YAML::Key << "extends" << YAML::Value << r.extends;
  out << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << r.description;
  out << YAML::Key << "combine" << YAML::Value << r.combine;
  out << YAML::Key << "default_us" << YAML::Value << num(r.default_us);
  out << YAML::Key << "extra_kernel_us" << YAML::Value << num(r.extra_kernel_us);
  out << YAML::Key << "launch_latency_us" << YAML::Value << num(r.launch_latency_us);
  // A file that extends another states what the parent's would otherwise give.
  const bool extends = !r.extends.empty();
  if (r.host_scaled || extends) out << YAML::Key << "host_scaled" << YAML::Value << r.host_scaled;
  if (r.replay || extends) out << YAML::Key << "replay" << YAML::Value << r.replay;
  if (r.workload != "graphs" || extends) out << YAML::Key << "workload" << YAML::Value << r.workload;
  if (!r.vendors.empty()) out << YAML::Key << "vendors" << YAML::Value << YAML::Flow << r.vendors;
  for (const auto& [key, figures] : {std::pair<const char*, const std::map<std::string, double>*>{"class_us", &r.class_us},
                                     {"op_us", &r.op_us}}) {
    if (figures->empty() && !extends) continue;
    out << YAML::Key << key << YAML::Value;
    if (figures->empty()) out << YAML::Flow;
    out << YAML::BeginMap;
    for (const auto& [k, v] : *figures) out << YAML::Key << k << YAML::Value << num(v);
    out << YAML::EndMap;
  }
  if (!fit.empty()) out << YAML::Key << "fit" << YAML::Value << YAML::DoubleQuoted << fit;
  if (!sources.empty()) {
    out << YAML::Key << "sources" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : sources) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string runtime_yaml_with_lowering_of(const std::string& path, const std::string& fitted) {
  std::ifstream in(path);
  if (!in) return fitted;
  std::string line, kept;
  bool keep = false;
  while (std::getline(in, line)) {
    if (!keep && (line.rfind("lowering:", 0) == 0 || line.rfind("# --- lowering", 0) == 0)) keep = true;
    if (keep) kept += line + "\n";
  }
  return fitted + kept;
}

}  // namespace gpusim
