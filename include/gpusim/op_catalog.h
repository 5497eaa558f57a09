// The op catalog: for every ONNX op gpusim supports, its class and its work.
//
// Work is counted the way a kernel does it, per output element, and documented per op in
// core/graph/ops/*.cpp. Conventions:
//   - MACs: multiply-accumulates of conv- and matmul-like ops (Conv, ConvTranspose, MatMul, Gemm,
//     Einsum), the figure torchvision and fvcore publish as "GFLOPS"; bias adds are not MACs.
//   - FLOPs by kind: `fma` counts additions and multiplications (one MAC = 2 fma FLOPs),
//     `transcendental` counts what runs on special-function units or takes many cycles (exp, log,
//     tanh, erf, sqrt, reciprocal, division, pow, trig), `compare` counts max/min/select/comparisons.
//   - Bytes: the minimum traffic an unfused kernel moves: every input element it needs read once
//     (for Gather/Slice only the elements it touches), every output written once. Views (Reshape,
//     Squeeze, Unsqueeze, Flatten, Identity) and nodes folded at import move nothing.
//
// Usage:
//   for (const gpusim::Node& n : g.nodes) {
//     gpusim::OpCost c = gpusim::op_cost(g, n);
//     total_macs += c.macs;
//   }
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/graph.h"

namespace gpusim {

enum class OpClass { kGemm, kConv, kElementwise, kReduction, kNormalization, kDataMovement, kAttention };
inline constexpr int kNumOpClasses = 7;
GPUSIM_API std::string_view op_class_name(OpClass c);  // "gemm", "conv", "elementwise", ...

struct GPUSIM_API FlopCounts {
  int64_t fma = 0;
  int64_t transcendental = 0;
  int64_t compare = 0;
  int64_t total() const { return fma + transcendental + compare; }
  FlopCounts& operator+=(const FlopCounts& o) {
    fma += o.fma;
    transcendental += o.transcendental;
    compare += o.compare;
    return *this;
  }
};

struct GPUSIM_API OpCost {
  OpClass cls = OpClass::kElementwise;
  int64_t macs = 0;
  FlopCounts flops;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

// Whether gpusim knows the op (domain "" or "ai.onnx" is the default ONNX domain).
GPUSIM_API bool op_supported(std::string_view domain, std::string_view op_type);
GPUSIM_API std::optional<OpClass> op_class(std::string_view domain, std::string_view op_type);
// Every supported op as "op_type" or "domain:op_type", sorted.
GPUSIM_API std::vector<std::string> supported_ops();

// The work of one node of a fully imported graph. A folded node costs nothing.
GPUSIM_API OpCost op_cost(const Graph& g, const Node& n);

}  // namespace gpusim
