// ONNX sequence ops (lists of tensors). A sequence keeps the shape of each element. Positions that
// are run-time values are exact when every element has the same shape; otherwise the op assumes
// the end of the sequence and says so in a note. Cost: the tensors copied in or out.
#include <fmt/format.h>

#include <algorithm>

#include "ops/registry.h"

namespace gpusim::ops {
namespace {

bool all_same(const std::vector<Shape>& v) {
  return std::all_of(v.begin(), v.end(), [&](const Shape& s) { return s == v.front(); });
}

Result<const Tensor*> need_seq(const InferContext& c, size_t i) {
  if (auto s = c.need(i, "input_sequence"); !s) return s.error();
  if (!c.in(i).is_sequence) return c.fail(fmt::format("input {} (\"{}\") is a tensor, not a sequence", i, c.in(i).name));
  return &c.in(i);
}

// Position from input `idx`, normalized to [0, n] (insert) or [0, n) (at/erase); nullopt if the
// position is only known at run time.
Result<std::optional<int64_t>> position(const InferContext& c, size_t idx, int64_t n, bool insert) {
  if (!c.has_input(idx)) return std::optional<int64_t>{};
  const Value* v = c.value(idx);
  if (!v) return std::optional<int64_t>{std::nullopt};
  int64_t p = v->as_int(0);
  const int64_t hi = insert ? n : n - 1;
  if (p < 0) p += n;
  if (p < 0 || p > hi) return c.fail(fmt::format("position {} is out of range for a sequence of {}", v->as_int(0), n));
  return std::optional<int64_t>{p};
}

Status infer_empty(InferContext& c) {
  auto t = dtype_from_onnx(static_cast<int>(c.attr_i("dtype", 1)));
  c.set_sequence(0, t.value_or(DType::kFloat32), {});
  return Ok{};
}

Status infer_construct(InferContext& c) {
  std::vector<Shape> el;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (auto s = c.need(i, "inputs"); !s) return s;
    el.push_back(c.shape(i));
  }
  c.set_sequence(0, c.num_inputs() ? c.dtype(0) : DType::kFloat32, std::move(el));
  return Ok{};
}

Status infer_insert(InferContext& c) {
  auto seq = need_seq(c, 0);
  if (!seq) return seq.error();
  if (auto s = c.need(1, "tensor"); !s) return s;
  std::vector<Shape> el = (*seq)->sequence_shapes;
  const auto n = static_cast<int64_t>(el.size());
  auto p = position(c, 2, n, true);
  if (!p) return p.error();
  int64_t at = n;
  if (c.has_input(2) && !p->has_value()) {
    el.push_back(c.shape(1));
    if (!all_same(el)) c.note("SequenceInsert position is a run-time value; assumed the end of the sequence");
    el.pop_back();
  } else if (p->has_value()) {
    at = **p;
  }
  el.insert(el.begin() + at, c.shape(1));
  c.set_sequence(0, (*seq)->dtype == DType::kUndefined ? c.dtype(1) : (*seq)->dtype, std::move(el));
  if (c.out(0).dtype == DType::kUndefined) c.out(0).dtype = c.dtype(1);
  return Ok{};
}

Status infer_erase(InferContext& c) {
  auto seq = need_seq(c, 0);
  if (!seq) return seq.error();
  std::vector<Shape> el = (*seq)->sequence_shapes;
  const auto n = static_cast<int64_t>(el.size());
  if (n == 0) return c.fail("cannot erase from an empty sequence");
  auto p = position(c, 1, n, false);
  if (!p) return p.error();
  int64_t at = n - 1;
  if (p->has_value()) {
    at = **p;
  } else if (c.has_input(1) && !all_same(el)) {
    c.note("SequenceErase position is a run-time value; assumed the last element");
  }
  el.erase(el.begin() + at);
  c.set_sequence(0, (*seq)->dtype, std::move(el));
  return Ok{};
}

Status infer_at(InferContext& c) {
  auto seq = need_seq(c, 0);
  if (!seq) return seq.error();
  const std::vector<Shape>& el = (*seq)->sequence_shapes;
  const auto n = static_cast<int64_t>(el.size());
  if (n == 0) return c.fail("SequenceAt on an empty sequence");
  auto p = position(c, 1, n, false);
  if (!p) return p.error();
  if (p->has_value()) return c.set(0, (*seq)->dtype, el[static_cast<size_t>(**p)]);
  if (!all_same(el)) {
    return c.fail(fmt::format("position \"{}\" is a run-time value and the sequence's elements differ in shape, so the "
                              "output shape is not static; make the position a constant",
                              c.in(1).name));
  }
  return c.set(0, (*seq)->dtype, el.front());
}

Status infer_length(InferContext& c) {
  auto seq = need_seq(c, 0);
  if (!seq) return seq.error();
  if (auto s = c.set(0, DType::kInt64, {}); !s) return s;
  Value v = make_value(DType::kInt64, {});
  v.ints.push_back(static_cast<int64_t>((*seq)->sequence_shapes.size()));
  c.set_value(0, std::move(v));
  return Ok{};
}

Status infer_split_to_sequence(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  const Shape& in = c.shape(0);
  auto axis = c.axis(c.attr_i("axis", 0), c.rank(0), "axis");
  if (!axis) return axis.error();
  const auto ax = static_cast<size_t>(*axis);
  std::vector<Shape> el;
  auto piece = [&](int64_t len) {
    Shape s = in;
    s[ax] = len;
    el.push_back(s);
  };
  if (!c.has_input(1)) {
    const bool keep = c.attr_i("keepdims", 1) != 0;
    for (int64_t i = 0; i < in[ax]; ++i) {
      Shape s = in;
      if (keep) {
        s[ax] = 1;
      } else {
        s.erase(s.begin() + static_cast<long>(ax));
      }
      el.push_back(s);
    }
  } else if (const Value* v = c.value(1)) {
    if (v->shape.empty()) {
      const int64_t k = v->as_int(0);
      if (k <= 0) return c.fail(fmt::format("split = {} must be positive", k));
      for (int64_t off = 0; off < in[ax]; off += k) piece(std::min(k, in[ax] - off));
    } else {
      int64_t sum = 0;
      for (int64_t i = 0; i < v->size(); ++i) {
        piece(v->as_int(i));
        sum += v->as_int(i);
      }
      if (sum != in[ax]) return c.fail(fmt::format("split sizes sum to {}, axis {} has {}", sum, ax, in[ax]));
    }
  } else {
    // Run-time split sizes: the count is known from the split tensor's length, the sizes are not.
    const Shape& ss = c.shape(1);
    const int64_t k = ss.empty() ? 1 : std::max<int64_t>(1, ss[0]);
    const int64_t chunk = (in[ax] + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) piece(std::min(chunk, std::max<int64_t>(0, in[ax] - chunk * i)));
    c.note(fmt::format("SplitToSequence split sizes are run-time values; assumed {} even pieces", k));
  }
  c.set_sequence(0, c.dtype(0), std::move(el));
  return Ok{};
}

Status infer_concat_from_sequence(InferContext& c) {
  auto seq = need_seq(c, 0);
  if (!seq) return seq.error();
  const std::vector<Shape>& el = (*seq)->sequence_shapes;
  if (el.empty()) return c.fail("cannot concatenate an empty sequence");
  const bool new_axis = c.attr_i("new_axis", 0) != 0;
  const auto r = static_cast<int64_t>(el.front().size());
  auto axis = c.axis(c.attr_i("axis", 0), new_axis ? r + 1 : r, "axis");
  if (!axis) return axis.error();
  const auto ax = static_cast<size_t>(*axis);
  Shape out = el.front();
  if (new_axis) {
    if (!all_same(el)) return c.fail("with new_axis=1 every element must have the same shape");
    out.insert(out.begin() + static_cast<long>(ax), static_cast<int64_t>(el.size()));
  } else {
    for (size_t i = 1; i < el.size(); ++i) {
      if (el[i].size() != out.size()) return c.fail("elements differ in rank");
      out[ax] += el[i][ax];
    }
  }
  return c.set(0, (*seq)->dtype, out);
}

void cost_copy_seq(const CostContext& c, OpCost& cost) {
  // Sequence bookkeeping moves no data except the tensors copied in or out.
  const std::string& op = c.node().op_type;
  if (op == "SequenceLength" || op == "SequenceEmpty" || op == "SequenceErase") {
    cost.bytes_read = cost.bytes_written = 0;
  } else if (op == "SequenceInsert") {
    cost.bytes_read = cost.bytes_written = c.in(1).bytes();
  } else if (op == "SequenceAt") {
    cost.bytes_read = cost.bytes_written = c.out(0).bytes();
  }
}

}  // namespace

std::vector<OpDef> sequence_ops() {
  const OpClass dm = OpClass::kDataMovement;
  return {
      {"SequenceEmpty", "", dm, infer_empty, cost_copy_seq},
      {"SequenceConstruct", "", dm, infer_construct, cost_copy_seq},
      {"SequenceInsert", "", dm, infer_insert, cost_copy_seq},
      {"SequenceErase", "", dm, infer_erase, cost_copy_seq},
      {"SequenceAt", "", dm, infer_at, cost_copy_seq},
      {"SequenceLength", "", dm, infer_length, cost_copy_seq},
      {"SplitToSequence", "", dm, infer_split_to_sequence, cost_copy_seq},
      {"ConcatFromSequence", "", dm, infer_concat_from_sequence, cost_copy_seq},
  };
}

}  // namespace gpusim::ops
