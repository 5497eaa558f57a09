// Elementwise ops: one output element from the corresponding (broadcast) input elements.
// FLOPs per output element are in kUnary / kBinary below, by kind (see op_catalog.h). Where every
// input value is known at import time the result is folded (shape arithmetic: Add, Mul, Div, Cast,
// Equal, Where ... over shape vectors).
#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <unordered_map>

#include "ops/checked.h"
#include "ops/registry.h"

namespace gpusim::ops {
namespace {

struct PerElement {
  int fma;
  int trans;
  int cmp;
};

enum class OutType { kSame, kBool };

struct UnarySpec {
  PerElement work;
  OutType out = OutType::kSame;
  double (*fold)(double) = nullptr;  // evaluation for folding, when meaningful
};

double f_neg(double x) { return -x; }
double f_abs(double x) { return std::fabs(x); }
double f_floor(double x) { return std::floor(x); }
double f_ceil(double x) { return std::ceil(x); }
double f_round(double x) { return std::nearbyint(x); }
double f_sqrt(double x) { return std::sqrt(x); }
double f_relu(double x) { return x > 0 ? x : 0; }
double f_sign(double x) { return x > 0 ? 1 : (x < 0 ? -1 : 0); }
double f_exp(double x) { return std::exp(x); }
double f_log(double x) { return std::log(x); }
double f_recip(double x) { return 1.0 / x; }
double f_not(double x) { return x == 0 ? 1 : 0; }
double f_ident(double x) { return x; }

const std::unordered_map<std::string_view, UnarySpec>& unary_specs() {
  static const std::unordered_map<std::string_view, UnarySpec> m = {
      {"Abs", {{0, 0, 1}, OutType::kSame, f_abs}},
      {"Neg", {{1, 0, 0}, OutType::kSame, f_neg}},
      {"Relu", {{0, 0, 1}, OutType::kSame, f_relu}},
      {"Sign", {{0, 0, 2}, OutType::kSame, f_sign}},
      {"Floor", {{0, 0, 1}, OutType::kSame, f_floor}},
      {"Ceil", {{0, 0, 1}, OutType::kSame, f_ceil}},
      {"Round", {{0, 0, 1}, OutType::kSame, f_round}},
      {"Sqrt", {{0, 1, 0}, OutType::kSame, f_sqrt}},
      {"Reciprocal", {{0, 1, 0}, OutType::kSame, f_recip}},
      {"Exp", {{0, 1, 0}, OutType::kSame, f_exp}},
      {"Log", {{0, 1, 0}, OutType::kSame, f_log}},
      {"Not", {{0, 0, 1}, OutType::kBool, f_not}},
      {"Identity", {{0, 0, 0}, OutType::kSame, f_ident}},
      {"Sigmoid", {{1, 2, 0}}},          // 1 / (1 + exp(-x)): exp, reciprocal, add
      {"Tanh", {{0, 1, 0}}},
      {"Erf", {{0, 1, 0}}},
      {"Sin", {{0, 1, 0}}}, {"Cos", {{0, 1, 0}}}, {"Tan", {{0, 1, 0}}},
      {"Asin", {{0, 1, 0}}}, {"Acos", {{0, 1, 0}}}, {"Atan", {{0, 1, 0}}},
      {"Sinh", {{0, 1, 0}}}, {"Cosh", {{0, 1, 0}}}, {"Asinh", {{0, 1, 0}}},
      {"Acosh", {{0, 1, 0}}}, {"Atanh", {{0, 1, 0}}},
      {"Softplus", {{1, 2, 0}}},         // log(1 + exp(x))
      {"Softsign", {{1, 1, 1}}},         // x / (1 + |x|)
      {"Elu", {{2, 1, 1}}},              // x < 0 ? alpha * (exp(x) - 1) : x
      {"Celu", {{3, 2, 2}}},
      {"Selu", {{3, 1, 1}}},
      {"LeakyRelu", {{1, 0, 1}}},
      {"ThresholdedRelu", {{0, 0, 2}}},
      {"HardSigmoid", {{2, 0, 2}}},      // clamp(alpha * x + beta, 0, 1)
      {"HardSwish", {{3, 0, 2}}},
      {"Mish", {{2, 3, 0}}},             // x * tanh(softplus(x))
      {"Gelu", {{4, 1, 0}}},             // 0.5 x (1 + erf(x / sqrt 2)) or the tanh form
      {"Shrink", {{1, 0, 2}}},
      {"IsNaN", {{0, 0, 1}, OutType::kBool}},
      {"IsInf", {{0, 0, 2}, OutType::kBool}},
      {"BitwiseNot", {{0, 0, 1}}},
      {"Dropout", {{0, 0, 0}, OutType::kSame, f_ident}},  // inference: identity (mask output if asked)
      {"StringNormalizer", {{0, 0, 1}}},
  };
  return m;
}

enum class BinKind { kArith, kCompare, kLogic };
struct BinarySpec {
  PerElement work;
  BinKind kind;
};

const std::unordered_map<std::string_view, BinarySpec>& binary_specs() {
  static const std::unordered_map<std::string_view, BinarySpec> m = {
      {"Add", {{1, 0, 0}, BinKind::kArith}},     {"Sub", {{1, 0, 0}, BinKind::kArith}},
      {"Mul", {{1, 0, 0}, BinKind::kArith}},     {"Div", {{0, 1, 0}, BinKind::kArith}},
      {"Pow", {{0, 2, 0}, BinKind::kArith}},     {"Mod", {{0, 1, 0}, BinKind::kArith}},
      {"PRelu", {{1, 0, 1}, BinKind::kArith}},   {"BitShift", {{0, 0, 1}, BinKind::kArith}},
      {"BitwiseAnd", {{0, 0, 1}, BinKind::kArith}}, {"BitwiseOr", {{0, 0, 1}, BinKind::kArith}},
      {"BitwiseXor", {{0, 0, 1}, BinKind::kArith}},
      {"Equal", {{0, 0, 1}, BinKind::kCompare}}, {"Less", {{0, 0, 1}, BinKind::kCompare}},
      {"Greater", {{0, 0, 1}, BinKind::kCompare}}, {"LessOrEqual", {{0, 0, 1}, BinKind::kCompare}},
      {"GreaterOrEqual", {{0, 0, 1}, BinKind::kCompare}},
      {"And", {{0, 0, 1}, BinKind::kLogic}},     {"Or", {{0, 0, 1}, BinKind::kLogic}},
      {"Xor", {{0, 0, 1}, BinKind::kLogic}},
      // Variadic: work per output element per extra input.
      {"Max", {{0, 0, 1}, BinKind::kArith}},     {"Min", {{0, 0, 1}, BinKind::kArith}},
      {"Sum", {{1, 0, 0}, BinKind::kArith}},     {"Mean", {{1, 0, 0}, BinKind::kArith}},
  };
  return m;
}

// Evaluates op(a, b) for folding. Integers follow ONNX/C semantics (Div truncates; Mod with
// fmod=0 takes the divisor's sign).
double eval_binary(std::string_view op, double a, double b, bool is_int, bool fmod_attr, bool* ok) {
  *ok = true;
  if (op == "Add" || op == "Sum") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") {
    if (b == 0) { *ok = false; return 0; }
    return is_int ? std::trunc(a / b) : a / b;
  }
  if (op == "Pow") return std::pow(a, b);
  if (op == "Mod") {
    if (b == 0) { *ok = false; return 0; }
    double r = std::fmod(a, b);
    if (!fmod_attr && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  if (op == "Max") return a > b ? a : b;
  if (op == "Min") return a < b ? a : b;
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  if (op == "GreaterOrEqual") return a >= b;
  if (op == "And") return (a != 0) && (b != 0);
  if (op == "Or") return (a != 0) || (b != 0);
  if (op == "Xor") return (a != 0) != (b != 0);
  *ok = false;
  return 0;
}

void store(Value& v, double x) {
  if (v.is_int()) {
    v.ints.push_back(saturate_int64(x));
  } else {
    v.reals.push_back(x);
  }
}

Status infer_unary(InferContext& c) {
  const UnarySpec& spec = unary_specs().at(c.node().op_type);
  if (auto s = c.need(0, "X"); !s) return s;
  const DType out_t = spec.out == OutType::kBool ? DType::kBool : c.dtype(0);
  if (auto s = c.set(0, out_t, c.shape(0)); !s) return s;
  // Dropout's optional mask; other ops have one output.
  for (size_t i = 1; i < c.num_outputs(); ++i) {
    if (auto s = c.set(i, DType::kBool, c.shape(0)); !s) return s;
  }
  if (c.node().op_type == "StringNormalizer" && !c.attr_strings_empty("stopwords")) c.mark_estimate();
  if (const Value* v = c.value(0); v && spec.fold) {
    Value r = make_value(out_t, c.shape(0));
    for (int64_t i = 0; i < v->size(); ++i) store(r, spec.fold(v->as_real(i)));
    c.set_value(0, std::move(r));
  }
  return Ok{};
}

Status infer_binary(InferContext& c) {
  const std::string& op = c.node().op_type;
  const BinarySpec& spec = binary_specs().at(op);
  if (c.num_inputs() == 0) return c.fail("needs at least one input");
  Shape shape;
  // Before opset 7, B broadcasts to A only with broadcast=1 (and PRelu's slope is per channel):
  // the output always has A's shape.
  const bool legacy = c.opset() < 7 || op == "PRelu";
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (auto s = c.need(i, "operand"); !s) return s;
    if (i == 0) {
      shape = c.shape(0);
    } else if (legacy) {
      const Shape& a = c.shape(0);
      const Shape& b = c.shape(i);
      const bool channelwise = b.size() == 1 && a.size() >= 2 && b[0] == a[1];
      auto nb = broadcast(a, b);
      if (!(nb && *nb == a) && !channelwise && !(c.opset() < 7 && c.attr_i("broadcast", 0) != 0)) {
        return c.fail(fmt::format("input {} {} does not broadcast to input 0 {}", i, shape_str(b), shape_str(a)));
      }
    } else {
      auto b = broadcast(shape, c.shape(i));
      if (!b) return c.fail(b.error().message);
      shape = *b;
    }
  }
  const DType out_t = spec.kind == BinKind::kArith ? c.dtype(0) : DType::kBool;
  if (auto s = c.set(0, out_t, shape); !s) return s;
  bool all_known = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) all_known = all_known && c.value(i);
  const int64_t n = c.out(0).elements();
  if (!all_known || !value_fits(n) || legacy) return Ok{};
  const bool is_int = !dtype_is_float(c.dtype(0));
  Value r = make_value(out_t, shape);
  for (int64_t e = 0; e < n; ++e) {
    const Value* v0 = c.value(0);
    double acc = v0->as_real(broadcast_index(shape, v0->shape, e));
    for (size_t i = 1; i < c.num_inputs(); ++i) {
      const Value* vi = c.value(i);
      bool ok = true;
      acc = eval_binary(op, acc, vi->as_real(broadcast_index(shape, vi->shape, e)), is_int,
                        c.attr_i("fmod", 0) != 0, &ok);
      if (!ok) return Ok{};  // e.g. division by zero: leave it to run time
    }
    if (op == "Mean") acc /= static_cast<double>(c.num_inputs());
    store(r, acc);
  }
  c.set_value(0, std::move(r));
  return Ok{};
}

Status infer_where(InferContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    if (auto s = c.need(i, i == 0 ? "condition" : (i == 1 ? "X" : "Y")); !s) return s;
  }
  auto ab = broadcast(c.shape(0), c.shape(1));
  if (!ab) return c.fail(ab.error().message);
  auto abc = broadcast(*ab, c.shape(2));
  if (!abc) return c.fail(abc.error().message);
  if (auto s = c.set(0, c.dtype(1), *abc); !s) return s;
  const Value *vc = c.value(0), *vx = c.value(1), *vy = c.value(2);
  const int64_t n = c.out(0).elements();
  if (vc && vx && vy && value_fits(n)) {
    Value r = make_value(c.dtype(1), *abc);
    for (int64_t e = 0; e < n; ++e) {
      const bool cond = vc->as_real(broadcast_index(*abc, vc->shape, e)) != 0;
      const Value* src = cond ? vx : vy;
      const int64_t k = broadcast_index(*abc, src->shape, e);
      if (r.is_int()) {
        r.ints.push_back(src->as_int(k));
      } else {
        r.reals.push_back(src->as_real(k));
      }
    }
    c.set_value(0, std::move(r));
  }
  return Ok{};
}

