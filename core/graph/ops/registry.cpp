#include "ops/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace gpusim::ops {

// Through the node's one typed accessor (graph.h).
int64_t InferContext::attr_i(const std::string& k, int64_t def) const { return node_.attr_int(k, def); }
double InferContext::attr_f(const std::string& k, double def) const { return node_.attr_float(k, def); }
std::string InferContext::attr_s(const std::string& k, const std::string& def) const { return node_.attr_string(k, def); }
std::vector<int64_t> InferContext::attr_ints(const std::string& k) const { return node_.attr_ints(k); }
std::vector<double> InferContext::attr_floats(const std::string& k) const { return node_.attr_floats(k); }

Status InferContext::need(size_t i, const char* what) const {
  if (has_input(i)) return Ok{};
  return fail(fmt::format("input {} ({}) is required but missing", i, what));
}

Result<const Value*> InferContext::need_value(size_t i, const char* what) const {
  if (auto s = need(i, what); !s) return s.error();
  if (const Value* v = value(i)) return v;
  if (!in(i).data_absent.empty()) {
    return make_error(ErrorCode::kDataDependent,
                      fmt::format("input {} ({}, initializer \"{}\") must be known before run time to fix the output "
                                  "shape, but its data could not be read: {}",
                                  i, what, in(i).name, in(i).data_absent));
  }
  return make_error(ErrorCode::kDataDependent, fmt::format("input {} ({}, tensor \"{}\") must be known before run time to fix the output shape, "
                          "but it is computed from run-time data; export the model with static shapes "
                          "(e.g. torch.onnx.export without dynamic_axes on this path)",
                          i, what, in(i).name));
}

Result<int64_t> InferContext::axis(int64_t a, int64_t r, const char* what) const {
  if (a < -r || a >= std::max<int64_t>(r, 1)) {
    return fail(fmt::format("{} = {} is out of range [{}, {}) for a rank-{} input", what, a, -r, r, r));
  }
  return a < 0 ? a + r : a;
}

Status InferContext::set(size_t i, DType t, Shape s) {
  if (const std::string why = shape_problem(s); !why.empty()) return fail(fmt::format("output {}: {}", i, why));
  Tensor& o = out_.at(i);
  o.dtype = t;
  o.shape = std::move(s);
  o.is_sequence = false;
  return Ok{};
}

void InferContext::set_value(size_t i, Value v) {
  Tensor& o = out_.at(i);
  if (!value_fits(o.elements())) return;
  v.dtype = o.dtype;
  v.shape = o.shape;
  o.value = std::move(v);
}

void InferContext::set_sequence(size_t i, DType t, std::vector<Shape> elements) {
  Tensor& o = out_.at(i);
  o.dtype = t;
  o.shape.clear();
  o.is_sequence = true;
  o.sequence_shapes = std::move(elements);
}

int64_t CostContext::attr_i(const std::string& k, int64_t def) const { return n_.attr_int(k, def); }
std::string CostContext::attr_s(const std::string& k, const std::string& def) const { return n_.attr_string(k, def); }

Result<Shape> broadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return make_error(ErrorCode::kShape, fmt::format("shapes {} and {} do not broadcast (axis {}: {} vs {})",
                                                       shape_str(a), shape_str(b), i, da, db));
    }
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

int64_t broadcast_index(const Shape& out, const Shape& in, int64_t flat) {
  const size_t off = out.size() - in.size();
  int64_t idx = 0;
  int64_t stride = 1;
  for (size_t i = out.size(); i-- > 0;) {
    const int64_t coord = flat % out[i];
    flat /= out[i];
    if (i >= off) {
      const int64_t d = in[i - off];
      if (d != 1) idx += coord * stride;
      stride *= d;
    }
  }
  return idx;
}

std::vector<int64_t> value_ints(const Value& v) {
  std::vector<int64_t> r(static_cast<size_t>(v.size()));
  for (int64_t i = 0; i < v.size(); ++i) r[static_cast<size_t>(i)] = v.as_int(i);
  return r;
}

Value make_value(DType t, Shape s) {
  Value v;
  v.dtype = t;
  v.shape = std::move(s);
  return v;
}

namespace {

std::string_view norm_domain(std::string_view domain) { return domain == "ai.onnx" ? std::string_view{} : domain; }

// Op type -> its definitions (one per domain that defines it), looked up without building a key:
// every cost, kind and class query of every node asks, many times per plan.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Table = std::unordered_map<std::string, std::vector<OpDef>, NameHash, std::equal_to<>>;

const Table& table() {
  static const Table t = [] {
    Table m;
    for (auto family : {elementwise_ops, gemm_conv_ops, reduction_ops, normalization_ops, data_movement_ops,
                        sequence_ops, attention_ops, quantization_ops}) {
      for (const OpDef& d : family()) {
        std::vector<OpDef>& defs = m[std::string(d.op_type)];
        // The first definition of a (domain, op) pair wins, as with one map keyed by both.
        const bool seen = std::any_of(defs.begin(), defs.end(), [&](const OpDef& e) {
          return norm_domain(e.domain) == norm_domain(d.domain);
        });
        if (!seen) defs.push_back(d);
      }
    }
    return m;
  }();
  return t;
}

}  // namespace

const OpDef* find_op(std::string_view domain, std::string_view op_type) {
  const auto& t = table();
  auto it = t.find(op_type);
  if (it == t.end()) return nullptr;
  domain = norm_domain(domain);
  for (const OpDef& d : it->second) {
    if (norm_domain(d.domain) == domain) return &d;
  }
  return nullptr;
}

}  // namespace gpusim::ops

namespace gpusim {

std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kGemm: return "gemm";
    case OpClass::kConv: return "conv";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kReduction: return "reduction";
    case OpClass::kNormalization: return "normalization";
    case OpClass::kDataMovement: return "data-movement";
    case OpClass::kAttention: return "attention";
  }
  return "elementwise";
}

bool op_supported(std::string_view domain, std::string_view op_type) {
  return ops::find_op(domain, op_type) != nullptr;
}

std::optional<OpClass> op_class(std::string_view domain, std::string_view op_type) {
  const ops::OpDef* d = ops::find_op(domain, op_type);
  if (!d) return std::nullopt;
  return d->cls;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (auto family : {ops::elementwise_ops, ops::gemm_conv_ops, ops::reduction_ops, ops::normalization_ops,
                      ops::data_movement_ops, ops::sequence_ops, ops::attention_ops, ops::quantization_ops}) {
    for (const ops::OpDef& d : family()) {
      names.push_back(d.domain.empty() ? std::string(d.op_type) : fmt::format("{}:{}", d.domain, d.op_type));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

OpCost op_cost(const Graph& g, const Node& n) {
  OpCost c;
  const ops::OpDef* d = ops::find_op(n.domain, n.op_type);
  if (d) c.cls = d->cls;
  if (n.folded || !d) return c;
  for (TensorId t : n.inputs) {
    if (t != kNoTensor) c.bytes_read += g.tensor(t).bytes();
  }
  for (TensorId t : n.outputs) {
    if (t != kNoTensor) c.bytes_written += g.tensor(t).bytes();
  }
  if (d->cost) d->cost(ops::CostContext(g, n), c);
  return c;
}

}  // namespace gpusim
