// Inside codegen: data movement as index math. Where an element of a Slice, Pad, Transpose,
// Concat, Split or Expand output comes from in its input, shared by the data-movement generator
// (one kernel per node, gen_data.cpp) and by the element-wise generator, which reads data movement
// folded into its kernel through these maps instead of a copy (fold_data.cpp).
//
//   FoldedData fd(c, args);                       // the group's folded data movement
//   if (fd.produces(t)) value = *fd.value_at(t, "i", code);
#pragma once

#include <map>
#include <string>
#include <vector>

#include "generators.h"

namespace gpusim::codegen {

// Index expressions: "(a + b + c)" of the terms that are not "0" ("0" when none), and e * k
// ("0" when either is 0, e when k is 1).
std::string sum_terms(const std::vector<std::string>& terms);
std::string times(const std::string& e, int64_t k);

// A Slice's window: per input axis, its first element and step (1 and 0 where not sliced).
struct SliceWindow {
  std::vector<int64_t> start, step;
};
Result<SliceWindow> slice_window(const GenContext& c, const Node& n);

// A Pad's window: per input axis, the elements added before it; the mode, and the constant of
// mode "constant" when the node gives it as a constant (`value_known`; else it is a run-time input).
struct PadWindow {
  std::vector<int64_t> begin;
  std::string mode = "constant";
  double value = 0;
  bool value_known = true;
};
Result<PadWindow> pad_window(const GenContext& c, const Node& n);

// The data movement of a kernel's group that its element-wise nodes read through index math: the
// nodes of folded_data_movement() (patterns.h) whose inputs come from outside the group (or from
// other such nodes). Their outputs are never stored; an element-wise node reading one gets the
// element it needs from the input the movement reads.
class FoldedData {
 public:
  FoldedData(const GenContext& c, ArgList& args);
  // Whether the group's node at `pos` is folded data movement.
  bool folded(size_t pos) const;
  // Whether tensor t (through views) is the output of a folded node.
  bool produces(TensorId t) const;
  // The value of t (a folded node's output, or a view of one) at flat index `index` (an int
  // expression): statements appended to `code`, the returned expression in t's value type.
  // kUnsupported for what folding does not cover (a Pad mode other than constant, an index past
  // 2^31, an input computed in the kernel).
  Result<std::string> value_at(TensorId t, const std::string& index, std::string& code);

 private:
  const GenContext& c_;
  ArgList& args_;
  std::map<TensorId, size_t> pos_of_;  // root of each folded node's outputs -> its position in the group
  std::vector<bool> folded_;
  std::vector<bool> computed_;         // per root tensor id: written by a non-folded node of the group
  int counter_ = 0;
};

}  // namespace gpusim::codegen
