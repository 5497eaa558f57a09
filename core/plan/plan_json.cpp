// Plan <-> JSON, schema gpusim.plan/1 (core/plan/README.md). Nodes and tensors are named, so a plan
// file stays valid across re-imports of the same model.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <unordered_map>

#include "gpusim/plan.h"
#include "plan/chain_json.h"
#include "gpusim/kernel_work.h"
#include "base/json_text.h"

namespace gpusim {
namespace {

using nlohmann::json;

const char* kSchema = "gpusim.plan/1";
constexpr int64_t kMaxStreams = 1024;

json tile_json(const TileConfig& t) {
  json j = {{"block_m", t.block_m}, {"block_n", t.block_n}, {"block_k", t.block_k}, {"threads", t.threads},
            {"stages", t.stages},   {"split_k", t.split_k}, {"vector_width", t.vector_width},
            {"items_per_thread", t.items_per_thread}};
  // Derived figures the plan was priced with (tile.h), kept so the file prices the same.
  if (t.smem_bytes > 0) j["smem_bytes"] = t.smem_bytes;
  if (t.registers > 0) j["registers"] = t.registers;
  if (t.main_loop != MainLoop::kAny) j["main_loop"] = std::string(main_loop_name(t.main_loop));
  if (t.chain.known()) j["chain"] = chain_to_json(t.chain);
  return j;
}

}  // namespace

nlohmann::json chain_to_json(const KernelChain& c) {
  return {{"load_rounds", c.load_rounds},
          {"loads_ahead", c.loads_ahead},
          {"epilogue_rounds", c.epilogue_rounds},
          {"epilogue_barriers", c.epilogue_barriers}};
}

Result<KernelChain> chain_from_json(const nlohmann::json& j, std::string_view where, std::string_view field) {
  if (!j.is_object()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {}: is not an object; expected {{load_rounds, loads_ahead, epilogue_rounds, "
                                  "epilogue_barriers}}",
                                  where, field));
  }
  KernelChain c;
  for (const auto& [key, v] : j.items()) {
    int* slot = key == "load_rounds"         ? &c.load_rounds
                : key == "loads_ahead"       ? &c.loads_ahead
                : key == "epilogue_rounds"   ? &c.epilogue_rounds
                : key == "epilogue_barriers" ? &c.epilogue_barriers
                                             : nullptr;
    if (!slot) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {}.{}: unknown key; allowed: load_rounds, loads_ahead, epilogue_rounds, "
                                    "epilogue_barriers",
                                    where, field, key));
    }
    const int64_t hi = key == "loads_ahead" ? 1 : int64_t{1} << 20;
    const bool ok = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) &&
                    v.get<int64_t>() >= 0 && v.get<int64_t>() <= hi;
    if (!ok) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {}.{}: {} is not a count from 0 to {}", where, field, key, v.dump(), hi));
    }
    *slot = static_cast<int>(v.get<int64_t>());
  }
  return c;
}

namespace {

class Reader {
 public:
  Reader(const std::string& source, const Graph& g) : source_(source), g_(g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) node_by_name_[g.nodes[i].name] = static_cast<int>(i);
  }

