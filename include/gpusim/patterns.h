// Graph patterns: which nodes of a graph one kernel runs.
//
// One matcher serves two users: a runtime's lowering (runtime.h: "PyTorch runs this 5-node GELU as
// one kernel, a MatMul and its bias Add as one cuBLASLt call") and the planner's fusion passes
// (scheduler.h: "a GEMM and the elementwise op on its output may fuse"). A pattern is data: a
// runtime YAML writes it, the built-in planner passes are the same structs.
//
// Two shapes of pattern:
//   - a chain: steps, each a selector of one node (op types, op classes or kinds, what its other
//     inputs may be) repeated min..max times; each step's node is the only reader of the previous
//     one's output (views in between are followed), so the intermediates never leave the kernel;
//   - a region: a connected group of nodes with exactly these op types (a multiset), one input
//     tensor from outside (every other input a scalar constant) and one output read outside: the
//     shape of an activation function an exporter decomposed (erf-GELU is Div, Erf, Add, Mul, Mul
//     whatever order the exporter wrote them in).
//
// Usage:
//   gpusim::PatternMatcher m(graph);
//   gpusim::Pattern silu = gpusim::region_pattern("silu", {{"Sigmoid", 1}, {"Mul", 1}});
//   for (const gpusim::PatternMatch& hit : m.match_all(silu)) ...   // hit.nodes: node indices
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/kernel_work.h"

namespace gpusim {

// How a node runs as a kernel (NodeKind, kernel_work.h; GraphIndex::kind holds it per node).
GPUSIM_API std::string_view node_kind_name(NodeKind k);  // "pointwise", "main-loop", "rowwise", "none"
GPUSIM_API NodeKind node_kind(const Graph& g, const Node& n);
// The same from the node's work, when the caller has it (node_work(g, n)).
GPUSIM_API NodeKind node_kind(const Node& n, const std::optional<KernelWork>& work);

// One node of a pattern.
struct GPUSIM_API NodeSelector {
  // The node matches when its op type is in `ops` or its op class (op_class_name: "elementwise",
  // "data-movement", ...) is in `classes` — either list empty: no test on it, both empty: any
  // node — and, when `kinds` is not empty, its kind (node_kind_name) is in `kinds`.
  std::vector<std::string> ops;
  std::vector<std::string> classes;
  std::vector<std::string> kinds;
  // Its inputs other than the one the chain arrives on.
  enum class Operand {
    kAny,
    kConstant,  // scalar constants only (one element)
    kWeight,    // weights or constants (no activation)
    kBias,      // exactly one, a weight or constant with as many elements as the output's last dim
    kNone,      // no other input
  };
  Operand others = Operand::kAny;
  // Output elements against the previous step's node: any, the same, or at least as many (an
  // elementwise chain may broadcast up, never reduce).
  enum class Elements { kAny, kSame, kNotFewer };
  Elements elements = Elements::kAny;
  // Transposes only: the permutation swaps the last two axes and keeps the others (a GEMM reads
  // such an operand in place).
  bool swaps_last_two = false;
  int min = 1, max = 1;  // times the step repeats (min 0: optional)
};

struct GPUSIM_API Pattern {
  std::string name;
  enum class Shape { kChain, kRegion };
  Shape shape = Shape::kChain;
  std::vector<NodeSelector> steps;          // kChain
  std::map<std::string, int> region_ops;    // kRegion: op type -> count
  // What the kernel is called in the runtime's host-time table ("gelu", "linear", "sdpa"); empty:
  // the framework name of its first node's op.
  std::string call;
  // The fusion the kernel records in a plan ("attention" makes it one flash-style kernel;
  // "gemm-epilogue", "elementwise-chain", ...); empty: the pattern's name.
  std::string fusion;
  // The step (chain) or op type (region) whose node sets the kernel's class; -1 / "": the first
  // main loop, else the first row-wise node, else the first node.
  int anchor_step = -1;
  // Where it came from, for messages ("runtimes/pytorch-eager.yaml: kernels[2]").
  std::string origin;
};

// A region pattern of these op types.
GPUSIM_API Pattern region_pattern(std::string name, std::map<std::string, int> ops);

struct GPUSIM_API PatternMatch {
  std::vector<int> nodes;  // node indices, in graph order
  int anchor = 0;          // position in `nodes` of the node that sets the kernel's class
};

// Matches patterns in one graph. Built once per graph (indexes readers through views); cheap to query.
class GPUSIM_API PatternMatcher {
 public:
  explicit PatternMatcher(const Graph& g);
  // With the graph's index already built (index_graph(g)): no node is priced again.
  PatternMatcher(const Graph& g, GraphIndex idx);

