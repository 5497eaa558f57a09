// CPU reference kernels for the elementwise family (what core/graph/ops/elementwise.cpp registers):
// unary math and activations, IsNaN/IsInf, Not/BitwiseNot, Identity, Dropout (inference),
// StringNormalizer; binary and variadic ops with numpy broadcasting (arithmetic, bitwise,
// comparisons, logic, Max/Min/Sum/Mean, PRelu); Where, Cast, CastLike, Clip.
//
// Numerical conventions:
//  - Floating values are computed in double (the storage); integer and bool values in int64, with
//    results wrapped to the output type's width (uint8, int16, ...). When any operand of a binary op
//    is floating the op is computed in double and converted to the output type (truncation).
//  - Integer Div truncates toward zero; integer Mod takes the divisor's sign (fmod=0) or the
//    dividend's (fmod=1); integer division by zero fails. Round is half to even (nearbyint).
//  - Float -> int conversion (Cast, integer outputs of float math) truncates; NaN becomes 0 and
//    out-of-range values saturate. Anything -> bool is "nonzero".
//  - Broadcasting: numpy rules; before opset 7 the legacy form (broadcast=1, axis) is mapped to
//    numpy by padding B's shape; PRelu's 1-D slope of length C applies per channel (axis 1).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <set>

#include "reference.h"