  Result<Plan> read(const json& j) {
    if (!j.is_object()) return fail("", "the file is not a JSON object; expected a gpusim.plan/1 document");
    for (const auto& [k, v] : j.items()) {
      static const std::set<std::string> kKeys = {"schema", "model", "gpu", "dtype", "allow_tf32", "inputs", "scheduler",
                                                  "objective", "kernels", "offloaded", "decisions", "predicted"};
      if (!kKeys.count(k)) {
        return fail(k, "unknown key; allowed: schema, model, gpu, dtype, allow_tf32, inputs, scheduler, objective, kernels, "
                       "offloaded, decisions, predicted");
      }
    }
    if (!j.contains("schema") || j["schema"] != kSchema) {
      return fail("schema", fmt::format("{} is not \"{}\"", j.contains("schema") ? brief(j["schema"]) : "missing",
                                        kSchema));
    }
    Plan p;
    if (auto s = str(j, "model", p.model); !s) return s.error();
    if (auto s = str(j, "gpu", p.gpu); !s) return s.error();
    std::string scheduler = "eager", objective = "latency";
    if (auto s = str(j, "scheduler", scheduler); !s) return s.error();
    if (auto s = str(j, "objective", objective); !s) return s.error();
    // "lowering:<runtime>" names the runtime whose lowering the plan is.
    if (scheduler.rfind("lowering:", 0) == 0 && scheduler.size() > 9) {
      p.scheduler = SchedulerKind::kLowering;
      p.runtime = scheduler.substr(9);
    } else if (auto k = scheduler_from_name(scheduler); k && *k != SchedulerKind::kLowering) {
      p.scheduler = *k;
    } else {
      return fail("scheduler", fmt::format("\"{}\" is not eager, greedy, beam, random, split or lowering:<runtime>",
                                           scheduler));
    }
    if (auto o = objective_from_name(objective)) {
      p.objective = *o;
    } else {
      return fail("objective", fmt::format("\"{}\" is not one of {}", objective, objective_names()));
    }
    if (j.contains("allow_tf32")) {
      if (!j["allow_tf32"].is_boolean()) return fail("allow_tf32", fmt::format("{} is not true or false", brief(j["allow_tf32"])));
      p.allow_tf32 = j["allow_tf32"].get<bool>();
    }
    if (j.contains("dtype") && !j["dtype"].is_null()) {
      const std::string d = j["dtype"].is_string() ? j["dtype"].get<std::string>() : brief(j["dtype"]);
      if (auto t = retype_dtype_from_name(d)) {
        p.dtype = *t;
      } else {
        return fail("dtype", fmt::format("\"{}\" is not fp32, fp16, bf16, int8, fp8 or null", d));
      }
    }
    if (j.contains("inputs")) {
      const json& in = j["inputs"];
      if (!in.is_object()) return fail("inputs", fmt::format("{} is not an object of input name -> shape", brief(in)));
      for (const auto& [name, shape] : in.items()) {
        Shape sh;
        bool ok = shape.is_array();
        for (size_t i = 0; ok && i < shape.size(); ++i) {
          ok = shape[i].is_number_integer() && shape[i].get<int64_t>() >= 0;
          if (ok) sh.push_back(shape[i].get<int64_t>());
        }
        if (!ok) return fail("inputs." + name, fmt::format("{} is not a shape (a list of dims >= 0)", brief(shape)));
        p.inputs[name] = std::move(sh);
      }
    }
    if (!j.contains("kernels") || !j["kernels"].is_array()) {
      return fail("kernels", "missing or not a list; expected one entry per kernel");
    }
    const GraphIndex idx = index_graph(g_);
    for (size_t i = 0; i < j["kernels"].size(); ++i) {
      const std::string at = fmt::format("kernels[{}]", i);
      auto k = kernel(j["kernels"][i], at);
      if (!k) return k.error();
      // The kind follows from the nodes and fusions; a file that states one must agree.
      classify_kernel(g_, idx, *k);
      if (const json& e = j["kernels"][i]; e.contains("kind")) {
        const auto said = e["kind"].is_string() ? kernel_kind_from_name(e["kind"].get<std::string>()) : std::nullopt;
        if (!said) {
          return fail(at + ".kind", fmt::format("{} is not pointwise, main-loop, row, attention or copy", brief(e["kind"])));
        }
        if (*said != k->kind) {
          return fail(at + ".kind", fmt::format("\"{}\" is not what its nodes and fusions make (\"{}\"); remove the "
                                                "key or fix the kernel",
                                                kernel_kind_name(*said), kernel_kind_name(k->kind)));
        }
      }
      p.kernels.push_back(std::move(*k));
    }
    if (j.contains("offloaded")) {
      if (!j["offloaded"].is_array()) return fail("offloaded", "is not a list of weight names");
      for (size_t i = 0; i < j["offloaded"].size(); ++i) {
        const json& v = j["offloaded"][i];
        const auto id = v.is_string() ? g_.find(v.get<std::string>()) : std::nullopt;
        if (!id || g_.tensor(*id).role != TensorRole::kWeight) {
          return fail(fmt::format("offloaded[{}]", i), fmt::format("{} is not a weight of the model", brief(v)));
        }
        p.offloaded.push_back(*id);
      }
    }
    auto dec = strings(j, "decisions", "decisions", "a list of strings (why each fusion was taken)");
    if (!dec) return dec.error();
    p.decisions = std::move(*dec);
    return p;
  }

 private:
  Error fail(const std::string& field, const std::string& msg) const {
    return make_error(ErrorCode::kInvalidArgument,
                      field.empty() ? fmt::format("{}: {}", source_, msg) : fmt::format("{}: {}: {}", source_, field, msg));
  }

