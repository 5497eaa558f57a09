// gpusim inspect MODEL.onnx [--dim k=v]... [--json]
// Imports the graph shape-only and reports ops by class, parameters, activations, MACs and FLOPs
// in total and by class, and the largest tensors. The JSON schema is documented in README.md
// ("inspect --json").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "gpusim/gpusim.h"
#include "format.h"
#include "gpusim/graph_summary.h"
#include "gpusim/onnx_import.h"
#include "gpusim/json_text.h"

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
    for (const auto& n : s.notes) fmt::print("  - {}\n", n);
  }
}

}  // namespace

void add_inspect(CLI::App& app, int& rc) {
  struct Args {
    std::string model;
    std::vector<std::string> dims;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inspect", "Import an ONNX graph shape-only and report its ops, parameters, "
                                            "activations, MACs and FLOPs");
  cmd->add_option("model", args->model, "The .onnx file (weights are not needed)")->required();
  cmd->add_option("--dim", args->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_flag("--json", args->json, "Print machine-readable JSON (schema gpusim.inspect/1, see README)");
  cmd->callback([args, &rc] {
    auto m = Session().open_model(args->model, {args->dims});
    if (!m) {
      fmt::print(stderr, "gpusim inspect: {}\n", m.error().message);
      rc = exit_code(m.error());
      return;
    }
    const GraphSummary s = summarize(m->graph());
    if (args->json) {
      fmt::print("{}\n", to_json(s).dump(2, ' ', false, kInvalidUtf8));
    } else {
      print_text(s);
    }
    rc = 0;
  });
}

}  // namespace gpusim::cli
