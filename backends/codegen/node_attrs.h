// Inside codegen: reading a node's attributes and the values of its constant inputs, for the
// generators that bake them into kernel text (reductions, pooling, data movement). An input's
// values are known only when it is a small constant or initializer (Tensor::value); a generator
// that needs them otherwise returns kUnsupported.
//
//   const int64_t axis = node_int(n, "axis", -1);
//   auto axes = const_ints(g, n, 1);   // nullopt: input absent; empty optional value: not constant
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gpusim/graph.h"

namespace gpusim::codegen {

// Through the node's one typed accessor (graph.h).
inline int64_t node_int(const Node& n, const char* key, int64_t def) { return n.attr_int(key, def); }
inline double node_float(const Node& n, const char* key, double def) { return n.attr_float(key, def); }
inline std::string node_string(const Node& n, const char* key, const std::string& def) { return n.attr_string(key, def); }
inline std::vector<int64_t> node_ints(const Node& n, const char* key) { return n.attr_ints(key); }
inline std::vector<double> node_floats(const Node& n, const char* key) { return n.attr_floats(key); }

// Whether input k of n is given (present and not the empty name).
inline bool has_input(const Node& n, size_t k) { return k < n.inputs.size() && n.inputs[k] != kNoTensor; }

// The values of input k, when the importer kept them (a small constant or initializer): an
// input with no elements counts as known and empty. nullopt when absent or not constant.
struct ConstInput {
  bool present = false;  // the input is given
  bool known = false;    // and its values are known
  std::vector<int64_t> ints;
  std::vector<double> reals;
};
inline ConstInput const_input(const Graph& g, const Node& n, size_t k) {
  ConstInput r;
  if (!has_input(n, k)) return r;
  r.present = true;
  const Tensor& t = g.tensor(n.inputs[k]);
  if (t.value) {
    r.known = true;
    for (int64_t i = 0; i < t.value->size(); ++i) {
      r.ints.push_back(t.value->as_int(i));
      r.reals.push_back(t.value->as_real(i));
    }
  } else if (!t.is_sequence && t.elements() == 0) {
    r.known = true;
  }
  return r;
}

// Normalizes a possibly negative axis against `rank`; false when out of range.
inline bool normalize_axis(int64_t& axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < std::max<int64_t>(r, 1);
}

}  // namespace gpusim::codegen