  const Graph& graph() const { return g_; }
  const GraphIndex& index() const { return idx_; }
  NodeKind kind(int node) const { return kind_[static_cast<size_t>(node)]; }
  bool runs(int node) const { return kind_[static_cast<size_t>(node)] != NodeKind::kNone; }
  // The one run-time node that reads everything `node` writes (through views), or -1: none, several,
  // or an output of the graph.
  int sole_consumer(int node) const { return consumer_[static_cast<size_t>(node)]; }
  // Run-time nodes reading each tensor (through views), by the tensor the views resolve to.
  const std::vector<int>& readers(TensorId t) const;
  TensorId resolve(TensorId t) const { return alias_[static_cast<size_t>(t)]; }
  bool escapes(TensorId t) const { return escapes_[static_cast<size_t>(alias_[static_cast<size_t>(t)])]; }

  bool selects(const NodeSelector& s, int node, int prev) const;
  // The chain or region `p` starting at `node` (a chain's first step, a region's first node in
  // graph order), or nullopt. Nodes in `taken` (when given) are never matched.
  std::optional<PatternMatch> match_at(const Pattern& p, int node, const std::vector<uint8_t>* taken = nullptr) const;
  // Every match in graph order, each node in at most one (earlier matches win).
  std::vector<PatternMatch> match_all(const Pattern& p, std::vector<uint8_t>* taken = nullptr) const;
  // A two-step chain `p` on a producer and one of its readers (which need not be its only one).
  bool matches_pair(const Pattern& p, int producer, int consumer) const;

 private:
  std::optional<PatternMatch> match_chain(const Pattern& p, int node, const std::vector<uint8_t>* taken) const;
  std::optional<PatternMatch> match_region(const Pattern& p, int node, const std::vector<uint8_t>* taken) const;
  bool others_ok(const NodeSelector& s, int node, TensorId chain_in, TensorId region_in) const;
  int anchor_of(const Pattern& p, const std::vector<int>& nodes, const std::vector<int>& steps) const;

  const Graph& g_;
  GraphIndex idx_;
  std::vector<NodeKind> kind_;
  std::vector<TensorId> alias_;
  std::vector<std::vector<int>> readers_;
  std::vector<uint8_t> escapes_;
  std::vector<int> consumer_;
};

// Whether nodes of these kinds may run as one kernel: one main loop, or a pass over rows, at most
// (an attention kernel has its two main loops and the softmax's rows).
GPUSIM_API bool kinds_fuse(int main_loops, int row_passes, bool attention);

// The planner's fusion passes, as patterns, in the order it tries them on a producer and its sole
// consumer (the first that matches names the candidate): batchnorm-fold, elementwise-chain,
// gemm-epilogue, norm-prologue, norm-epilogue, transpose-into-gemm, fold-data-movement (the ops of
// folded_data_movement() read by an element-wise kernel through index math); then attention (a
// chain from the QK^T MatMul to the PV MatMul). scheduler.h's "recompute" is not a chain: it has
// several readers.
GPUSIM_API const std::vector<Pattern>& planner_pair_passes();
// The data movement codegen folds into an element-wise reader's loads: Transpose, Slice, Pad,
// Concat, Split, Expand.
GPUSIM_API const std::vector<std::string>& folded_data_movement();
GPUSIM_API const Pattern& planner_attention_pass();

}  // namespace gpusim
