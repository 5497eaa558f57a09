// Internal: the table behind op_catalog.h and shape inference. Each ops/*.cpp file contributes the
// ops of one family through a function returning its OpDefs; registry.cpp merges them once.
//
// An OpDef has two functions:
//   infer(InferContext&): sets each output's dtype and static shape, and its value when every input
//     it needs has a known value (shape arithmetic is folded this way);
//   cost(CostContext&, OpCost&): fills MACs, FLOPs by kind and bytes (defaults: all inputs read,
//     all outputs written, no FLOPs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/op_catalog.h"
#include "gpusim/result.h"

namespace gpusim::ops {

class InferContext {
 public:
  InferContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs, int64_t opset,
               std::vector<std::string>* notes = nullptr)
      : node_(node), in_(std::move(inputs)), out_(outputs), opset_(opset), notes_(notes) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  size_t num_inputs() const { return in_.size(); }
  size_t num_outputs() const { return out_.size(); }
  bool has_input(size_t i) const { return i < in_.size() && in_[i] != nullptr; }
  const Tensor& in(size_t i) const { return *in_.at(i); }
  const Shape& shape(size_t i) const { return in_.at(i)->shape; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(in_.at(i)->shape.size()); }
  DType dtype(size_t i) const { return in_.at(i)->dtype; }
  const Value* value(size_t i) const { return has_input(i) && in_[i]->value ? &*in_[i]->value : nullptr; }
  Tensor& out(size_t i) { return out_.at(i); }
  // A context over some of this node's inputs in the order given (-1: absent), writing the same
  // outputs: an op that is another op with extra operands (QLinearConv is a Conv of inputs 0 and 3)
  // infers through the other's rule.
  InferContext remapped(const std::vector<int>& order) const {
    std::vector<const Tensor*> ins;
    for (int i : order) ins.push_back(i >= 0 && has_input(static_cast<size_t>(i)) ? in_[static_cast<size_t>(i)] : nullptr);
    return InferContext(node_, std::move(ins), out_, opset_, notes_);
  }

  bool has_attr(const std::string& k) const { return node_.attr(k) != nullptr; }
  int64_t attr_i(const std::string& k, int64_t def) const;
  double attr_f(const std::string& k, double def) const;
  std::string attr_s(const std::string& k, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& k) const;  // empty if absent
  std::vector<double> attr_floats(const std::string& k) const;
  bool attr_strings_empty(const std::string& k) const {
    const Attribute* a = node_.attr(k);
    return !a || a->strings.empty();
  }

  // An error naming nothing but the problem; the importer prefixes file and node.
  Error fail(const std::string& msg) const { return make_error(ErrorCode::kShape, msg); }
  // Requires input i to exist; fails with a message naming the input slot otherwise.
  Status need(size_t i, const char* what) const;
  // Requires input i's value to be known at import time (a constant or folded shape arithmetic).
  Result<const Value*> need_value(size_t i, const char* what) const;
  // Normalizes an axis in [-r, r) to [0, r); fails naming the attribute otherwise.
  Result<int64_t> axis(int64_t a, int64_t r, const char* what) const;

  // Sets output i to dtype/shape; checks the element count fits in 64 bits.
  Status set(size_t i, DType t, Shape s);
  // Sets output i's value (shape and dtype must already be set) when small enough.
  void set_value(size_t i, Value v);
  // Sets output i to a sequence of tensors of the given element shapes.
  void set_sequence(size_t i, DType t, std::vector<Shape> elements);
  // Marks the outputs as an upper bound (data-dependent sizes); the importer prefers a shape the
  // model declares, if any.
  void mark_estimate() { estimate_ = true; }
  bool is_estimate() const { return estimate_; }
  // Records an estimate the user should know about (shown by `gpusim inspect`).
  void note(const std::string& msg) const {
    if (notes_) notes_->push_back(msg);
  }

 private:
  const Node& node_;
  std::vector<const Tensor*> in_;
  std::vector<Tensor>& out_;
  int64_t opset_;
  std::vector<std::string>* notes_;
  bool estimate_ = false;
};

class CostContext {
 public:
  CostContext(const Graph& g, const Node& n) : g_(g), n_(n) {}
  const Node& node() const { return n_; }
  bool has_input(size_t i) const { return i < n_.inputs.size() && n_.inputs[i] != kNoTensor; }
  const Tensor& in(size_t i) const { return g_.tensor(n_.inputs.at(i)); }
  const Tensor& out(size_t i) const { return g_.tensor(n_.outputs.at(i)); }
  size_t num_inputs() const { return n_.inputs.size(); }
  size_t num_outputs() const { return n_.outputs.size(); }
  int64_t out_elems(size_t i = 0) const { return out(i).elements(); }
  int64_t in_elems(size_t i = 0) const { return in(i).elements(); }
  int64_t attr_i(const std::string& k, int64_t def) const;
  std::string attr_s(const std::string& k, const std::string& def) const;

 private:
  const Graph& g_;
  const Node& n_;
};

using InferFn = Status (*)(InferContext&);
using CostFn = void (*)(const CostContext&, OpCost&);

struct OpDef {
  std::string_view op_type;
  std::string_view domain;  // "" = default ONNX domain
  OpClass cls;
  InferFn infer;
  CostFn cost;  // may be null: bytes only
};

const OpDef* find_op(std::string_view domain, std::string_view op_type);

// Families, one per file.
std::vector<OpDef> elementwise_ops();
std::vector<OpDef> gemm_conv_ops();
std::vector<OpDef> reduction_ops();
std::vector<OpDef> normalization_ops();
std::vector<OpDef> data_movement_ops();
std::vector<OpDef> sequence_ops();
std::vector<OpDef> attention_ops();
std::vector<OpDef> quantization_ops();

// Shared rules: MatMul's and Conv's output shapes (gemm_conv.cpp), for ops that are those with
// extra operands (quantization.cpp: QLinearMatMul, QLinearConv) through InferContext::remapped.
Status matmul_shape(InferContext& c);
Status conv_shape(InferContext& c);

// Shared helpers.
Result<Shape> broadcast(const Shape& a, const Shape& b);
// Row-major strides and index helpers for small value evaluation.
std::vector<int64_t> strides_of(const Shape& s);
// Value of a broadcast input at the output's flat index.
int64_t broadcast_index(const Shape& out, const Shape& in, int64_t flat);
// Reads a 1-D integer value (axes, shape vectors) as int64s.
std::vector<int64_t> value_ints(const Value& v);
// Creates a value of the given dtype/shape; callers fill ints or reals.
Value make_value(DType t, Shape s);
// Whether a small value can be kept for an output of this many elements.
inline bool value_fits(int64_t elems) { return elems >= 0 && elems <= kMaxConstElements; }

}  // namespace gpusim::ops