Status infer_cast(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  DType to;
  if (c.node().op_type == "CastLike") {
    if (auto s = c.need(1, "target_type"); !s) return s;
    to = c.dtype(1);
  } else {
    auto t = dtype_from_onnx(static_cast<int>(c.attr_i("to", 0)));
    if (!t) return c.fail(fmt::format("attribute to = {} is not an ONNX tensor type (1..22)", c.attr_i("to", 0)));
    to = *t;
  }
  if (auto s = c.set(0, to, c.shape(0)); !s) return s;
  if (const Value* v = c.value(0)) {
    Value r = make_value(to, c.shape(0));
    for (int64_t i = 0; i < v->size(); ++i) {
      if (to == DType::kBool) {
        r.ints.push_back(v->as_real(i) != 0);
      } else if (r.is_int()) {
        // Toward zero as a cast does; NaN, infinities and values past int64 saturate (a plain
        // conversion of 9.2e18 or -inf is undefined behaviour).
        r.ints.push_back(v->is_int() ? v->ints[static_cast<size_t>(i)]
                                     : saturate_int64(std::trunc(v->reals[static_cast<size_t>(i)])));
      } else {
        r.reals.push_back(v->as_real(i));
      }
    }
    c.set_value(0, std::move(r));
  }
  return Ok{};
}

