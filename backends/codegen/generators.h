// Inside codegen: the generators, one per kernel class, and what they share — the list of a
// kernel's buffer arguments, index arithmetic with shapes baked in, and the fused elementwise
// epilogue that GEMM, convolution and normalization kernels apply to their output values.
#pragma once

#include <string>
#include <vector>

#include "codegen.h"
#include "gpusim/kernel_work.h"

namespace gpusim::codegen {

// Indices are 32-bit in generated kernels: a tensor over this many elements is refused.
inline constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;

struct GenContext {
  const Graph& g;
  const GraphIndex& idx;
  const PlanKernel& k;
  const Options& opts;

  const Node& node(size_t pos) const { return g.nodes[static_cast<size_t>(k.nodes[pos])]; }
  const Node& anchor() const { return node(static_cast<size_t>(k.anchor)); }
  const Tensor& tensor(TensorId t) const { return g.tensor(t); }
  TensorId root(TensorId t) const { return idx.root[static_cast<size_t>(t)]; }
  // "model.onnx: node "x" (Op): " — the start of every kUnsupported message.
  std::string where(const Node& n) const;
  Error unsupported(const Node& n, const std::string& why) const;
};

// A kernel's buffer arguments: each tensor's memory (its view root) once, in first-use order.
class ArgList {
 public:
  ArgList(const GenContext& c) : c_(c) {}  // NOLINT
  int input(TensorId t);   // binding index of a buffer the kernel reads
  int output(TensorId t);  // binding index of a buffer the kernel writes
  // The load expression of element `index` of tensor t's buffer (float for float tensors, int for
  // integer ones), and a store statement.
  std::string load(TensorId t, const std::string& index);
  std::string store(TensorId t, const std::string& index, const std::string& value);
  // Statements loading (storing) `width` consecutive elements of t's buffer, from element `base`
  // (an int expression, a multiple of width), into (from) the float or int array `array`: vector
  // accesses of at most 16 bytes each (Arg::vector, LDVk/STVk in dialect.h).
  std::string load_vector(TensorId t, const std::string& base, const std::string& array, int width);
  std::string store_vector(TensorId t, const std::string& base, const std::string& array, int width);
  bool is_int(TensorId t) const { return !dtype_is_float(c_.tensor(t).dtype); }
  // The uint expression of the 32-bit word holding bytes `index` .. `index` + 3 of byte tensor t
  // (index a multiple of 4; LDWk in dialect.h): four packed bytes in one load.
  std::string load_word(TensorId t, const std::string& index);
  // Whether binding k holds fp16.
  bool half(int k) const { return args[static_cast<size_t>(k)].storage == Storage::kF16; }
  std::vector<Arg> args;

 private:
  int find_or_add(TensorId t, bool written);
  std::string vector_access(int k, const char* macro, const std::string& base, const std::string& array, int width);
  const GenContext& c_;
};

// Row-major strides of a shape (elements).
std::vector<int64_t> strides_of(const Shape& s);
// Flat index into `in` (broadcast to `out` numpy-style) of the element at flat index `flat` of
// `out`, as an int expression with constants baked in. Fails past 2^31 - 1 elements.
std::string broadcast_index(const Shape& out, const Shape& in, const std::string& flat);
// The int expression for coordinate `axis` of flat index `flat` in shape s.
std::string coord(const Shape& s, size_t axis, const std::string& flat);
// A float literal that round-trips ("1.0f", "-3.5e-05f", "INF_F").
std::string float_lit(double v);
// Groups for `n` threads of `block` threads each, spread over x and y when x would exceed 65535.
std::array<uint32_t, 3> groups_for(int64_t n, uint32_t block);
// The linear group index matching groups_for's spreading: "(GRP_Y * NGRP_X + GRP_X)".
inline const char* kLinearGroup = "(GRP_Y * NGRP_X + GRP_X)";

// Elementwise code for the group's nodes other than `skip` (the anchor; -1: none), applied at one
// element. Precondition: `value` (a float variable, -- unused when skip is -1) holds the anchor's
// output at flat index `index` (an int variable indexing the anchor's output, or with skip = -1 the
// group's output shape `space`). The statements compute every downstream elementwise node, loading
// their other inputs with broadcasting, and store each tensor the group must write: those read
// outside the group or returned by the graph (the anchor's output too, when so). kUnsupported when
// a node is not elementwise or its output does not have the shape of the index space.
//
// With `lanes` (gen_elementwise only, skip = -1), the statements run once per lane of a vector
// step: `index` (defined by the caller as i0 + j, j < lanes->width) covers width consecutive
// elements from i0 (a multiple of width). Inputs that are contiguous over the step (same shape as
// the output, or broadcast with a run of equal trailing dims that width divides) are read as
// arrays loaded before the lane loop (lanes->pre, vector loads) and indexed by lanes->lane;
// stored values go into arrays stored after it (lanes->post, vector stores). Other inputs are
// loaded per lane.
struct Lanes {
  int width = 1;
  std::string base = "i0", lane = "j";
  std::string pre, post;  // filled by elementwise_tail
};
Result<std::string> elementwise_tail(const GenContext& c, ArgList& args, int skip, const std::string& value,
                                     const std::string& index, const Shape& space, Lanes* lanes = nullptr);

// Whether tensor t (a group node's output) must be stored: read by a node outside the group, or
// (through views) a graph output.
bool escapes(const GenContext& c, TensorId t);

// The generators. Each returns kUnsupported (naming node and reason) for what it does not cover.
Result<Kernel> gen_elementwise(const GenContext& c);
Result<Kernel> gen_gemm(const GenContext& c);        // MatMul, Gemm (+ epilogue)
Result<Kernel> gen_conv(const GenContext& c);        // Conv as implicit GEMM (+ epilogue)
Result<Kernel> gen_attention(const GenContext& c);   // QK^T, scale/mask, softmax, PV as one kernel
Result<Kernel> gen_reduction(const GenContext& c);   // Reduce*, Softmax/LogSoftmax, norms, pooling, ArgMax
Result<Kernel> gen_data_movement(const GenContext& c);  // Transpose, Concat, Slice, Gather, Expand, Pad, Resize, ...

// The scalar expression of one elementwise op on its input expressions (float or int, per
// `int_in`); sets `int_out` to whether the result is an int expression.
Result<std::string> scalar_op(const GenContext& c, const Node& n, const std::vector<std::string>& in,
                              const std::vector<bool>& int_in, bool& int_out);
// The index of QuantizeLinear's / DequantizeLinear's input k (1: scale, 2: zero point) at flat
// output index `index` of shape `out`: "0" per tensor, the axis coordinate per axis; nullopt for
// other ops and inputs (broadcast as usual); empty with *why set where it cannot be generated.
std::optional<std::string> quant_param_index(const GenContext& c, const Node& n, size_t k, const Shape& out,
                                             const std::string& index, std::string* why);

}  // namespace gpusim::codegen
