// CPU reference kernels for quantized graphs: ONNX's QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear and QLinearMatMul, and ONNX Runtime's com.microsoft MatMulNBits (a MatMul
// by a block-quantized weight). Values are computed in double as everywhere in the reference;
// quantizing rounds half to even and saturates to the output type (int4 to int32, uint4 to
// uint32, and the float8 types, where ONNX's `saturate` decides what an out-of-range value
// becomes). Scales and zero points are per tensor (a scalar), per axis (1-D along `axis`) or
// blocked (opset 21: the input's shape with dim `axis` divided by `block_size`).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/parallel.h"
#include "reference.h"

namespace gpusim::cpu {
namespace {

// The range of an integer type quantizing saturates to; false for types that are not integers.
bool int_range(DType t, double* lo, double* hi) {
  switch (t) {
    case DType::kUInt8: *lo = 0; *hi = 255; return true;
    case DType::kInt8: *lo = -128; *hi = 127; return true;
    case DType::kUInt16: *lo = 0; *hi = 65535; return true;
    case DType::kInt16: *lo = -32768; *hi = 32767; return true;
    case DType::kInt32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
    case DType::kUInt4: *lo = 0; *hi = 15; return true;
    case DType::kInt4: *lo = -8; *hi = 7; return true;
    default: return false;
  }
}

// A float8 format: mantissa bits, the smallest normal exponent, the largest finite value, and
// whether it has an infinity (E5M2) or only NaN (the FN and FNUZ types).
struct Fp8 {
  int mbits;
  int emin;
  double max;
  bool has_inf;
};
bool fp8_format(DType t, Fp8* f) {
  switch (t) {
    case DType::kFloat8E4M3FN: *f = {3, -6, 448.0, false}; return true;
    case DType::kFloat8E4M3FNUZ: *f = {3, -7, 240.0, false}; return true;
    case DType::kFloat8E5M2: *f = {2, -14, 57344.0, true}; return true;
    case DType::kFloat8E5M2FNUZ: *f = {2, -15, 57344.0, false}; return true;
    default: return false;
  }
}

// x rounded to the nearest value of format f (half to even, subnormals kept); out of range:
// the largest finite value when saturating, else infinity where the format has one, else NaN.
double to_fp8(double x, const Fp8& f, bool saturate) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  if (a == 0) return x;
  double r;
  if (std::isinf(a)) {
    r = a;
  } else {
    const int e = std::max(static_cast<int>(std::floor(std::log2(a))), f.emin);
    const double quantum = std::ldexp(1.0, e - f.mbits);
    r = std::nearbyint(a / quantum) * quantum;
  }
  if (r > f.max) {
    if (saturate) {
      r = f.max;
    } else {
      r = f.has_inf ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    }
  }
  return x < 0 ? -r : r;
}

// Where a scale (and its zero point) applies to element e of x: per tensor, per axis or blocked.
struct ScaleMap {
  enum Kind { kTensor, kAxis, kBlocked } kind = kTensor;
  int64_t inner = 1;   // elements after the axis
  int64_t dim = 1;     // x's extent along the axis
  int64_t block = 0;   // blocked: elements of the axis a scale covers
  // The scale's index for element e of x.
  int64_t at(int64_t e) const {
    if (kind == kTensor) return 0;
    const int64_t outer = e / (inner * dim), i = (e / inner) % dim, in = e % inner;
    if (kind == kAxis) return i;
    const int64_t nb = (dim + block - 1) / block;
    return (outer * nb + i / block) * inner + in;
  }
};

Result<ScaleMap> scale_map(const KernelArgs& a, const Shape& x, const HostTensor& scale, const char* what) {
  ScaleMap m;
  if (scale.elements() == 1 && scale.shape.size() <= 1 && a.attr_i("block_size", 0) == 0) return m;
  const auto rank = static_cast<int64_t>(x.size());
  int64_t axis = a.attr_i("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return a.fail(fmt::format("axis {} is outside {} (rank {})", a.attr_i("axis", 1), shape_str(x), rank));
  m.dim = x[static_cast<size_t>(axis)];
  for (auto d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) m.inner *= x[d];
  const int64_t block = a.attr_i("block_size", 0);
  if (block > 0) {
    Shape want = x;
    want[static_cast<size_t>(axis)] = (m.dim + block - 1) / block;
    if (scale.shape != want) {
      return a.fail(fmt::format("{} {} does not block {} by block_size {} along axis {}: expected {}", what,
                                shape_str(scale.shape), shape_str(x), block, axis, shape_str(want)));
    }
    m.kind = ScaleMap::kBlocked;
    m.block = block;
    return m;
  }
  if (scale.shape.size() != 1 || scale.shape[0] != m.dim) {
    return a.fail(fmt::format("{} {} is neither a scalar nor one value per index of axis {} ({})", what,
                              shape_str(scale.shape), axis, m.dim));
  }
  m.kind = ScaleMap::kAxis;
  return m;
}

// y = saturate(round(x / scale) + zero_point) into y's type.
Status quantize_into(const KernelArgs& a, const HostTensor& x, const HostTensor& scale, const HostTensor* zp,
                     const ScaleMap& m, HostTensor& y) {
  double lo = 0, hi = 0;
  Fp8 f8{};
  const bool integer = int_range(y.dtype, &lo, &hi), fp8 = fp8_format(y.dtype, &f8);
  if (!integer && !fp8) return a.fail(fmt::format("the output type {} is not one ONNX quantizes to", dtype_name(y.dtype)));
  const bool saturate = a.attr_i("saturate", 1) != 0;
  for (int64_t e = 0; e < x.elements(); ++e) {
    const int64_t s = m.at(e);
    const double sc = scale.real(s);
    const double z = zp != nullptr ? zp->real(s) : 0.0;
    if (integer) {
      const double q = std::nearbyint(x.real(e) / sc) + z;
      y.i[static_cast<size_t>(e)] = static_cast<int64_t>(std::clamp(std::isnan(q) ? 0.0 : q, lo, hi));
    } else {
      y.r[static_cast<size_t>(e)] = to_fp8(x.real(e) / sc + z, f8, saturate);
    }
  }
  return Ok{};
}

Status quantize_linear(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  const HostTensor& scale = *a.in[1];
  HostTensor& y = *a.out[0];
  y.allocate();
  auto m = scale_map(a, x.shape, scale, "y_scale");
  if (!m) return m.error();
  if (a.has(2) && a.in[2]->elements() != scale.elements()) {
    return a.fail(fmt::format("y_zero_point {} and y_scale {} differ in size", shape_str(a.in[2]->shape), shape_str(scale.shape)));
  }
  return quantize_into(a, x, scale, a.has(2) ? a.in[2] : nullptr, *m, y);
}

Status dequantize_linear(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  const HostTensor& scale = *a.in[1];
  HostTensor& y = *a.out[0];
  y.allocate();
  auto m = scale_map(a, x.shape, scale, "x_scale");
  if (!m) return m.error();
  const HostTensor* zp = a.has(2) ? a.in[2] : nullptr;
  if (zp != nullptr && zp->elements() != scale.elements()) {
    return a.fail(fmt::format("x_zero_point {} and x_scale {} differ in size", shape_str(zp->shape), shape_str(scale.shape)));
  }
  for (int64_t e = 0; e < x.elements(); ++e) {
    const int64_t s = m->at(e);
    y.r[static_cast<size_t>(e)] = (x.real(e) - (zp != nullptr ? zp->real(s) : 0.0)) * scale.real(s);
  }
  return Ok{};
}

// ONNX's formula: the range [min(0, min x), max(0, max x)] over 0..255.
Status dynamic_quantize_linear(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  double mn = 0, mx = 0;
  for (int64_t e = 0; e < x.elements(); ++e) {
    mn = std::min(mn, x.real(e));
    mx = std::max(mx, x.real(e));
  }
  const double scale = (mx - mn) / 255.0;
  const double zp = scale > 0 ? std::clamp(std::nearbyint(-mn / scale), 0.0, 255.0) : 0.0;
  HostTensor& y = *a.out[0];
  y.allocate();
  for (int64_t e = 0; e < x.elements(); ++e) {
    const double q = scale > 0 ? std::nearbyint(x.real(e) / scale) + zp : zp;
    y.i[static_cast<size_t>(e)] = static_cast<int64_t>(std::clamp(q, 0.0, 255.0));
  }
  if (a.out.size() > 1 && a.out[1] != nullptr) {
    a.out[1]->allocate();
    a.out[1]->r[0] = scale;
  }
  if (a.out.size() > 2 && a.out[2] != nullptr) {
    a.out[2]->allocate();
    a.out[2]->i[0] = static_cast<int64_t>(zp);
  }
  return Ok{};
}

// QLinearMatMul on 2-D operands (the batched form is refused, naming the shapes).
Status qlinear_matmul(KernelArgs& a) {
  const HostTensor &at = *a.in[0], &bt = *a.in[3];
  HostTensor& y = *a.out[0];
  y.allocate();
  if (at.shape.size() != 2 || bt.shape.size() != 2) {
    return a.fail(fmt::format("the reference multiplies 2-D operands; a {} and b {} are batched", shape_str(at.shape),
                              shape_str(bt.shape)));
  }
  const int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  if (bt.shape[0] != K) return a.fail("inner dimensions differ");
  auto as = per_line(a, 1, M, "a_scale", "row"), az = per_line(a, 2, M, "a_zero_point", "row");
  auto bs = per_line(a, 4, N, "b_scale", "column"), bz = per_line(a, 5, N, "b_zero_point", "column");
  for (auto* r : {&as, &az, &bs, &bz}) {
    if (!*r) return r->error();
  }
  double lo = 0, hi = 0;
  if (!int_range(y.dtype, &lo, &hi)) return a.fail(fmt::format("the output type {} is not an integer", dtype_name(y.dtype)));
  const double ys = a.in[6]->real(0), yz = a.has(7) ? a.in[7]->real(0) : 0.0;
  base::for_each_chunk(M, K * N, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (at.real(i * K + k) - (*az)[static_cast<size_t>(i)]) * (bt.real(k * N + j) - (*bz)[static_cast<size_t>(j)]);
        const double q = std::nearbyint(acc * (*as)[static_cast<size_t>(i)] * (*bs)[static_cast<size_t>(j)] / ys) + yz;
        y.i[static_cast<size_t>(i * N + j)] = static_cast<int64_t>(std::clamp(q, lo, hi));
      }
    }
  });
  return Ok{};
}

