// ONNX import: a .onnx file in, a Graph with every tensor's static shape out. Weights are not
// needed: embedded payloads are skipped while reading, external-data files are never opened (a
// missing one is fine).
//
// Shapes come from gpusim's own per-op inference (the op catalog), which folds the shape
// arithmetic PyTorch exports compute at run time (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape; Expand, Slice and Range targets). ONNX's own shape inference with data propagation runs
// first on the same model; it fills shapes after ops gpusim does not support (so one run lists them
// all) and is compared with gpusim's result (disagreements are recorded in Graph::notes).
//
// Symbolic input dims are set by name (`batch=8`) or by input and axis (`input_ids:1=128`).
//
// Usage:
//   gpusim::ImportOptions opts;
//   opts.dims["batch"] = 1;
//   auto g = gpusim::import_onnx("models/bert_base_seq128.onnx", opts);
//   if (!g) { fmt::print(stderr, "{}\n", g.error().message); return 1; }
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim {

struct GPUSIM_API ImportOptions {
  // Symbolic dim name -> value, or "input:axis" -> value.
  std::map<std::string, int64_t> dims;
  // The value of every symbolic or unsized input dim `dims` does not name (unset: such a dim is an
  // error that asks for --dim).
  std::optional<int64_t> other_dims;
  // Every graph input's leading axis at this size, symbolic or fixed (the batch a comparison of
  // runtimes runs at); an "input:0" entry of `dims` still wins for its input.
  std::optional<int64_t> batch = std::nullopt;
  // Run ONNX's shape inference (a cross-check and a fallback after unsupported ops).
  bool onnx_shape_inference = true;
  // Refuse a graph of more nodes than this before any pass runs (0: no limit). A node costs a few
  // kilobytes through import, prediction and its report, so a server bounds its memory with it.
  int64_t max_nodes = 0;
  // Called with the graph's node count (counted on the wire, subgraphs' included) before the
  // protobuf is parsed; an error stops the import with it. A server reserves the import's memory
  // here, before it is spent.
  std::function<Status(int64_t nodes)> admit = nullptr;
};

// Parses "name=value" as given to --dim; the error names the text and the expected form.
GPUSIM_API Result<std::pair<std::string, int64_t>> parse_dim_override(const std::string& text);

GPUSIM_API Result<Graph> import_onnx(const std::string& path, const ImportOptions& opts = {});
// The same from a serialized ModelProto in memory (an upload); `name` stands for the file in
// messages. External data files cannot be read from bytes: such tensors count as shape-only.
GPUSIM_API Result<Graph> import_onnx_bytes(std::string_view bytes, const std::string& name, const ImportOptions& opts = {});

}  // namespace gpusim
