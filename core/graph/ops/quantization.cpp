// Quantization ops: ONNX's QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (elementwise),
// QLinearMatMul and QLinearConv (a MatMul or Conv of int8/uint8 operands with scales and zero
// points, requantized to the output's type), and ONNX Runtime's com.microsoft MatMulNBits (a MatMul
// by a block-quantized weight: B packed [N, K / block_size, block_size x bits / 8] bytes with a scale
// a block, and optional zero points).
//   Bytes: every input as stored (the packed weight at its exact size). MACs: QLinearMatMul and
//   MatMulNBits = output elements x K; QLinearConv = output elements x (C / group) x prod(kernel).
//   FLOPs: quantize = a multiply, a round and an add an element, then two compares (saturation);
//   dequantize = a subtract and a multiply an element; the QLinear ops requantize each output (two).
#include <fmt/format.h>

#include "ops/registry.h"

namespace gpusim::ops {
namespace {

int64_t prod_from(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

// QuantizeLinear's output type: the output_dtype attribute (opset 21), else the zero point's, else
// uint8 (the ONNX default).
Status infer_quantize(InferContext& c) {
  if (auto s = c.need(0, "x"); !s) return s;
  if (auto s = c.need(1, "y_scale"); !s) return s;
  DType t = DType::kUInt8;
  if (c.has_input(2)) t = c.dtype(2);
  if (const int64_t code = c.attr_i("output_dtype", 0); code != 0) {
    const std::optional<DType> d = dtype_from_onnx(static_cast<int>(code));
    const bool fp8 = d && *d >= DType::kFloat8E4M3FN && *d <= DType::kFloat8E5M2FNUZ;
    if (!d || !(fp8 || (dtype_is_integer(*d) && dtype_bits(*d) <= 16))) {
      return c.fail(fmt::format("output_dtype = {} is not a type QuantizeLinear writes (int8, uint8, int16, uint16, int4, "
                                "uint4 or a float8 type)",
                                code));
    }
    t = *d;
  }
  return c.set(0, t, c.shape(0));
}

void cost_quantize(const CostContext& c, OpCost& cost) {
  cost.flops.fma = 2 * c.in_elems(0);
  cost.flops.compare = 2 * c.in_elems(0);
}

// DequantizeLinear's output type: the scale's (fp32 before opset 19, which allows fp16 and bf16).
Status infer_dequantize(InferContext& c) {
  if (auto s = c.need(0, "x"); !s) return s;
  if (auto s = c.need(1, "x_scale"); !s) return s;
  if (!dtype_is_float(c.dtype(1))) {
    return c.fail(fmt::format("x_scale is {}; DequantizeLinear's scale is a float type", dtype_name(c.dtype(1))));
  }
  return c.set(0, c.dtype(1), c.shape(0));
}

void cost_dequantize(const CostContext& c, OpCost& cost) { cost.flops.fma = 2 * c.in_elems(0); }

// DynamicQuantizeLinear: y (uint8, as x), its scale and zero point (scalars) from x's range.
Status infer_dynamic_quantize(InferContext& c) {
  if (auto s = c.need(0, "x"); !s) return s;
  if (auto s = c.set(0, DType::kUInt8, c.shape(0)); !s) return s;
  if (c.num_outputs() > 1) {
    if (auto s = c.set(1, DType::kFloat32, {}); !s) return s;
  }
  if (c.num_outputs() > 2) return c.set(2, DType::kUInt8, {});
  return Ok{};
}

void cost_dynamic_quantize(const CostContext& c, OpCost& cost) {
  cost.flops.compare = 4 * c.in_elems(0);  // the range (min, max), then saturation
  cost.flops.fma = 2 * c.in_elems(0);
}

// The type a QLinear op writes: its y_zero_point's (input 7), else its first input's.
DType qlinear_out_type(const InferContext& c) { return c.has_input(7) ? c.dtype(7) : c.dtype(0); }

// A QLinear op: `rule` (MatMul's or Conv's) over inputs 0 and 3, writing the output zero point's type.
Status infer_qlinear(InferContext& c, const char* first, const char* second, Status (*rule)(InferContext&)) {
  if (auto s = c.need(0, first); !s) return s;
  if (auto s = c.need(3, second); !s) return s;
  InferContext inner = c.remapped({0, 3});
  if (auto s = rule(inner); !s) return s;
  return c.set(0, qlinear_out_type(c), c.out(0).shape);
}

Status infer_qlinear_matmul(InferContext& c) { return infer_qlinear(c, "a", "b", matmul_shape); }

void cost_qlinear_matmul(const CostContext& c, OpCost& cost) {
  const Shape& a = c.in(0).shape;
  cost.macs = c.out_elems() * (a.empty() ? 1 : a.back());
  cost.flops.fma = 2 * cost.macs + 2 * c.out_elems();
}

Status infer_qlinear_conv(InferContext& c) { return infer_qlinear(c, "x", "w", conv_shape); }

void cost_qlinear_conv(const CostContext& c, OpCost& cost) {
  cost.macs = c.out_elems() * prod_from(c.in(3).shape, 1);
  cost.flops.fma = 2 * cost.macs + 2 * c.out_elems();
}

// MatMulNBits: A [..., K] by B packed [N, ceil(K / block_size), block_size x bits / 8].
Status infer_matmul_nbits(InferContext& c) {
  if (auto s = c.need(0, "A"); !s) return s;
  if (auto s = c.need(1, "B"); !s) return s;
  if (auto s = c.need(2, "scales"); !s) return s;
  const int64_t k = c.attr_i("K", 0), n = c.attr_i("N", 0), bits = c.attr_i("bits", 4), block = c.attr_i("block_size", 0);
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  if (k <= 0 || n <= 0 || k > kMaxDim || n > kMaxDim) {
    return c.fail(fmt::format("attributes K = {} and N = {} must both be from 1 to {}", k, n, kMaxDim));
  }
  if (bits < 2 || bits > 8) return c.fail(fmt::format("bits = {} is not a width MatMulNBits packs; expected 2 to 8", bits));
  if (block < 16 || block > 65536 || (block & (block - 1)) != 0) {
    return c.fail(fmt::format("block_size = {} must be a power of two from 16 to 65536", block));
  }
  const Shape& a = c.shape(0);
  if (a.empty() || a.back() != k) {
    return c.fail(fmt::format("A {} must end in K = {} (its reduction dim)", shape_str(a), k));
  }
  const Shape& b = c.shape(1);
  const int64_t blocks = (k + block - 1) / block;
  const int64_t blob = block * bits / 8;
  if (b.size() != 3 || b[0] != n || b[1] != blocks || b[2] != blob) {
    return c.fail(fmt::format("B {} is not the packed weight [N, K / block_size, block_size x bits / 8] = [{}, {}, {}]",
                              shape_str(b), n, blocks, blob));
  }
  Shape out(a.begin(), a.end() - 1);
  out.push_back(n);
  return c.set(0, c.dtype(0), out);
}

void cost_matmul_nbits(const CostContext& c, OpCost& cost) {
  cost.macs = c.out_elems() * c.attr_i("K", 0);
  cost.flops.fma = 2 * cost.macs;
}

}  // namespace

std::vector<OpDef> quantization_ops() {
  return {
      {"QuantizeLinear", "", OpClass::kElementwise, infer_quantize, cost_quantize},
      {"DequantizeLinear", "", OpClass::kElementwise, infer_dequantize, cost_dequantize},
      {"DynamicQuantizeLinear", "", OpClass::kElementwise, infer_dynamic_quantize, cost_dynamic_quantize},
      {"QLinearMatMul", "", OpClass::kGemm, infer_qlinear_matmul, cost_qlinear_matmul},
      {"QLinearConv", "", OpClass::kConv, infer_qlinear_conv, cost_qlinear_conv},
      {"MatMulNBits", "com.microsoft", OpClass::kGemm, infer_matmul_nbits, cost_matmul_nbits},
  };
}

}  // namespace gpusim::ops
