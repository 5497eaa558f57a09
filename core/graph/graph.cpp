#include "gpusim/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpusim {

std::optional<int64_t> shape_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string shape_problem(const Shape& s) {
  for (int64_t d : s) {
    if (d < 0) return fmt::format("dims {} have a negative dim {}; dims must be >= 0", shape_str(s), d);
    // Even in a tensor with no elements (another dim 0): loops and strides over such a dim overflow.
    if (d > kMaxTensorElements) {
      return fmt::format("dims {} have a dim {}, over gpusim's limit of 2^40 ({}) elements per tensor", shape_str(s), d,
                         kMaxTensorElements);
    }
  }
  const auto n = shape_elements(s);
  if (!n || *n > kMaxTensorElements) {
    return fmt::format("dims {} have {} elements, over gpusim's limit of 2^40 ({}) per tensor", shape_str(s),
                       n ? fmt::format("{}", *n) : std::string("more than 2^63"), kMaxTensorElements);
  }
  return {};
}

std::string_view role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kInput: return "input";
    case TensorRole::kWeight: return "weight";
    case TensorRole::kConstant: return "constant";
    case TensorRole::kActivation: return "activation";
    case TensorRole::kOutput: return "output";
  }
  return "activation";
}

int64_t Tensor::elements() const {
  if (is_sequence) return 0;
  return shape_elements(shape).value_or(0);
}

int64_t Tensor::bytes() const {
  const int64_t bits = dtype_bits(dtype);
  auto bytes_of = [bits](const Shape& s) { return (shape_elements(s).value_or(0) * bits + 7) / 8; };
  if (!is_sequence) return bytes_of(shape);
  int64_t total = 0;
  for (const Shape& s : sequence_shapes) total += bytes_of(s);
  return total;
}

const Attribute* Node::attr(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

int64_t Node::attr_int(const std::string& key, int64_t def) const {
  const Attribute* a = attr(key);
  return a ? a->i : def;
}
double Node::attr_float(const std::string& key, double def) const {
  const Attribute* a = attr(key);
  return a ? a->f : def;
}
std::string Node::attr_string(const std::string& key, const std::string& def) const {
  const Attribute* a = attr(key);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& key) const {
  const Attribute* a = attr(key);
  return a ? a->ints : std::vector<int64_t>{};
}
std::vector<double> Node::attr_floats(const std::string& key) const {
  const Attribute* a = attr(key);
  return a ? a->floats : std::vector<double>{};
}

std::optional<TensorId> Graph::find(const std::string& n) const {
  auto it = by_name.find(n);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

TensorId Graph::add_tensor(Tensor t) {
  const auto id = static_cast<TensorId>(tensors.size());
  by_name.emplace(t.name, id);
  tensors.push_back(std::move(t));
  return id;
}

}  // namespace gpusim
