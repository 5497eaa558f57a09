// A runtime's lowering: the kernels a runtime really launches for a graph, as a plan.
//
// An exporter's graph is not what runs. PyTorch eager runs a GELU the exporter wrote as five nodes
// as one kernel, a Linear's MatMul and bias Add as one cuBLASLt call, attention as one
// scaled_dot_product_attention kernel, a permute as a strided view no kernel copies; it adds a
// kernel for a convolution's bias, layout conversions around cuDNN's NCHW half-precision
// convolutions and, under torch.autocast, a cast before each matrix product whose input is fp32.
// A compiler (torch.compile) fuses chains of pointwise ops and reductions and folds data movement
// into their index math. The runtime's YAML (runtime.h, RuntimeLowering) says which; lower()
// applies it:
//   1. its `kernels` patterns, each match one kernel (a node matched by two patterns is an error
//      naming both);
//   2. its `fuse` rules, merging producer and reader wherever one matches and the merged kernel
//      keeps one main loop or one pass over rows and no cycle;
//   3. its `views`: data movement folded into the kernels that read it, or a copy kernel of its own;
//   4. every other node a kernel of its own;
//   5. its `inserts` and autocast casts, written into the graph as nodes of their own.
// The result is a graph (the input graph plus the inserted nodes) and a plan over it, each kernel
// naming its nodes, the rule that made it and the call that launches it; predict() prices it.
//
// Usage:
//   auto rt = gpusim::find_runtime("pytorch-eager", gpusim::default_runtime_dirs());
//   gpusim::LoweringOptions o;  o.autocast = gpusim::DType::kFloat16;  o.layout = "nhwc";
//   auto low = gpusim::lower(graph, *rt, o);
//   for (const auto& k : low->plan.kernels) ...   // k.nodes index low->graph.nodes
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <string>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/plan.h"
#include "gpusim/result.h"
#include "gpusim/runtime.h"

namespace gpusim {

struct GPUSIM_API LoweringOptions {
  // Memory format of 4-D activations: "nchw" (PyTorch's default) or "nhwc" (channels_last).
  std::string layout = "nchw";
  // Run under torch.autocast with this type (fp16 or bf16): the runtime's autocast rules decide
  // which ops compute in it. Unset: every op in its tensors' own types.
  std::optional<DType> autocast;
  // Patterns of the runtime's `kernels` that do not apply: the model's code takes another path
  // (timm's Swin computes attention with matmuls and a softmax, not scaled_dot_product_attention).
  std::vector<std::string> skip;
};

// "nchw" or "nhwc", or an error naming the value.
GPUSIM_API Status check_layout(const std::string& layout);

struct GPUSIM_API Lowering {
  Graph graph;               // the input graph with the runtime's inserted nodes
  Plan plan;                 // the kernels, in launch order; tiles are left for the pricer
  std::vector<int> origin;   // per node of `graph`: its node in the input graph, or -1 when inserted
  // The memory format the kernels run in: the one asked for, or the one the runtime's compiler
  // chose (RuntimeLowering::layout_optimization; a note says which and why).
  std::string layout = "nchw";
  std::vector<std::string> notes;
};

// Errors name the runtime file, the pattern and the node.
GPUSIM_API Result<Lowering> lower(const Graph& g, const RuntimeModel& rt, const LoweringOptions& o = {});

}  // namespace gpusim