namespace gpusim::cpu {
namespace {

// ---- storage helpers ---------------------------------------------------------------------------

bool is_unsigned(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64 || t == DType::kUInt4;
}

// Wraps an int64 to the width of an integer dtype (two's complement), bool to 0/1.
int64_t wrap(DType t, int64_t v) {
  if (t == DType::kBool) return v != 0 ? 1 : 0;
  const int bits = dtype_bits(t);
  if (bits <= 0 || bits >= 64) return v;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const uint64_t u = static_cast<uint64_t>(v) & mask;
  if (is_unsigned(t)) return static_cast<int64_t>(u);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return (u & sign) ? static_cast<int64_t>(u | ~mask) : static_cast<int64_t>(u);
}

// Float -> int64, truncating; NaN -> 0, saturating out of range.
int64_t to_i64(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

// Writes a double result into element e of `o`, converting to o's storage.
void put_real(HostTensor& o, int64_t e, double v) {
  const auto k = static_cast<size_t>(e);
  if (o.is_real()) {
    o.r[k] = v;
  } else if (o.dtype == DType::kBool) {
    o.i[k] = v != 0 ? 1 : 0;
  } else {
    o.i[k] = wrap(o.dtype, to_i64(v));
  }
}

void put_int(HostTensor& o, int64_t e, int64_t v) {
  const auto k = static_cast<size_t>(e);
  if (o.is_real()) {
    o.r[k] = static_cast<double>(v);
  } else {
    o.i[k] = wrap(o.dtype, v);
  }
}

// ---- broadcasting --------------------------------------------------------------------------------

// Maps an output flat index to the flat index of an input broadcast (numpy, right-aligned) to it.
class Bcast {
 public:
  Bcast(const Shape& out, const Shape& in) : out_(out) {
    const int64_t n_in = shape_elements(in).value_or(0);
    const int64_t n_out = shape_elements(out).value_or(0);
    if (n_in == 1) {
      mode_ = kScalar;
      return;
    }
    if (in == out || (n_in == n_out && in.size() <= out.size() &&
                      std::equal(in.rbegin(), in.rend(), out.rbegin()))) {
      mode_ = kSame;
      return;
    }
    stride_.assign(out.size(), 0);
    int64_t s = 1;
    for (size_t d = 0; d < in.size() && d < out.size(); ++d) {
      const size_t di = in.size() - 1 - d, dout = out.size() - 1 - d;
      if (in[di] != 1) stride_[dout] = s;
      s *= in[di];
    }
  }
  int64_t operator()(int64_t e) const {
    if (mode_ == kScalar) return 0;
    if (mode_ == kSame) return e;
    int64_t idx = 0;
    for (size_t d = out_.size(); d-- > 0;) {
      const int64_t c = e % out_[d];
      e /= out_[d];
      idx += c * stride_[d];
    }
    return idx;
  }

 private:
  enum Mode { kSame, kScalar, kGeneral };
  Mode mode_ = kGeneral;
  Shape out_;
  std::vector<int64_t> stride_;
};

bool numpy_broadcasts_to(const Shape& small, const Shape& big) {
  if (small.size() > big.size()) return false;
  for (size_t d = 0; d < small.size(); ++d) {
    const int64_t s = small[small.size() - 1 - d], b = big[big.size() - 1 - d];
    if (s != 1 && s != b) return false;
  }
  return true;
}

// The shape input k broadcasts as, with the legacy (pre-opset-7) rules and PRelu's per-channel
// slope mapped onto numpy broadcasting.
Shape aligned_shape(const KernelArgs& a, size_t k) {
  const Shape& s = a.in[k]->shape;
  const Shape& x = a.in[0]->shape;
  if (k == 0) return s;
  if (a.node.op_type == "PRelu") {
    const bool channelwise = s.size() == 1 && x.size() >= 2 && s[0] == x[1] && s[0] != 1;
    if (channelwise && (a.graph.opset < 7 || !numpy_broadcasts_to(s, x))) {
      Shape c(x.size() - 1, 1);
      c[0] = s[0];
      return c;
    }
    return s;
  }
  if (a.graph.opset < 7 && a.attr_i("broadcast", 0) != 0 && a.node.attr("axis") != nullptr) {
    int64_t axis = a.attr_i("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    Shape p = s;
    const int64_t pad = static_cast<int64_t>(x.size()) - axis - static_cast<int64_t>(s.size());
    for (int64_t i = 0; i < pad; ++i) p.push_back(1);
    return p;
  }
  return s;
}

// ---- unary ---------------------------------------------------------------------------------------

constexpr double kSqrt2 = 1.4142135623730951;

double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

Status unary(KernelArgs& a) {
  const std::string& op = a.node.op_type;
  const HostTensor& x = *a.in[0];
  HostTensor& o = *a.out[0];
  o.allocate();
  const int64_t n = o.elements();
  const double alpha_def = op == "LeakyRelu" ? 0.01 : op == "HardSigmoid" ? 0.2 : op == "Selu" ? 1.67326319217681884765625 : 1.0;
  const double alpha = a.attr_f("alpha", alpha_def);
  const double beta = a.attr_f("beta", 0.5);
  const double gamma = a.attr_f("gamma", 1.05070102214813232421875);
  const double bias = a.attr_f("bias", 0.0), lambd = a.attr_f("lambd", 0.5);
  const bool det_neg = a.attr_i("detect_negative", 1) != 0, det_pos = a.attr_i("detect_positive", 1) != 0;
  const bool gelu_tanh = a.attr_s("approximate", "none") == "tanh";
  const bool exact_int = op == "Abs" || op == "Neg" || op == "Sign" || op == "Relu" || op == "Not" ||
                      op == "BitwiseNot" || op == "IsNaN" || op == "IsInf";
  if (!x.is_real() && exact_int) {  // exact integer paths
    for (int64_t e = 0; e < n; ++e) {
      const int64_t v = x.i[static_cast<size_t>(e)];
      int64_t y = 0;
      if (op == "Abs") y = v < 0 ? -v : v;
      else if (op == "Neg") y = -v;
      else if (op == "Sign") y = v > 0 ? 1 : (v < 0 ? -1 : 0);
      else if (op == "Relu") y = v > 0 ? v : 0;
      else if (op == "Not") y = v == 0 ? 1 : 0;
      else if (op == "BitwiseNot") y = ~v;
      put_int(o, e, y);
    }
    return Ok{};
  }
  if (op == "Not" || op == "BitwiseNot") {
    return a.fail(fmt::format("input of type {} is not bool/integer", dtype_name(x.dtype)));
  }
  for (int64_t e = 0; e < n; ++e) {
    const double v = x.real(e);
    double y = 0;
    if (op == "Abs") y = std::fabs(v);
    else if (op == "Neg") y = -v;
    else if (op == "Relu") y = v > 0 ? v : 0;
    else if (op == "Sign") y = v > 0 ? 1 : (v < 0 ? -1 : 0);
    else if (op == "Floor") y = std::floor(v);
    else if (op == "Ceil") y = std::ceil(v);
    else if (op == "Round") y = std::nearbyint(v);
    else if (op == "Sqrt") y = std::sqrt(v);
    else if (op == "Reciprocal") y = 1.0 / v;
    else if (op == "Exp") y = std::exp(v);
    else if (op == "Log") y = std::log(v);
    else if (op == "Sigmoid") y = v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
    else if (op == "Tanh") y = std::tanh(v);
    else if (op == "Erf") y = std::erf(v);
    else if (op == "Sin") y = std::sin(v);
    else if (op == "Cos") y = std::cos(v);
    else if (op == "Tan") y = std::tan(v);
    else if (op == "Asin") y = std::asin(v);
    else if (op == "Acos") y = std::acos(v);
    else if (op == "Atan") y = std::atan(v);
    else if (op == "Sinh") y = std::sinh(v);
    else if (op == "Cosh") y = std::cosh(v);
    else if (op == "Asinh") y = std::asinh(v);
    else if (op == "Acosh") y = std::acosh(v);
    else if (op == "Atanh") y = std::atanh(v);
    else if (op == "Softplus") y = softplus(v);
    else if (op == "Softsign") y = v / (1.0 + std::fabs(v));
    else if (op == "Elu") y = v < 0 ? alpha * (std::exp(v) - 1.0) : v;
    else if (op == "Celu") y = std::max(0.0, v) + std::min(0.0, alpha * (std::exp(v / alpha) - 1.0));
    else if (op == "Selu") y = v > 0 ? gamma * v : gamma * (alpha * std::exp(v) - alpha);
    else if (op == "LeakyRelu") y = v < 0 ? alpha * v : v;
    else if (op == "ThresholdedRelu") y = v > alpha ? v : 0;
    else if (op == "HardSigmoid") y = std::max(0.0, std::min(1.0, alpha * v + beta));
    else if (op == "HardSwish") y = v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5));
    else if (op == "Mish") y = v * std::tanh(softplus(v));
    else if (op == "Gelu") {
      y = gelu_tanh ? 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)))
                    : 0.5 * v * (1.0 + std::erf(v / kSqrt2));
    } else if (op == "Shrink") y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    else if (op == "IsNaN") y = std::isnan(v) ? 1 : 0;
    else if (op == "IsInf") y = std::isinf(v) && ((v > 0 && det_pos) || (v < 0 && det_neg)) ? 1 : 0;
    else return a.fail("no unary kernel for this op");
    put_real(o, e, y);
  }
  return Ok{};
}

