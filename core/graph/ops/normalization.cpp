// Normalizations and softmax: a reduction over some axes followed by an elementwise rescale.
// FLOPs per element (kernels as written for inference):
//   BatchNormalization: scale and shift folded into one FMA = 2 fma.
//   Layer/Group/InstanceNormalization: mean (1 add), variance (sub, mul, add), normalize (sub, mul),
//     affine (mul, add) = 8 fma; one rsqrt per normalized group.
//   Softmax: max (1 compare), subtract, exp, sum, scale by the reciprocal = 3 fma, 1 exp, 1 compare;
//     one reciprocal per row. LogSoftmax alike with a log per row.
#include <fmt/format.h>

#include <algorithm>

#include "ops/registry.h"

namespace gpusim::ops {
namespace {

Status infer_batchnorm(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& x = c.shape(0);
  if (x.size() < 2) return c.fail(fmt::format("input X {} needs rank >= 2 (N, C, ...)", shape_str(x)));
  for (size_t i = 1; i < c.num_inputs() && i < 5; ++i) {
    if (!c.has_input(i)) continue;
    const Shape& p = c.shape(i);
    if (p.size() != 1 || p[0] != x[1]) {
      static const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
      return c.fail(fmt::format("{} has shape {}, expected [{}] (the channel count of X {})", names[i], shape_str(p),
                                x[1], shape_str(x)));
    }
  }
  if (auto s = c.set(0, c.dtype(0), x); !s) return s;
  for (size_t i = 1; i < c.num_outputs(); ++i) {  // running/saved mean and variance (training mode)
    if (auto s = c.set(i, c.has_input(3) ? c.dtype(3) : c.dtype(0), {x[1]}); !s) return s;
  }
  return Ok{};
}

void cost_batchnorm(const CostContext& c, OpCost& cost) { cost.flops.fma = 2 * c.out_elems(); }

Status infer_layernorm(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& x = c.shape(0);
  auto a = c.axis(c.attr_i("axis", -1), c.rank(0), "axis");
  if (!a) return a.error();
  if (auto s = c.set(0, c.dtype(0), x); !s) return s;
  Shape stat = x;
  for (size_t i = static_cast<size_t>(*a); i < stat.size(); ++i) stat[i] = 1;
  const DType st = static_cast<DType>(c.attr_i("stash_type", 1));
  for (size_t i = 1; i < c.num_outputs(); ++i) {
    if (auto s = c.set(i, dtype_from_onnx(static_cast<int>(st)) ? st : DType::kFloat32, stat); !s) return s;
  }
  return Ok{};
}

void cost_layernorm(const CostContext& c, OpCost& cost) {
  const Shape& x = c.in(0).shape;
  int64_t axis = c.attr_i("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  int64_t rows = 1;
  for (int64_t i = 0; i < axis; ++i) rows *= x[static_cast<size_t>(i)];
  cost.flops.fma = 8 * c.out_elems();
  cost.flops.transcendental = rows;
}

Status infer_groupnorm(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& x = c.shape(0);
  if (x.size() < 2) return c.fail(fmt::format("input X {} needs rank >= 2 (N, C, ...)", shape_str(x)));
  if (c.node().op_type == "GroupNormalization") {
    const int64_t g = c.attr_i("num_groups", 0);
    if (g <= 0 || x[1] % g != 0) {
      return c.fail(fmt::format("num_groups = {} must be positive and divide the {} channels of X {}", g, x[1],
                                shape_str(x)));
    }
  }
  return c.set(0, c.dtype(0), x);
}

void cost_groupnorm(const CostContext& c, OpCost& cost) {
  const Shape& x = c.in(0).shape;
  const int64_t groups = c.node().op_type == "GroupNormalization" ? c.attr_i("num_groups", 1) : x[1];
  cost.flops.fma = 8 * c.out_elems();
  cost.flops.transcendental = x[0] * groups;
}

Status infer_softmax(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  if (c.rank(0) > 0) {
    const int64_t def = c.opset() >= 13 ? -1 : 1;
    auto a = c.axis(c.attr_i("axis", def), c.rank(0), "axis");
    if (!a) return a.error();
  }
  return c.set(0, c.dtype(0), c.shape(0));
}

int64_t softmax_rows(const CostContext& c) {
  const Shape& x = c.in(0).shape;
  if (x.empty()) return 1;
  const int64_t def = 1;  // rows only scale the per-row term; the axis default differs by opset
  int64_t axis = c.attr_i("axis", x.size() > 1 ? def : 0);
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  return c.in_elems(0) / std::max<int64_t>(1, x[static_cast<size_t>(axis)]);
}

void cost_softmax(const CostContext& c, OpCost& cost) {
  const int64_t n = c.out_elems();
  const std::string& op = c.node().op_type;
  if (op == "Hardmax") {
    cost.flops.compare = 2 * n;
    return;
  }
  cost.flops.fma = 3 * n;
  cost.flops.compare = n;
  cost.flops.transcendental = n + softmax_rows(c);
}

Status infer_same(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  return c.set(0, c.dtype(0), c.shape(0));
}

void cost_lpnorm(const CostContext& c, OpCost& cost) {
  cost.flops.fma = 3 * c.out_elems();
  cost.flops.transcendental = c.out_elems() / std::max<int64_t>(1, c.in(0).shape.empty() ? 1 : c.in(0).shape.back());
}

void cost_mvn(const CostContext& c, OpCost& cost) {
  cost.flops.fma = 6 * c.out_elems();
  cost.flops.transcendental = c.out_elems() / std::max<int64_t>(1, c.in(0).shape.empty() ? 1 : c.in(0).shape.back());
}

void cost_lrn(const CostContext& c, OpCost& cost) {
  // The window's size is the file's: clamped, so a size near 2^62 cannot overflow the count.
  const int64_t size = std::clamp<int64_t>(c.attr_i("size", 1), 1, int64_t{1} << 20);
  cost.flops.fma = (2 * size + 2) * c.out_elems();  // sum of squares over the window, scale, bias
  cost.flops.transcendental = 2 * c.out_elems();    // pow and the division
}

}  // namespace

std::vector<OpDef> normalization_ops() {
  return {
      {"BatchNormalization", "", OpClass::kNormalization, infer_batchnorm, cost_batchnorm},
      {"LayerNormalization", "", OpClass::kNormalization, infer_layernorm, cost_layernorm},
      {"GroupNormalization", "", OpClass::kNormalization, infer_groupnorm, cost_groupnorm},
      {"InstanceNormalization", "", OpClass::kNormalization, infer_groupnorm, cost_groupnorm},
      {"Softmax", "", OpClass::kNormalization, infer_softmax, cost_softmax},
      {"LogSoftmax", "", OpClass::kNormalization, infer_softmax, cost_softmax},
      {"Hardmax", "", OpClass::kNormalization, infer_softmax, cost_softmax},
      {"LpNormalization", "", OpClass::kNormalization, infer_same, cost_lpnorm},
      {"MeanVarianceNormalization", "", OpClass::kNormalization, infer_same, cost_mvn},
      {"LRN", "", OpClass::kNormalization, infer_same, cost_lrn},
  };
}

}  // namespace gpusim::ops
