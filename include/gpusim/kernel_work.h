// From graph nodes to the work a kernel does (KernelWork, see tile.h): one node's, or a
// fused group's, whose bytes are only what crosses the group's boundary — intermediates stay on
// chip — and whose FLOPs are all its ops'.
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/tile.h"

namespace gpusim {

// The work of one node as a kernel (nullopt for nodes that launch nothing: views, folded nodes).
GPUSIM_API std::optional<KernelWork> node_work(const Graph& g, const Node& n);

// How a node runs as a kernel, for fusion legality: one main loop (a GEMM, a convolution as
// implicit GEMM, attention), a pass over rows (reductions, normalizations over rows), or
// pointwise (elementwise ops, data movement, per-element normalizations such as inference
// BatchNorm, pools, depthwise and tiny convolutions, which run as streaming kernels); kNone for a
// node that launches nothing (a view, a fold). node_kind (patterns.h) computes it.
enum class NodeKind { kNone, kPointwise, kMainLoop, kRowwise };

// Who reads and who writes each tensor, and how each node runs, computed once per graph (each
// node's work priced once) for group_work, the fusion space and classify_kernel.
struct GPUSIM_API GraphIndex {
  std::vector<int> producer;      // node index per tensor, -1 for inputs, weights and constants
  std::vector<TensorId> root;     // the tensor whose memory each tensor is: view_roots (plan.h)
  std::vector<int> readers;       // per root: run-time nodes reading it or any of its views
  std::vector<bool> graph_output; // per root: the graph returns it or one of its views
  std::vector<NodeKind> kind;     // per node
};
GPUSIM_API GraphIndex index_graph(const Graph& g);

// The work of a fused group; `anchor` (a position in `nodes`) sets the class and the GEMM/row
// view. Attention groups (QK^T, scale, mask, softmax, PV) become one attention kernel.
// `recomputed` lists nodes of the group that other kernels also run: their outputs are never written.
GPUSIM_API KernelWork group_work(const Graph& g, const GraphIndex& idx, const std::vector<int>& nodes, int anchor,
                      bool attention = false, const std::vector<int>& recomputed = {});

struct PlanKernel;
// The work of a plan's kernel, as its kind (classify_kernel, plan.h) says it runs.
GPUSIM_API KernelWork plan_kernel_work(const Graph& g, const GraphIndex& idx, const PlanKernel& k);

}  // namespace gpusim