  // The checked accessors every field is read through: each names the field's path, the value
  // found and what was expected, and none throws whatever the document holds.
  Status str(const json& j, const char* key, std::string& out) const {
    if (!j.contains(key)) return Ok{};
    if (!j[key].is_string()) return fail(key, fmt::format("{} is not a string", brief(j[key])));
    out = j[key].get<std::string>();
    return Ok{};
  }

  // An optional list of strings (absent: empty).
  Result<std::vector<std::string>> strings(const json& j, const char* key, const std::string& at, const char* what) const {
    std::vector<std::string> out;
    if (!j.contains(key) || j[key].is_null()) return out;
    const json& v = j[key];
    if (!v.is_array()) return fail(at, fmt::format("{} is not {}", brief(v), what));
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return fail(fmt::format("{}[{}]", at, i), fmt::format("{} is not a string", brief(v[i])));
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  // An integer in [lo, hi]; a float, a string or an integer out of range names the range.
  Result<int64_t> integer(const json& v, const std::string& at, int64_t lo, int64_t hi) const {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return fail(at, fmt::format("{} is not an integer in [{}, {}]", brief(v), lo, hi));
    }
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return fail(at, fmt::format("{} is not an integer in [{}, {}]", brief(v), lo, hi));
    }
    return v.get<int64_t>();
  }

  // A value as it appears in a message: its JSON, cut short when long.
  static std::string brief(const json& v) {
    std::string s = v.dump(-1, ' ', false, kInvalidUtf8);
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  }

  Result<int> node(const json& v, const std::string& field) const {
    if (!v.is_string()) return fail(field, fmt::format("{} is not a node name", brief(v)));
    auto it = node_by_name_.find(v.get<std::string>());
    if (it == node_by_name_.end()) {
      return fail(field, fmt::format("{} is not a node of {} (was the plan made for another model?)", brief(v),
                                     g_.source_path));
    }
    return it->second;
  }

  Result<PlanKernel> kernel(const json& j, const std::string& at) const {
    if (!j.is_object()) return fail(at, "is not an object with nodes, anchor and tile");
    for (const auto& [k, v] : j.items()) {
      static const std::set<std::string> kKeys = {"nodes", "anchor", "kind", "tile", "stream", "fusions", "recomputed",
                                                  "ops", "predicted_us"};
      if (!kKeys.count(k)) {
        return fail(at + "." + k, "unknown key; allowed: nodes, anchor, kind, tile, stream, fusions, recomputed");
      }
    }
    PlanKernel k;
    if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty()) {
      return fail(at + ".nodes", "missing or empty; a kernel runs at least one node");
    }
    // Each node once in a kernel's nodes, and once in its recomputed ones (a subset of them): a
    // list naming one node 200,000 times is refused here, not priced (and validated) node by node.
    std::map<int, std::string> seen, seen_recomputed;
    const auto once = [&](int n, const std::string& field, std::map<int, std::string>& in) -> Status {
      const auto [it, fresh] = in.emplace(n, field);
      if (fresh) return Ok{};
      return fail(field, fmt::format("node \"{}\" is already {}; a kernel lists each node once", g_.nodes[static_cast<size_t>(n)].name,
                                     it->second));
    };
    for (size_t i = 0; i < j["nodes"].size(); ++i) {
      const std::string field = fmt::format("{}.nodes[{}]", at, i);
      auto n = node(j["nodes"][i], field);
      if (!n) return n.error();
      if (auto st = once(*n, field, seen); !st) return st.error();
      k.nodes.push_back(*n);
    }
    if (j.contains("anchor")) {
      auto a = node(j["anchor"], at + ".anchor");
      if (!a) return a.error();
      const auto it = std::find(k.nodes.begin(), k.nodes.end(), *a);
      if (it == k.nodes.end()) return fail(at + ".anchor", fmt::format("{} is not one of the kernel's nodes", brief(j["anchor"])));
      k.anchor = static_cast<int>(it - k.nodes.begin());
    }
    if (j.contains("recomputed")) {
      const json& r = j["recomputed"];
      if (!r.is_array()) return fail(at + ".recomputed", fmt::format("{} is not a list of node names", brief(r)));
      for (size_t i = 0; i < r.size(); ++i) {
        const std::string field = fmt::format("{}.recomputed[{}]", at, i);
        auto n = node(r[i], field);
        if (!n) return n.error();
        if (auto st = once(*n, field, seen_recomputed); !st) return st.error();
        k.recomputed.push_back(*n);
      }
    }
    auto fusions = strings(j, "fusions", at + ".fusions", "a list of fusion names");
    if (!fusions) return fusions.error();
    k.fusions = std::move(*fusions);
    if (j.contains("stream")) {
      auto st = integer(j["stream"], at + ".stream", 0, kMaxStreams - 1);
      if (!st) return st.error();
      k.stream = static_cast<int>(*st);
    }
    if (!j.contains("tile") || !j["tile"].is_object()) return fail(at + ".tile", "missing; expected {block_m, ...}");
    struct Field {
      const char* key;
      int* slot;
      int lo;
      int64_t hi = 65536;
    };
    const Field fields[] = {{"block_m", &k.tile.block_m, 0},   {"block_n", &k.tile.block_n, 0},
                            {"block_k", &k.tile.block_k, 0},   {"threads", &k.tile.threads, 1},
                            {"stages", &k.tile.stages, 1},     {"split_k", &k.tile.split_k, 1},
                            {"vector_width", &k.tile.vector_width, 1}, {"items_per_thread", &k.tile.items_per_thread, 1},
                            {"smem_bytes", &k.tile.smem_bytes, 0, int64_t{1} << 24}, {"registers", &k.tile.registers, 0, 1024}};
    for (const auto& [key, v] : j["tile"].items()) {
      if (key == "chain") {
        auto c = chain_from_json(v, source_, at + ".tile.chain");
        if (!c) return c.error();
        k.tile.chain = *c;
        continue;
      }
      if (key == "main_loop") {
        if (!v.is_string() || !parse_main_loop(v.get<std::string>(), &k.tile.main_loop)) {
          return fail(at + ".tile.main_loop", v.dump() + " is not \"any\", \"vector\", \"matrix\" or \"tf32\"");
        }
        continue;
      }
      const Field* f = nullptr;
      for (const Field& c : fields) {
        if (key == c.key) f = &c;
      }
      if (!f) {
        return fail(at + ".tile." + key, "unknown key; allowed: block_m, block_n, block_k, threads, stages, split_k, "
                                         "vector_width, items_per_thread, smem_bytes, registers, main_loop, chain");
      }
      auto x = integer(v, at + ".tile." + key, f->lo, f->hi);
      if (!x) return x.error();
      *f->slot = static_cast<int>(*x);
    }
    return k;
  }

  std::string source_;
  const Graph& g_;
  std::unordered_map<std::string, int> node_by_name_;
};

}  // namespace

