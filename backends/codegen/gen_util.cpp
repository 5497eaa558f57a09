// What the generators share: buffer argument lists, index arithmetic with shapes baked in as
// constants, float literals, and launch geometry.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "generators.h"

namespace gpusim::codegen {

std::string GenContext::where(const Node& n) const {
  return fmt::format("{}: node \"{}\" ({})", g.source_path, n.name, n.op_type);
}

Error GenContext::unsupported(const Node& n, const std::string& why) const {
  return make_error(ErrorCode::kUnsupported, fmt::format("{}: codegen: {}", where(n), why));
}

int ArgList::find_or_add(TensorId t, bool written) {
  const TensorId r = c_.root(t);
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].tensor == r) {
      args[k].written = args[k].written || written;
      return static_cast<int>(k);
    }
  }
  Arg a;
  a.tensor = r;
  a.storage = storage_of(c_.tensor(r).dtype, c_.opts);
  a.elements = c_.tensor(r).elements();
  a.written = written;
  args.push_back(a);
  return static_cast<int>(args.size() - 1);
}

int ArgList::input(TensorId t) { return find_or_add(t, false); }
int ArgList::output(TensorId t) { return find_or_add(t, true); }

std::string ArgList::load(TensorId t, const std::string& index) {
  return fmt::format("LD{}({})", input(t), index);
}

std::string ArgList::load_word(TensorId t, const std::string& index) { return fmt::format("LDW{}({})", input(t), index); }

std::string ArgList::store(TensorId t, const std::string& index, const std::string& value) {
  const int k = output(t);
  // Integer tensors hold int32 on the device; a float value is converted (bool results are 0/1).
  if (is_int(t)) return fmt::format("ST{}({}, int({}));", k, index, value);
  return fmt::format("ST{}({}, float({}));", k, index, value);
}

std::string ArgList::vector_access(int k, const char* macro, const std::string& base, const std::string& array,
                                   int width) {
  Arg& a = args[static_cast<size_t>(k)];
  const int chunk = std::min(width, a.storage == Storage::kF16 ? 8 : 4);  // 16 bytes at most
  a.vector = chunk;
  std::string s;
  for (int o = 0; o < width; o += chunk) {
    s += fmt::format("{}{}({}, {}, {}); ", macro, k, o == 0 ? base : fmt::format("{} + {}", base, o), array, o);
  }
  return s;
}

std::string ArgList::load_vector(TensorId t, const std::string& base, const std::string& array, int width) {
  return vector_access(input(t), "LDV", base, array, width);
}

std::string ArgList::store_vector(TensorId t, const std::string& base, const std::string& array, int width) {
  return vector_access(output(t), "STV", base, array, width);
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::string coord(const Shape& s, size_t axis, const std::string& flat) {
  const auto st = strides_of(s);
  const int64_t stride = st[axis];
  const int64_t dim = s[axis];
  if (dim == 1) return "0";
  std::string q = stride == 1 ? flat : fmt::format("({} / {})", flat, stride);
  if (axis == 0) return q;
  return fmt::format("({} % {})", q, dim);
}

std::string broadcast_index(const Shape& out, const Shape& in, const std::string& flat) {
  const int64_t in_elems = shape_elements(in).value_or(0);
  if (in_elems <= 1) return "0";
  if (in == out) return flat;
  // Align right (numpy broadcasting); an input dim of 1 contributes nothing.
  const size_t off = out.size() - in.size();
  const auto in_st = strides_of(in);
  std::string expr;
  // Same trailing dims as the output from some axis on collapse into one term: flat % (product).
  size_t first_same = out.size();
  while (first_same > off && out[first_same - 1] == in[first_same - 1 - off]) --first_same;
  int64_t tail = 1;
  for (size_t a = first_same; a < out.size(); ++a) tail *= out[a];
  if (first_same < out.size()) expr = first_same == 0 ? flat : fmt::format("({} % {})", flat, tail);
  for (size_t a = off; a < first_same; ++a) {
    const int64_t d = in[a - off];
    if (d == 1) continue;
    const std::string term = fmt::format("{} * {}", coord(out, a, flat), in_st[a - off]);
    expr = expr.empty() ? term : expr + " + " + term;
  }
  return expr.empty() ? "0" : "(" + expr + ")";
}

std::string float_lit(double v) {
  if (std::isnan(v)) return "NAN_F";
  if (std::isinf(v)) return v > 0 ? "INF_F" : "(-INF_F)";
  if (v == 0) return std::signbit(v) ? "(-0.0f)" : "0.0f";
  if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) return v > 0 ? "INF_F" : "(-INF_F)";
  std::string s = fmt::format("{:.9g}", static_cast<double>(static_cast<float>(v)));
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  if (s.find('e') != std::string::npos && s.find('.') == std::string::npos) s.insert(s.find('e'), ".0");
  return (v < 0 ? "(" + s + "f)" : s + "f");
}

std::array<uint32_t, 3> groups_for(int64_t n, uint32_t block) {
  const int64_t groups = std::max<int64_t>(1, (n + block - 1) / block);
  if (groups <= 65535) return {static_cast<uint32_t>(groups), 1, 1};
  const int64_t y = (groups + 65534) / 65535;
  const int64_t x = (groups + y - 1) / y;
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1};
}

}  // namespace gpusim::codegen
