// One elementwise op as a scalar expression in the kernel dialect. Floats compute in fp32 (fp16
// storage converts on load and store); integer and bool tensors compute in 32-bit int, bools as
// 0/1. Attribute values are baked in as literals. Ops that draw random numbers (Bernoulli,
// RandomNormal, ...) and strings have no device form and return kUnsupported.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numbers>
#include <optional>

#include "generators.h"

namespace gpusim::codegen {

namespace {

double attr_f(const Node& n, const char* key, double def) {
  const Attribute* a = n.attr(key);
  return a ? a->f : def;
}
int64_t attr_i(const Node& n, const char* key, int64_t def) {
  const Attribute* a = n.attr(key);
  return a ? a->i : def;
}

}  // namespace

Result<std::string> scalar_op(const GenContext& c, const Node& n, const std::vector<std::string>& in,
                              const std::vector<bool>& int_in, bool& int_out) {
  const std::string& op = n.op_type;
  const TensorId out_t = n.outputs.empty() ? kNoTensor : n.outputs[0];
  const bool out_int = out_t != kNoTensor && !dtype_is_float(c.tensor(out_t).dtype);
  int_out = out_int;
  auto f = [&](size_t k) { return int_in[k] ? fmt::format("float({})", in[k]) : in[k]; };
  auto need = [&](size_t k) -> bool { return k < in.size() && !in[k].empty(); };
  auto all_int = [&] {
    bool r = !in.empty();
    for (size_t k = 0; k < in.size(); ++k) r = r && (in[k].empty() || int_in[k]);
    return r;
  };
  if (in.empty() || in[0].empty()) return c.unsupported(n, "no input");
  const std::string x = f(0);

  // Binary arithmetic: int when every operand is int (ONNX requires equal types).
  static const std::map<std::string, const char*> arith = {{"Add", "+"}, {"Sub", "-"}, {"Mul", "*"}, {"Div", "/"}};
  if (auto it = arith.find(op); it != arith.end() && need(1)) {
    if (all_int()) {
      int_out = true;
      return fmt::format("({} {} {})", in[0], it->second, in[1]);
    }
    int_out = false;
    return fmt::format("({} {} {})", x, it->second, f(1));
  }
  if ((op == "Max" || op == "Min" || op == "Sum" || op == "Mean")) {
    std::string acc;
    const bool ints = all_int() && op != "Mean";
    int_out = ints;
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k].empty()) continue;
      const std::string v = ints ? in[k] : f(k);
      if (acc.empty()) {
        acc = v;
      } else if (op == "Max") {
        acc = ints ? fmt::format("max({}, {})", acc, v) : fmt::format("fmaxf({}, {})", acc, v);
      } else if (op == "Min") {
        acc = ints ? fmt::format("min({}, {})", acc, v) : fmt::format("fminf({}, {})", acc, v);
      } else {
        acc = fmt::format("({} + {})", acc, v);
      }
    }
    if (op == "Mean") acc = fmt::format("({} / {})", acc, float_lit(static_cast<double>(in.size())));
    return acc;
  }
  if (op == "Pow" && need(1)) {
    int_out = out_int;
    // pow of a negative base: GLSL's pow is undefined there, so use |x|^y with the sign of an odd
    // integer exponent (what C's pow returns for integral y).
    return fmt::format("(({1}) == floorf({1}) ? ((fmodf(fabsf({1}), 2.0f) == 1.0f && ({0}) < 0.0f) ? -powf(fabsf({0}), {1}) : powf(fabsf({0}), {1})) : powf({0}, {1}))",
                       x, f(1));
  }
  if (op == "Mod" && need(1)) {
    if (attr_i(n, "fmod", 0) != 0 || !all_int()) return fmt::format("fmodf({}, {})", x, f(1));
    int_out = true;  // integer Mod takes the divisor's sign (Python's %)
    return fmt::format("((({0} % {1}) + {1}) % {1})", in[0], in[1]);
  }
  if (op == "PRelu" && need(1)) return fmt::format("({0} < 0.0f ? {0} * {1} : {0})", x, f(1));
  static const std::map<std::string, const char*> cmp = {{"Equal", "=="},   {"Less", "<"},          {"Greater", ">"},
                                                         {"LessOrEqual", "<="}, {"GreaterOrEqual", ">="}};
  if (auto it = cmp.find(op); it != cmp.end() && need(1)) {
    int_out = true;
    if (all_int()) return fmt::format("(({} {} {}) ? 1 : 0)", in[0], it->second, in[1]);
    return fmt::format("(({} {} {}) ? 1 : 0)", x, it->second, f(1));
  }
  if ((op == "And" || op == "Or" || op == "Xor") && need(1)) {
    int_out = true;
    const char* o = op == "And" ? "&&" : op == "Or" ? "||" : "!=";
    return fmt::format("((({} != 0) {} ({} != 0)) ? 1 : 0)", in[0], o, in[1]);
  }
  if (op == "Not") {
    int_out = true;
    return fmt::format("(({} == 0) ? 1 : 0)", in[0]);
  }
  if ((op == "BitwiseAnd" || op == "BitwiseOr" || op == "BitwiseXor") && need(1) && all_int()) {
    int_out = true;
    const char* o = op == "BitwiseAnd" ? "&" : op == "BitwiseOr" ? "|" : "^";
    return fmt::format("({} {} {})", in[0], o, in[1]);
  }
  if (op == "BitwiseNot" && all_int()) {
    int_out = true;
    return fmt::format("(~{})", in[0]);
  }
  if (op == "Where" && need(2)) {
    const bool ints = int_in[1] && int_in[2];
    int_out = ints;
    return ints ? fmt::format("(({} != 0) ? {} : {})", in[0], in[1], in[2])
                : fmt::format("(({} != 0) ? {} : {})", in[0], f(1), f(2));
  }
  if (op == "Clip") {
    std::string v = int_in[0] && out_int ? in[0] : x;
    const bool ints = int_in[0] && out_int;
    // opset < 11: min/max attributes; later: optional inputs.
    if (need(1)) v = ints ? fmt::format("max({}, {})", v, in[1]) : fmt::format("fmaxf({}, {})", v, f(1));
    else if (const Attribute* a = n.attr("min")) v = fmt::format("fmaxf({}, {})", v, float_lit(a->f));
    if (need(2)) v = ints ? fmt::format("min({}, {})", v, in[2]) : fmt::format("fminf({}, {})", v, f(2));
    else if (const Attribute* a = n.attr("max")) v = fmt::format("fminf({}, {})", v, float_lit(a->f));
    int_out = ints;
    return v;
  }
  if (op == "Identity" || op == "Dropout") {
    int_out = int_in[0];
    return in[0];
  }
  if (op == "Cast" || op == "CastLike") {
    if (out_int) {
      int_out = true;
      if (int_in[0]) return in[0];
      // To bool: non-zero. To an int type: truncation toward zero, as C casts.
      if (out_t != kNoTensor && c.tensor(out_t).dtype == DType::kBool) return fmt::format("(({} != 0.0f) ? 1 : 0)", x);
      return fmt::format("int({})", x);
    }
    int_out = false;
    return x;
  }
  if (op == "IsNaN") {
    int_out = true;
    return fmt::format("(isnan({}) ? 1 : 0)", x);
  }
  if (op == "IsInf") {
    int_out = true;
    const bool pos = attr_i(n, "detect_positive", 1) != 0, neg = attr_i(n, "detect_negative", 1) != 0;
    return fmt::format("((isinf({0}) && (({0} > 0.0f && {1}) || ({0} < 0.0f && {2}))) ? 1 : 0)", x, pos ? "true" : "false",
                       neg ? "true" : "false");
  }
  if (out_int && int_in[0]) {
    // Integer unary ops.
    if (op == "Abs") return fmt::format("abs({})", in[0]);
    if (op == "Neg") return fmt::format("(-{})", in[0]);
    if (op == "Relu") return fmt::format("max({}, 0)", in[0]);
    if (op == "Sign") return fmt::format("(({0} > 0) ? 1 : (({0} < 0) ? -1 : 0))", in[0]);
    return c.unsupported(n, "integer form of this op has no generated code");
  }
  int_out = false;
  const double alpha = attr_f(n, "alpha", op == "LeakyRelu" ? 0.01 : op == "HardSigmoid" ? 0.2 : op == "Selu" ? 1.67326319217681884765625 : 1.0);
  const double beta = attr_f(n, "beta", 0.5);
  const std::string a = float_lit(alpha), b = float_lit(beta);
  static const std::map<std::string, const char*> unary = {
      {"Abs", "fabsf({0})"},        {"Neg", "(-{0})"},
      {"Relu", "fmaxf({0}, 0.0f)"}, {"Sign", "(({0} > 0.0f) ? 1.0f : (({0} < 0.0f) ? -1.0f : 0.0f))"},
      {"Floor", "floorf({0})"},     {"Ceil", "ceilf({0})"},
      {"Round", "rintf({0})"},      {"Sqrt", "sqrtf({0})"},
      {"Reciprocal", "(1.0f / {0})"}, {"Exp", "expf({0})"},
      {"Log", "logf({0})"},         {"Sigmoid", "(1.0f / (1.0f + expf(-({0}))))"},
      {"Tanh", "tanhf({0})"},       {"Erf", "erff({0})"},
      {"Sin", "sinf({0})"},         {"Cos", "cosf({0})"},
      {"Tan", "tanf({0})"},         {"Asin", "asinf({0})"},
      {"Acos", "acosf({0})"},       {"Atan", "atanf({0})"},
      {"Sinh", "sinhf({0})"},       {"Cosh", "coshf({0})"},
      {"Asinh", "asinhf({0})"},     {"Acosh", "acoshf({0})"},
      {"Atanh", "atanhf({0})"},     {"Softsign", "({0} / (1.0f + fabsf({0})))"},
      {"Softplus", "(fmaxf({0}, 0.0f) + logf(1.0f + expf(-fabsf({0}))))"},
      {"Elu", "(({0} < 0.0f) ? {1} * (expf({0}) - 1.0f) : {0})"},
      {"Celu", "(fmaxf(0.0f, {0}) + fminf(0.0f, {1} * (expf({0} / {1}) - 1.0f)))"},
      {"LeakyRelu", "(({0} < 0.0f) ? {1} * {0} : {0})"},
      {"ThresholdedRelu", "(({0} > {1}) ? {0} : 0.0f)"},
      {"HardSigmoid", "fmaxf(0.0f, fminf(1.0f, {1} * {0} + {2}))"},
      {"HardSwish", "({0} * fmaxf(0.0f, fminf(1.0f, {0} / 6.0f + 0.5f)))"},
      {"Mish", "({0} * tanhf(fmaxf({0}, 0.0f) + logf(1.0f + expf(-fabsf({0})))))"},
  };
  if (auto it = unary.find(op); it != unary.end()) return fmt::format(fmt::runtime(it->second), x, a, b);
  if (op == "Selu") {
    const std::string g = float_lit(attr_f(n, "gamma", 1.05070102214813232421875));
    return fmt::format("(({0} > 0.0f) ? {1} * {0} : {1} * ({2} * expf({0}) - {2}))", x, g, a);
  }
  if (op == "Gelu") {
    if (const Attribute* ap = n.attr("approximate"); ap && ap->s == "tanh") {
      return fmt::format("(0.5f * {0} * (1.0f + tanhf({1} * ({0} + 0.044715f * {0} * {0} * {0}))))", x,
                         float_lit(std::sqrt(2.0 / std::numbers::pi)));
    }
    return fmt::format("(0.5f * {0} * (1.0f + erff({0} * {1})))", x, float_lit(1.0 / std::numbers::sqrt2));
  }
  if (op == "Shrink") {
    const std::string l = float_lit(attr_f(n, "lambd", 0.5)), bias = float_lit(attr_f(n, "bias", 0.0));
    return fmt::format("(({0} < -{1}) ? {0} + {2} : (({0} > {1}) ? {0} - {2} : 0.0f))", x, l, bias);
  }
  // Quantization (their per-axis scales and zero points are indexed by quant_param_index, not
  // broadcast): DequantizeLinear (x - zero point) x scale; QuantizeLinear rounds half to even
  // (rintf), adds the zero point and saturates to the integer output type.
  if (op == "DequantizeLinear" && need(1)) {
    int_out = false;
    return need(2) ? fmt::format("(({} - {}) * {})", x, f(2), f(1)) : fmt::format("({} * {})", x, f(1));
  }
  if (op == "QuantizeLinear" && need(1)) {
    const DType t = c.tensor(out_t).dtype;
    if (t != DType::kUInt8 && t != DType::kInt8) {
      return c.unsupported(n, fmt::format("quantizes to {}; generated kernels write uint8 or int8", dtype_name(t)));
    }
    int_out = true;
    const char* lo = t == DType::kUInt8 ? "0" : "-128";
    const char* hi = t == DType::kUInt8 ? "255" : "127";
    return fmt::format("min(max(int(rintf({} / {})) + {}, {}), {})", x, f(1), need(2) ? in[2] : "0", lo, hi);
  }
  return c.unsupported(n, "not an elementwise op with a generated form (random and string ops run on the host)");
}

std::optional<std::string> quant_param_index(const GenContext& c, const Node& n, size_t k, const Shape& out,
                                             const std::string& index, std::string* why) {
  if ((n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") || (k != 1 && k != 2)) return std::nullopt;
  const Tensor& p = c.tensor(n.inputs[k]);
  if (attr_i(n, "block_size", 0) > 0) {
    *why = "blocked scales (block_size) are not generated";
    return std::string();
  }
  if (p.elements() == 1) return std::string("0");
  auto rank = static_cast<int64_t>(out.size());
  int64_t axis = attr_i(n, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || p.shape.size() != 1 || p.shape[0] != out[static_cast<size_t>(axis)]) {
    *why = fmt::format("{} {} is neither a scalar nor one value per index of axis {}", k == 1 ? "the scale" : "the zero point",
                       shape_str(p.shape), attr_i(n, "axis", 1));
    return std::string();
  }
  int64_t inner = 1;
  for (auto d = static_cast<size_t>(axis) + 1; d < out.size(); ++d) inner *= out[d];
  return fmt::format("(({}) / {}) % {}", index, inner, out[static_cast<size_t>(axis)]);
}

}  // namespace gpusim::codegen
