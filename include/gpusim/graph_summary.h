// GraphSummary: what `gpusim inspect` reports about an imported graph: op counts by class,
// parameters, activations, MACs and FLOPs in total and by class, the largest tensors.
//
// Usage:
//   gpusim::GraphSummary s = gpusim::summarize(graph);
//   fmt::print("{} GMACs\n", s.macs / 1e9);
#pragma once

#include "gpusim/export.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/op_catalog.h"

namespace gpusim {

struct GPUSIM_API ClassTotals {
  int64_t ops = 0;
  int64_t macs = 0;
  FlopCounts flops;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

struct GPUSIM_API TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  TensorRole role = TensorRole::kActivation;
  int64_t bytes = 0;
};

struct GPUSIM_API GraphSummary {
  std::string source_path;
  int64_t opset = 0;
  int64_t nodes = 0;
  int64_t folded_nodes = 0;                 // computed at import (shape arithmetic, constants)
  std::map<std::string, int64_t> op_types;  // run-time nodes per op type
  std::array<ClassTotals, kNumOpClasses> by_class{};
  // Parameters: initializers, plus float constants built at load time (ConstantOfShape, say) that
  // a conv, gemm or normalization reads as its weight.
  int64_t params = 0;
  int64_t param_bytes = 0;
  // Other tensors computed at import that are too large to keep as values (filled scratch
  // buffers, for instance): they occupy memory at run time but are not parameters.
  int64_t constants = 0;
  int64_t constant_bytes = 0;
  int64_t activations = 0;  // tensors produced at run time, graph outputs included
  int64_t activation_bytes = 0;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  int64_t macs = 0;
  FlopCounts flops;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  std::vector<TensorInfo> largest;  // by bytes, largest first
  std::vector<std::string> notes;
};

GPUSIM_API GraphSummary summarize(const Graph& g, size_t largest_count = 10);

}  // namespace gpusim
