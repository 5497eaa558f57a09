// Graph IR: what the simulator, the planner and the executors see of a model.
//
// A Graph is a list of ops in topological order over named tensors with static shapes. It holds no
// weight data: a weight is its dtype and dims. Only small constants (at most kMaxConstElements
// elements: shape vectors, axes, scalars) keep their values, because shape arithmetic needs them.
// The ONNX importer (onnx_import.h) builds it; nothing here knows about protobuf.
//
// Usage:
//   const gpusim::Graph& g = ...;
//   for (const gpusim::Node& n : g.nodes) {
//     const gpusim::Tensor& out = g.tensor(n.outputs[0]);
//     fmt::print("{} {} -> {}\n", n.op_type, n.name, gpusim::shape_str(out.shape));
//   }
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/result.h"

namespace gpusim {

using Shape = std::vector<int64_t>;

// Element count of a shape, or nullopt when the product overflows int64.
GPUSIM_API std::optional<int64_t> shape_elements(const Shape& s);

// The most elements one tensor may have: 2^40 (8 TiB of fp64, far past any device's memory). Within
// it every byte count, FLOP count and memory sum gpusim computes from shapes fits in 64 bits, so a
// larger tensor is refused where it enters (a graph input, an initializer, an op's output).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
// Why `s` is not a shape gpusim takes — a negative dim, or more than kMaxTensorElements elements —
// or "" when it is one.
GPUSIM_API std::string shape_problem(const Shape& s);
GPUSIM_API std::string shape_str(const Shape& s);  // "[1, 3, 224, 224]"

// Constants with at most this many elements keep their values in the IR.
inline constexpr int64_t kMaxConstElements = 64;
// A node attribute's tensor (a Constant's value: position ids, a causal mask) keeps its values up to
// this many elements, and all of a graph's such tensors up to kMaxConstAttrTotalElements, so the
// executors can produce it; shape arithmetic still sees only values within kMaxConstElements.
inline constexpr int64_t kMaxConstAttrElements = int64_t{1} << 22;
inline constexpr int64_t kMaxConstAttrTotalElements = int64_t{1} << 23;

// A double as an int64: truncated toward zero, NaN as 0, and past int64's range its nearest end
// (no undefined behaviour on a hostile file's float axes, shapes or sizes).
inline int64_t saturate_int64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// The value of a small constant tensor. Integer and bool types use `ints`, floating types `reals`.
struct GPUSIM_API Value {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  bool is_int() const { return !dtype_is_float(dtype); }
  int64_t size() const { return is_int() ? static_cast<int64_t>(ints.size()) : static_cast<int64_t>(reals.size()); }
  double as_real(int64_t i) const { return is_int() ? static_cast<double>(ints[i]) : reals[i]; }
  // A real read as an integer truncates toward zero and saturates: NaN is 0, and a value past
  // int64's range is its nearest end (a float tensor used as axes or a shape in a hostile file).
  int64_t as_int(int64_t i) const { return is_int() ? ints[i] : saturate_int64(reals[i]); }
};

enum class TensorRole {
  kInput,       // graph input fed at run time
  kWeight,      // initializer (parameters; data may be absent from the file)
  kConstant,    // computed at import time (Constant nodes, folded shape arithmetic)
  kActivation,  // intermediate produced by a node at run time
  kOutput,      // graph output
};
GPUSIM_API std::string_view role_name(TensorRole r);

struct GPUSIM_API Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  TensorRole role = TensorRole::kActivation;
  // ONNX sequence values (SequenceConstruct ...): the shape of each element; `shape` is then empty.
  bool is_sequence = false;
  std::vector<Shape> sequence_shapes;
  std::optional<Value> value;  // set for small constants and folded values
  // Why a small initializer has no value although it should (its external data file is missing,
  // or an upload cannot carry one); "" otherwise.
  std::string data_absent;

  int64_t elements() const;  // product of shape (0 for sequences: see sequence_shapes)
  int64_t bytes() const;     // storage in bytes; sequences sum their elements
};

struct Graph;

// An attribute value. Subgraph attributes (If/Loop/Scan bodies) are resolved by the importer and
// never reach the IR.
struct GPUSIM_API Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::optional<Value> tensor;  // within kMaxConstAttrElements; a larger one keeps dtype+shape only
  DType tensor_dtype = DType::kUndefined;
  Shape tensor_shape;
  std::string tensor_absent;  // why `tensor` has no data although it has elements ("" when it has)
};

using TensorId = int32_t;
inline constexpr TensorId kNoTensor = -1;  // an omitted optional input

struct GPUSIM_API Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::map<std::string, Attribute> attributes;
  // True when every output was computed at import time (shape arithmetic); such a node costs
  // nothing at run time.
  bool folded = false;

  const Attribute* attr(const std::string& key) const;
  // The one typed accessor every tier reads attributes through (shape inference and op costs in
  // the core, the CPU reference, codegen): the attribute's value, or `def` (an empty list) when
  // the node does not have it.
  int64_t attr_int(const std::string& key, int64_t def) const;
  double attr_float(const std::string& key, double def) const;
  std::string attr_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::vector<double> attr_floats(const std::string& key) const;
};

struct GPUSIM_API Graph {
  std::string name;
  std::string source_path;  // the file it came from, for messages
  int64_t opset = 0;        // default-domain opset
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;  // topological order
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::unordered_map<std::string, TensorId> by_name;
  // Notes the importer wants the user to see (e.g. "weights are not in the file").
  std::vector<std::string> notes;

  const Tensor& tensor(TensorId id) const { return tensors.at(static_cast<size_t>(id)); }
  Tensor& tensor(TensorId id) { return tensors.at(static_cast<size_t>(id)); }
  std::optional<TensorId> find(const std::string& name) const;
  // Adds a tensor with a fresh id; the name must be unique.
  TensorId add_tensor(Tensor t);
};

// A copy of `g` whose floating-point tensors (fp64/32/16, bf16; small values too) have type `t`,
// and whose Casts to a float type cast to `t`.
GPUSIM_API Graph retype(const Graph& g, DType t);

}  // namespace gpusim
