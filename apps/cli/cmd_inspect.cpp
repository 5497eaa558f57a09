// gpusim inspect MODEL.onnx [--dim k=v]... [--json]
// Imports the graph shape-only and reports ops by class, parameters, activations, MACs and FLOPs
// in total and by class, and the largest tensors. The JSON schema is documented in README.md
// ("inspect --json").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "commands.h"
#include "common.h"
#include "gpusim/gpusim.h"
#include "format.h"
#include "gpusim/graph_summary.h"
#include "gpusim/onnx_import.h"
#include "base/json_text.h"

namespace gpusim::cli {
namespace {

nlohmann::json flops_json(const FlopCounts& f) {
  return {{"fma", f.fma}, {"transcendental", f.transcendental}, {"compare", f.compare}};
}

nlohmann::json tensor_json(const TensorInfo& t) {
  return {{"name", t.name}, {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
          {"role", std::string(role_name(t.role))}, {"bytes", t.bytes}};
}

nlohmann::json to_json(const GraphSummary& s) {
  nlohmann::json j;
  j["schema"] = "gpusim.inspect/1";
  j["model"] = s.source_path;
  j["opset"] = s.opset;
  j["nodes"] = s.nodes;
  j["folded_nodes"] = s.folded_nodes;
  j["macs"] = s.macs;
  j["flops"] = s.flops.total();
  j["flops_by_kind"] = flops_json(s.flops);
  j["bytes_read"] = s.bytes_read;
  j["bytes_written"] = s.bytes_written;
  j["params"] = {{"count", s.params}, {"bytes", s.param_bytes}};
  j["constants"] = {{"count", s.constants}, {"bytes", s.constant_bytes}};
  j["activations"] = {{"count", s.activations}, {"bytes", s.activation_bytes}};
  j["inputs"] = nlohmann::json::array();
  for (const auto& t : s.inputs) j["inputs"].push_back(tensor_json(t));
  j["outputs"] = nlohmann::json::array();
  for (const auto& t : s.outputs) j["outputs"].push_back(tensor_json(t));
  nlohmann::json by_class = nlohmann::json::object();
  for (int c = 0; c < kNumOpClasses; ++c) {
    const ClassTotals& t = s.by_class[static_cast<size_t>(c)];
    by_class[std::string(op_class_name(static_cast<OpClass>(c)))] = {
        {"ops", t.ops}, {"macs", t.macs}, {"flops", t.flops.total()}, {"flops_by_kind", flops_json(t.flops)},
        {"bytes_read", t.bytes_read}, {"bytes_written", t.bytes_written}};
  }
  j["by_class"] = by_class;
  j["op_types"] = s.op_types;
  j["largest_tensors"] = nlohmann::json::array();
  for (const auto& t : s.largest) j["largest_tensors"].push_back(tensor_json(t));
  j["notes"] = s.notes;
  return j;
}

std::string tensor_line(const TensorInfo& t) {
  return fmt::format("{} {} {}", t.name, shape_str(t.shape), dtype_name(t.dtype));
}

void print_text(const GraphSummary& s) {
  fmt::print("model        {}  (opset {}, {} nodes, {} folded at import)\n", s.source_path, s.opset, s.nodes,
             s.folded_nodes);
  for (const auto& t : s.inputs) fmt::print("input        {}\n", tensor_line(t));
  for (const auto& t : s.outputs) fmt::print("output       {}\n", tensor_line(t));
  fmt::print("parameters   {} ({})\n", si(static_cast<double>(s.params)), bytes_str(static_cast<double>(s.param_bytes)));
  if (s.constants > 0) {
    fmt::print("constants    {} tensors built at import, {}\n", s.constants,
               bytes_str(static_cast<double>(s.constant_bytes)));
  }
  fmt::print("activations  {} tensors, {} summed over all (not a peak)\n", s.activations,
             bytes_str(static_cast<double>(s.activation_bytes)));
  fmt::print("MACs         {}\n", si(static_cast<double>(s.macs)));
  fmt::print("FLOPs        {} (fma {}, transcendental {}, compare {})\n", si(static_cast<double>(s.flops.total())),
             si(static_cast<double>(s.flops.fma)), si(static_cast<double>(s.flops.transcendental)),
             si(static_cast<double>(s.flops.compare)));
  fmt::print("traffic      {} read, {} written (one kernel per op, nothing fused)\n\n",
             bytes_str(static_cast<double>(s.bytes_read)), bytes_str(static_cast<double>(s.bytes_written)));
  fmt::print("{:<14} {:>6} {:>10} {:>10} {:>10} {:>10}\n", "class", "ops", "MACs", "FLOPs", "read", "written");
  for (int c = 0; c < kNumOpClasses; ++c) {
    const ClassTotals& t = s.by_class[static_cast<size_t>(c)];
    if (t.ops == 0) continue;
    fmt::print("{:<14} {:>6} {:>10} {:>10} {:>10} {:>10}\n", op_class_name(static_cast<OpClass>(c)), t.ops,
               si(static_cast<double>(t.macs)), si(static_cast<double>(t.flops.total())),
               bytes_str(static_cast<double>(t.bytes_read)), bytes_str(static_cast<double>(t.bytes_written)));
  }
  std::vector<std::pair<std::string, int64_t>> ops(s.op_types.begin(), s.op_types.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> op_parts;
  for (const auto& [op, n] : ops) op_parts.push_back(fmt::format("{} {}", op, n));
  fmt::print("\nop types     {}\n", fmt::join(op_parts, ", "));
  fmt::print("\nlargest tensors\n");
  for (const auto& t : s.largest) {
    fmt::print("  {:>10}  {:<10} {}\n", bytes_str(static_cast<double>(t.bytes)), role_name(t.role), tensor_line(t));
  }
  if (!s.notes.empty()) {
    fmt::print("\nnotes\n");
    for (const auto& n : s.notes) fmt::print("  - {}\n", say(n));
  }
}

// A runtime's lowering of the graph: the kernels it launches, each with the nodes it runs.
nlohmann::json lowering_json(const Lowering& low, const RuntimeModel& rt) {
  nlohmann::json ks = nlohmann::json::array();
  for (const PlanKernel& k : low.plan.kernels) {
    nlohmann::json nodes = nlohmann::json::array(), ops = nlohmann::json::array();
    bool inserted = false;
    for (int ni : k.nodes) {
      const Node& n = low.graph.nodes[static_cast<size_t>(ni)];
      nodes.push_back(n.name);
      ops.push_back(n.op_type);
      inserted = inserted || low.origin[static_cast<size_t>(ni)] < 0;
    }
    ks.push_back({{"rule", k.fusions.empty() ? "" : k.fusions.back()},
                  {"fusions", k.fusions},
                  {"call", k.call},
                  {"first_in_call", k.call_first},
                  {"ops", ops},
                  {"nodes", nodes},
                  {"inserted", inserted}});
  }
  return {{"runtime", rt.name}, {"source", rt.source_path}, {"kernels", ks}, {"notes", low.notes}};
}

void print_lowering(const Lowering& low, const RuntimeModel& rt, const Graph& g) {
  int runtime_nodes = 0;
  for (const Node& n : g.nodes) runtime_nodes += runs_on_device(g, n) ? 1 : 0;
  fmt::print("\nlowered by {}{}: {} kernels for {} run-time nodes\n", rt.name,
             rt.source_path.empty() ? "" : " (" + rt.source_path + ")", low.plan.kernels.size(), runtime_nodes);
  fmt::print("{:>5} {:<18} {:<10} {:<34} {}\n", "#", "rule", "call", "ops", "nodes");
  for (size_t i = 0; i < low.plan.kernels.size(); ++i) {
    const PlanKernel& k = low.plan.kernels[i];
    std::vector<std::string> ops;
    for (int ni : k.nodes) ops.push_back(low.graph.nodes[static_cast<size_t>(ni)].op_type);
    std::string op_text = fmt::format("{}", fmt::join(ops, "+"));
    if (op_text.size() > 34) op_text = op_text.substr(0, 31) + "...";
    for (size_t j = 0; j < k.nodes.size(); ++j) {
      const std::string& name = low.graph.nodes[static_cast<size_t>(k.nodes[j])].name;
      if (j == 0) {
        fmt::print("{:>5} {:<18} {:<10} {:<34} {}\n", i, k.fusions.empty() ? "-" : k.fusions.back(),
                   k.call.empty() ? "-" : k.call + (k.call_first ? "" : "+"), op_text, name);
      } else {
        fmt::print("{:>5} {:<18} {:<10} {:<34} {}\n", "", "", "", "", name);
      }
    }
  }
  fmt::print("rule: the runtime pattern, fusion, view or insert that made the kernel (- for one node alone); call: the "
             "framework call launching it (+: a later kernel of that call)\n");
  for (const auto& n : low.notes) fmt::print("  - {}\n", say(n));
}

}  // namespace

void add_inspect(CLI::App& app, int& rc) {
  struct Args {
    std::string model;
    std::vector<std::string> dims;
    bool json = false;
    std::string runtime, layout = "nchw", autocast;
    std::vector<std::string> skip;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inspect", "Import an ONNX graph shape-only and report its ops, parameters, "
                                            "activations, MACs and FLOPs");
  cmd->add_option("model", args->model, "The .onnx file (weights are not needed)")->required();
  cmd->add_option("--dim", args->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_flag("--json", args->json, "Print machine-readable JSON (schema gpusim.inspect/1, see README)");
  cmd->add_option("--runtime", args->runtime,
                  "Also show the graph as this runtime lowers it (pytorch-eager, torch-compile, or a runtime YAML): "
                  "every kernel it launches and the nodes each runs");
  cmd->add_option("--layout", args->layout, "With --runtime: nchw (default) or nhwc (channels_last)");
  cmd->add_option("--autocast", args->autocast, "With --runtime: lower under torch.autocast with this type (fp16, bf16)");
  cmd->add_option("--skip-pattern", args->skip, "With --runtime: a pattern of the runtime that does not apply (repeatable)");
  cmd->callback([args, cmd, &rc] {
    for (const char* flag : {"--layout", "--autocast", "--skip-pattern"}) {
      if (cmd->count(flag) > 0 && args->runtime.empty()) {
        fmt::print(stderr, "gpusim inspect: {} applies with --runtime (a runtime with lowering rules: pytorch-eager, "
                           "torch-compile, tensorrt, ...), whose kernels it changes\n",
                   flag);
        rc = 2;
        return;
      }
    }
    auto m = Session().open_model(args->model, {args->dims});
    if (!m) {
      fmt::print(stderr, "gpusim inspect: {}\n", say(m.error()));
      rc = exit_code(m.error());
      return;
    }
    const GraphSummary s = summarize(m->graph());
    std::optional<Lowering> low;
    std::optional<RuntimeModel> rt;
    if (!args->runtime.empty()) {
      auto r = find_runtime(args->runtime, default_runtime_dirs());
      if (!r) {
        fmt::print(stderr, "gpusim inspect: --runtime: {}\n", say(r.error()));
        rc = 2;
        return;
      }
      LoweringOptions lo;
      lo.layout = args->layout;
      lo.skip = args->skip;
      if (!args->autocast.empty()) {
        auto d = float_dtype_from_name(args->autocast);
        if (!d || *d == DType::kFloat32) {
          fmt::print(stderr, "gpusim inspect: --autocast {}: expected fp16 or bf16\n", args->autocast);
          rc = 2;
          return;
        }
        lo.autocast = *d;
      }
      auto l = lower(m->graph(), *r, lo);
      if (!l) {
        fmt::print(stderr, "gpusim inspect: {}\n", say(l.error()));
        rc = l.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
        return;
      }
      low = std::move(*l);
      rt = std::move(*r);
    }
    if (args->json) {
      nlohmann::json j = to_json(s);
      if (low) j["lowering"] = lowering_json(*low, *rt);
      fmt::print("{}\n", j.dump(2, ' ', false, kInvalidUtf8));
    } else {
      print_text(s);
      if (low) print_lowering(*low, *rt, m->graph());
    }
    rc = 0;
  });
}

}  // namespace gpusim::cli