Status infer_clip(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  if (auto s = c.set(0, c.dtype(0), c.shape(0)); !s) return s;
  const Value* v = c.value(0);
  if (!v) return Ok{};
  double lo = -INFINITY, hi = INFINITY;
  if (c.opset() < 11) {
    lo = c.attr_f("min", lo);
    hi = c.attr_f("max", hi);
  } else {
    if (c.has_input(1)) {
      if (!c.value(1)) return Ok{};
      lo = c.value(1)->as_real(0);
    }
    if (c.has_input(2)) {
      if (!c.value(2)) return Ok{};
      hi = c.value(2)->as_real(0);
    }
  }
  Value r = make_value(c.dtype(0), c.shape(0));
  for (int64_t i = 0; i < v->size(); ++i) store(r, std::min(hi, std::max(lo, v->as_real(i))));
  c.set_value(0, std::move(r));
  return Ok{};
}

void add_work(OpCost& cost, const PerElement& w, int64_t n) {
  cost.flops.fma += w.fma * n;
  cost.flops.transcendental += w.trans * n;
  cost.flops.compare += w.cmp * n;
}

void cost_unary(const CostContext& c, OpCost& cost) {
  add_work(cost, unary_specs().at(c.node().op_type).work, c.out_elems());
  if (c.node().op_type == "Identity" || c.node().op_type == "Dropout") {
    cost.bytes_read = cost.bytes_written = 0;  // a view at inference time
  }
}