// MatMulNBits: Y = A B'^T (+ bias), B' [N, K] dequantized from B's bytes: row n, block b holds
// block_size values of `bits` each, packed from the low bits of byte 0 up; value j of the block
// is (q - zero point) x scales[n x blocks + b]. The zero point is 2^(bits - 1) without input 3;
// with it, packed the same way (a row's blocks in ceil(blocks x bits / 8) bytes) when uint8, else
// one value a block of the scales' type.
Status matmul_nbits(KernelArgs& a) {
  const HostTensor& at = *a.in[0];
  const HostTensor& bt = *a.in[1];
  const HostTensor& st = *a.in[2];
  HostTensor& y = *a.out[0];
  y.allocate();
  const int64_t K = a.attr_i("K", 0), N = a.attr_i("N", 0), bits = a.attr_i("bits", 4), bs = a.attr_i("block_size", 0);
  if (a.has(4)) return a.fail("g_idx (act-order) is not computed by the reference");
  if (bits != 2 && bits != 4 && bits != 8) {
    return a.fail(fmt::format("bits = {}: the reference unpacks 2, 4 or 8 bits (whole values a byte)", bits));
  }
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  if (bt.elements() != N * blocks * blob) {
    return a.fail(fmt::format("B {} does not hold N x ceil(K / block_size) x block_size x bits / 8 = {} x {} x {} bytes",
                              shape_str(bt.shape), N, blocks, blob));
  }
  if (st.elements() != N * blocks) return a.fail(fmt::format("scales {} are not N x blocks = {}", shape_str(st.shape), N * blocks));
  const HostTensor* zp = a.has(3) ? a.in[3] : nullptr;
  const bool zp_packed = zp != nullptr && !zp->is_real();
  const int64_t zp_row = (blocks * bits + 7) / 8;
  if (zp != nullptr && zp->elements() != (zp_packed ? N * zp_row : N * blocks)) {
    return a.fail(fmt::format("zero_points {} are not {} (N x {})", shape_str(zp->shape),
                              zp_packed ? N * zp_row : N * blocks, zp_packed ? "packed bytes a row" : "blocks"));
  }
  const HostTensor* bias = a.has(5) ? a.in[5] : nullptr;
  if (bias != nullptr && bias->elements() != N) return a.fail(fmt::format("bias {} is not N = {}", shape_str(bias->shape), N));
  const int64_t mask = (int64_t{1} << bits) - 1;
  // B' row by row, once.
  std::vector<double> w(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t b = 0; b < blocks; ++b) {
      double z = static_cast<double>(int64_t{1} << (bits - 1));
      if (zp_packed) {
        const int64_t bit = b * bits;
        z = static_cast<double>((zp->i[static_cast<size_t>(n * zp_row + bit / 8)] >> (bit % 8)) & mask);
      } else if (zp != nullptr) {
        z = zp->real(n * blocks + b);
      }
      const double sc = st.real(n * blocks + b);
      for (int64_t j = 0; j < bs && b * bs + j < K; ++j) {
        const int64_t bit = j * bits;
        const int64_t byte = bt.i[static_cast<size_t>((n * blocks + b) * blob + bit / 8)];
        const double q = static_cast<double>((byte >> (bit % 8)) & mask);
        w[static_cast<size_t>(n * K + b * bs + j)] = (q - z) * sc;
      }
    }
  }
  const int64_t rows = at.elements() / K;
  base::for_each_chunk(rows, K * N, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = bias != nullptr ? bias->real(n) : 0.0;
        const double* wr = &w[static_cast<size_t>(n * K)];
        for (int64_t k = 0; k < K; ++k) acc += at.real(r * K + k) * wr[k];
        y.r[static_cast<size_t>(r * N + n)] = acc;
      }
    }
  });
  return Ok{};
}

}  // namespace

void register_quantization(std::map<std::string, Kernel>& k) {
  k["QuantizeLinear"] = quantize_linear;
  k["DequantizeLinear"] = dequantize_linear;
  k["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  k["QLinearMatMul"] = qlinear_matmul;
  k["com.microsoft:MatMulNBits"] = matmul_nbits;
}

}  // namespace gpusim::cpu