Status identity(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  const DType t = o.dtype;
  o = *a.in[0];
  // A retyped graph may differ in the float type only: the storage is the same.
  if (!o.is_sequence && t != DType::kUndefined) o.dtype = t;
  return Ok{};
}

Status dropout(KernelArgs& a) {
  if (a.has(2) && a.in[2]->elements() > 0 && a.in[2]->integer(0) != 0) {
    const double ratio = a.has(1) ? a.in[1]->real(0) : 0.5;
    if (ratio != 0) return a.fail("training_mode=true drops values at random; the reference only runs inference");
  }
  HostTensor& o = *a.out[0];
  const DType t = o.dtype;
  o = *a.in[0];
  o.dtype = t;
  if (a.out.size() > 1 && a.out[1]) {
    a.out[1]->allocate();
    std::fill(a.out[1]->i.begin(), a.out[1]->i.end(), 1);
  }
  return Ok{};
}

std::string change_case(std::string s, bool upper) {
  for (char& ch : s) ch = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

Status string_normalizer(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  if (!x.is_string()) return a.fail("input is not a string tensor");
  const std::string action = a.attr_s("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return a.fail(fmt::format("case_change_action \"{}\" is not NONE, LOWER or UPPER", action));
  }
  const bool sensitive = a.attr_i("is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  if (const Attribute* at = a.node.attr("stopwords")) {
    for (const std::string& w : at->strings) stop.insert(sensitive ? w : change_case(w, false));
  }
  std::vector<std::string> kept;
  for (const std::string& w : x.s) {
    if (stop.count(sensitive ? w : change_case(w, false))) continue;
    kept.push_back(action == "NONE" ? w : change_case(w, action == "UPPER"));
  }
  HostTensor& o = *a.out[0];
  const auto c = static_cast<int64_t>(kept.size());
  if (kept.empty()) kept.emplace_back();  // all removed: one empty string
  o.shape = x.shape.size() == 2 ? Shape{1, std::max<int64_t>(c, 1)} : Shape{std::max<int64_t>(c, 1)};
  o.r.clear();
  o.i.clear();
  o.s = std::move(kept);
  return Ok{};
}