void cost_binary(const CostContext& c, OpCost& cost) {
  const int64_t extra = std::max<int64_t>(1, static_cast<int64_t>(c.num_inputs()) - 1);
  add_work(cost, binary_specs().at(c.node().op_type).work, c.out_elems() * extra);
  if (c.node().op_type == "Mean") cost.flops.fma += c.out_elems();
}

void cost_where(const CostContext& c, OpCost& cost) { cost.flops.compare += c.out_elems(); }
void cost_clip(const CostContext& c, OpCost& cost) { cost.flops.compare += 2 * c.out_elems(); }

}  // namespace

std::vector<OpDef> elementwise_ops() {
  std::vector<OpDef> v;
  for (const auto& [name, spec] : unary_specs()) {
    v.push_back({name, "", OpClass::kElementwise, infer_unary, cost_unary});
  }
  for (const auto& [name, spec] : binary_specs()) {
    v.push_back({name, "", OpClass::kElementwise, infer_binary, cost_binary});
  }
  v.push_back({"Where", "", OpClass::kElementwise, infer_where, cost_where});
  v.push_back({"Cast", "", OpClass::kElementwise, infer_cast, nullptr});
  v.push_back({"CastLike", "", OpClass::kElementwise, infer_cast, nullptr});
  v.push_back({"Clip", "", OpClass::kElementwise, infer_clip, cost_clip});
  return v;
}

}  // namespace gpusim::ops