std::string plan_to_json(const Plan& p, const Graph& g) {
  json kernels = json::array();
  for (const PlanKernel& k : p.kernels) {
    json nodes = json::array(), ops = json::array(), rec = json::array();
    for (int ni : k.nodes) {
      nodes.push_back(g.nodes[static_cast<size_t>(ni)].name);
      ops.push_back(g.nodes[static_cast<size_t>(ni)].op_type);
    }
    for (int ni : k.recomputed) rec.push_back(g.nodes[static_cast<size_t>(ni)].name);
    json e = {{"nodes", nodes},
              {"ops", ops},
              {"anchor", g.nodes[static_cast<size_t>(k.nodes[static_cast<size_t>(k.anchor)])].name},
              {"kind", std::string(kernel_kind_name(k.kind))},
              {"tile", tile_json(k.tile)},
              {"stream", k.stream}};
    if (!k.fusions.empty()) e["fusions"] = k.fusions;
    if (!rec.empty()) e["recomputed"] = rec;
    kernels.push_back(std::move(e));
  }
  json off = json::array();
  for (TensorId t : p.offloaded) off.push_back(g.tensor(t).name);
  json inputs = json::object();
  for (TensorId t : g.inputs) inputs[g.tensor(t).name] = g.tensor(t).shape;
  json j = {{"schema", kSchema},
            {"model", p.model},
            {"gpu", p.gpu},
            {"dtype", p.dtype ? json(std::string(retype_dtype_name(*p.dtype))) : json(nullptr)},
            {"inputs", inputs},
            {"scheduler", p.scheduler == SchedulerKind::kLowering ? "lowering:" + p.runtime
                                                                  : std::string(scheduler_name(p.scheduler))},
            {"objective", std::string(objective_name(p.objective))},
            {"kernels", kernels},
            {"offloaded", off},
            {"decisions", p.decisions}};
  if (p.allow_tf32) j["allow_tf32"] = true;
  return j.dump(1, ' ', false, kInvalidUtf8);
}

Result<Plan> plan_from_json(const std::string& text, const std::string& source, const Graph& g) {
  auto j = parse_json(text, source);
  if (!j) return j.error();
  return Reader(source, g).read(*j);
}

}  // namespace gpusim