// ---- binary / variadic ---------------------------------------------------------------------------

enum class Bin { kAdd, kSub, kMul, kDiv, kPow, kMod, kPRelu, kShift, kAnd, kOr, kXor, kEq, kLt, kGt, kLe, kGe,
                 kLAnd, kLOr, kLXor, kMax, kMin, kSum, kMean };

const std::map<std::string, Bin>& bin_codes() {
  static const std::map<std::string, Bin> m = {
      {"Add", Bin::kAdd}, {"Sub", Bin::kSub}, {"Mul", Bin::kMul}, {"Div", Bin::kDiv}, {"Pow", Bin::kPow},
      {"Mod", Bin::kMod}, {"PRelu", Bin::kPRelu}, {"BitShift", Bin::kShift}, {"BitwiseAnd", Bin::kAnd},
      {"BitwiseOr", Bin::kOr}, {"BitwiseXor", Bin::kXor}, {"Equal", Bin::kEq}, {"Less", Bin::kLt},
      {"Greater", Bin::kGt}, {"LessOrEqual", Bin::kLe}, {"GreaterOrEqual", Bin::kGe}, {"And", Bin::kLAnd},
      {"Or", Bin::kLOr}, {"Xor", Bin::kLXor}, {"Max", Bin::kMax}, {"Min", Bin::kMin}, {"Sum", Bin::kSum},
      {"Mean", Bin::kMean}};
  return m;
}

bool is_compare(Bin b) { return b >= Bin::kEq && b <= Bin::kLXor; }

