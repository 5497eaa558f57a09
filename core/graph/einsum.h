// Einsum equations, parsed once for everything that reads them: shape inference (core/graph/ops),
// the CPU reference and the GEMM generator.
//
// Usage:
//   gpusim::EinsumEquation e = gpusim::parse_einsum_equation("bij,bjk->bik");
//   auto l = gpusim::einsum_labels(e, {a.shape, b.shape});   // per-dim labels, ellipsis expanded
#pragma once


#include <string>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim {

struct EinsumEquation {
  std::vector<std::string> inputs;  // one term per operand; '.' stands for the ellipsis dims
  std::string output;               // as written after "->", or the implicit output: '.' (if any
                                    // term has an ellipsis), then the letters used once, sorted
  bool explicit_output = false;
};

// Spaces dropped, "..." written as '.'.
EinsumEquation parse_einsum_equation(const std::string& equation);

// Each dim's label: a letter is its char code (< 128); ellipsis dims are 128 + their position,
// right-aligned across operands, so `count` = 128 + the widest ellipsis.
struct EinsumLabels {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  size_t ellipsis_rank = 0;
  size_t count() const { return 128 + ellipsis_rank; }
};

// Fails (kInvalidModel, "operand I does not fit "TERM"") when an operand's rank does not match
// its term, or when the term and operand counts differ.
Result<EinsumLabels> einsum_labels(const EinsumEquation& e, const std::vector<Shape>& shapes);

}  // namespace gpusim