double real_op(Bin b, double x, double y, bool fmod_attr) {
  switch (b) {
    case Bin::kAdd: case Bin::kSum: case Bin::kMean: return x + y;
    case Bin::kSub: return x - y;
    case Bin::kMul: return x * y;
    case Bin::kDiv: return x / y;
    case Bin::kPow: return std::pow(x, y);
    case Bin::kMod: {
      double r = std::fmod(x, y);
      if (!fmod_attr && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    case Bin::kPRelu: return x < 0 ? x * y : x;
    case Bin::kMax: return (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::max(x, y);
    case Bin::kMin: return (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::min(x, y);
    case Bin::kEq: return x == y;
    case Bin::kLt: return x < y;
    case Bin::kGt: return x > y;
    case Bin::kLe: return x <= y;
    case Bin::kGe: return x >= y;
    case Bin::kLAnd: return (x != 0) && (y != 0);
    case Bin::kLOr: return (x != 0) || (y != 0);
    case Bin::kLXor: return (x != 0) != (y != 0);
    default: return std::nan("");
  }
}

// Integer op; *err set on division by zero.
int64_t int_op(Bin b, int64_t x, int64_t y, bool fmod_attr, bool shift_left, bool* err) {
  switch (b) {
    case Bin::kAdd: case Bin::kSum: case Bin::kMean:
      return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    case Bin::kSub: return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
    case Bin::kMul: return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    case Bin::kDiv:
      if (y == 0) { *err = true; return 0; }
      return x / y;
    case Bin::kMod: {
      if (y == 0) { *err = true; return 0; }
      int64_t r = x % y;
      if (!fmod_attr && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    case Bin::kPow: {
      if (y < 0) return to_i64(std::trunc(std::pow(static_cast<double>(x), static_cast<double>(y))));
      uint64_t r = 1;
      for (int64_t k = 0; k < y && k < 64; ++k) r *= static_cast<uint64_t>(x);
      return static_cast<int64_t>(r);
    }
    case Bin::kPRelu: return x < 0 ? x * y : x;
    case Bin::kShift: {
      if (y < 0 || y >= 64) return 0;
      const auto u = static_cast<uint64_t>(x);
      return static_cast<int64_t>(shift_left ? u << y : u >> y);
    }
    case Bin::kAnd: return x & y;
    case Bin::kOr: return x | y;
    case Bin::kXor: return x ^ y;
    case Bin::kMax: return std::max(x, y);
    case Bin::kMin: return std::min(x, y);
    case Bin::kEq: return x == y;
    case Bin::kLt: return x < y;
    case Bin::kGt: return x > y;
    case Bin::kLe: return x <= y;
    case Bin::kGe: return x >= y;
    case Bin::kLAnd: return (x != 0) && (y != 0);
    case Bin::kLOr: return (x != 0) || (y != 0);
    case Bin::kLXor: return (x != 0) != (y != 0);
  }
  return 0;
}

Status binary(KernelArgs& a) {
  const Bin b = bin_codes().at(a.node.op_type);
  if (a.in.empty() || !a.in[0]) return a.fail("needs at least one input");
  HostTensor& o = *a.out[0];
  o.allocate();
  const int64_t n = o.elements();
  std::vector<Bcast> maps;
  bool any_real = false, any_string = false;
  for (size_t k = 0; k < a.in.size(); ++k) {
    if (!a.in[k]) return a.fail(fmt::format("input {} is missing", k));
    maps.emplace_back(o.shape, aligned_shape(a, k));
    any_real = any_real || a.in[k]->is_real();
    any_string = any_string || a.in[k]->is_string();
  }
  const bool fmod_attr = a.attr_i("fmod", 0) != 0;
  const bool left = a.attr_s("direction", "") == "LEFT";
  if (b == Bin::kShift && a.attr_s("direction", "") != "RIGHT" && !left) {
    return a.fail(fmt::format("direction \"{}\" is not LEFT or RIGHT", a.attr_s("direction", "")));
  }
  if (any_string) {
    if (b != Bin::kEq || a.in.size() != 2) return a.fail("string operands are supported by Equal only");
    for (int64_t e = 0; e < n; ++e) {
      put_int(o, e, a.in[0]->s[static_cast<size_t>(maps[0](e))] == a.in[1]->s[static_cast<size_t>(maps[1](e))]);
    }
    return Ok{};
  }
  if (any_real && (b == Bin::kShift || b == Bin::kAnd || b == Bin::kOr || b == Bin::kXor)) {
    return a.fail("bitwise ops need integer operands");
  }
  const auto nin = static_cast<double>(a.in.size());
  for (int64_t e = 0; e < n; ++e) {
    if (any_real) {
      double acc = a.in[0]->real(maps[0](e));
      for (size_t k = 1; k < a.in.size(); ++k) acc = real_op(b, acc, a.in[k]->real(maps[k](e)), fmod_attr);
      if (b == Bin::kMean) acc /= nin;
      put_real(o, e, acc);
    } else {
      int64_t acc = a.in[0]->i[static_cast<size_t>(maps[0](e))];
      bool err = false;
      for (size_t k = 1; k < a.in.size(); ++k) {
        acc = int_op(b, acc, a.in[k]->i[static_cast<size_t>(maps[k](e))], fmod_attr, left, &err);
      }
      if (err) return a.fail("integer division by zero");
      if (b == Bin::kMean) {
        put_real(o, e, static_cast<double>(acc) / nin);
      } else {
        put_int(o, e, is_compare(b) ? (acc != 0) : acc);
      }
    }
  }
  return Ok{};
}

// ---- Where, Cast, Clip -----------------------------------------------------------------------------

Status where(KernelArgs& a) {
  for (size_t k = 0; k < 3; ++k) {
    if (!a.has(k)) return a.fail(fmt::format("input {} is missing", k));
  }
  HostTensor& o = *a.out[0];
  o.allocate();
  const Bcast mc(o.shape, a.in[0]->shape), mx(o.shape, a.in[1]->shape), my(o.shape, a.in[2]->shape);
  const HostTensor &c = *a.in[0], &x = *a.in[1], &y = *a.in[2];
  for (int64_t e = 0; e < o.elements(); ++e) {
    const bool cond = c.is_real() ? c.r[static_cast<size_t>(mc(e))] != 0 : c.i[static_cast<size_t>(mc(e))] != 0;
    const HostTensor& src = cond ? x : y;
    const auto k = static_cast<size_t>(cond ? mx(e) : my(e));
    if (o.is_string()) {
      o.s[static_cast<size_t>(e)] = src.s[k];
    } else if (src.is_real()) {
      put_real(o, e, src.r[k]);
    } else {
      put_int(o, e, src.i[k]);
    }
  }
  return Ok{};
}

std::string num_to_string(const HostTensor& x, int64_t k) {
  if (!x.is_real()) return fmt::format("{}", x.i[static_cast<size_t>(k)]);
  const double v = x.r[static_cast<size_t>(k)];
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  if (x.dtype == DType::kFloat64) return fmt::format("{}", v);
  return fmt::format("{}", static_cast<float>(v));
}

Status cast(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  HostTensor& o = *a.out[0];
  o.allocate();
  const int64_t n = o.elements();
  for (int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<size_t>(e);
    if (o.is_string()) {
      o.s[k] = x.is_string() ? x.s[k] : num_to_string(x, e);
    } else if (x.is_string()) {
      const char* str = x.s[k].c_str();
      char* end = nullptr;
      const double v = std::strtod(str, &end);
      if (end == str) return a.fail(fmt::format("string \"{}\" is not a number", x.s[k]));
      put_real(o, e, v);
    } else if (x.is_real()) {
      double v = x.r[k];
      if (o.dtype == DType::kFloat32) v = static_cast<double>(static_cast<float>(v));
      put_real(o, e, v);
    } else {
      put_int(o, e, x.i[k]);
    }
  }
  return Ok{};
}

Status clip(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  HostTensor& o = *a.out[0];
  o.allocate();
  double lo = -INFINITY, hi = INFINITY;
  bool has_lo = false, has_hi = false;
  int64_t ilo = 0, ihi = 0;
  if (a.graph.opset < 11) {
    lo = a.attr_f("min", lo);
    hi = a.attr_f("max", hi);
  } else {
    if (a.has(1) && a.in[1]->elements() > 0) {
      has_lo = true;
      lo = a.in[1]->real(0);
      ilo = a.in[1]->integer(0);
    }
    if (a.has(2) && a.in[2]->elements() > 0) {
      has_hi = true;
      hi = a.in[2]->real(0);
      ihi = a.in[2]->integer(0);
    }
  }
  for (int64_t e = 0; e < o.elements(); ++e) {
    if (x.is_real()) {
      const double v = x.r[static_cast<size_t>(e)];
      put_real(o, e, std::isnan(v) ? v : std::min(hi, std::max(lo, v)));
    } else {
      int64_t v = x.i[static_cast<size_t>(e)];
      if (has_lo) v = std::max(v, ilo);
      if (has_hi) v = std::min(v, ihi);
      put_int(o, e, v);
    }
  }
  return Ok{};
}

}  // namespace

void register_elementwise(std::map<std::string, Kernel>& k) {
  for (const char* op : {"Abs", "Neg", "Relu", "Sign", "Floor", "Ceil", "Round", "Sqrt", "Reciprocal", "Exp", "Log",
                         "Not", "Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                         "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Celu", "Selu", "LeakyRelu",
                         "ThresholdedRelu", "HardSigmoid", "HardSwish", "Mish", "Gelu", "Shrink", "IsNaN", "IsInf",
                         "BitwiseNot"}) {
    k[op] = unary;
  }
  k["Identity"] = identity;
  k["Dropout"] = dropout;
  k["StringNormalizer"] = string_normalizer;
  for (const auto& [name, code] : bin_codes()) k[name] = binary;
  k["Where"] = where;
  k["Cast"] = cast;
  k["CastLike"] = cast;
  k["Clip"] = clip;
}

}  // namespace gpusim::cpu
