// CPU reference kernels for the matmul/conv family and pooling (Conv, ConvInteger, ConvTranspose,
// MatMul, MatMulInteger, Gemm, Einsum, Max/Average/Lp pools and their global forms) and for the
// fused attention ops (ONNX Attention, com.microsoft MultiHeadAttention and Attention).
// Everything is computed in double with double accumulation; Conv, ConvTranspose, MatMul and Gemm
// split their outermost loop across threads, each thread writing a disjoint slice of the output.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "graph/einsum.h"
#include "reference.h"
#include "base/parallel.h"

namespace gpusim::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t prod(const Shape& s, size_t from = 0) {
  int64_t p = 1;
  for (auto it = s.begin() + static_cast<std::ptrdiff_t>(std::min(from, s.size())); it != s.end(); ++it) p *= *it;
  return p;
}

int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }  // floor, b > 0

// A tensor's values as doubles (borrowed when already real).
struct Reals {
  std::vector<double> own;
  const double* p = nullptr;
  explicit Reals(const HostTensor& t) {
    if (t.is_real()) {
      p = t.r.data();
    } else {
      own.reserve(t.i.size());
      for (int64_t v : t.i) own.push_back(static_cast<double>(v));
      p = own.data();
    }
  }
  double operator[](int64_t k) const { return p[k]; }
};

void put(HostTensor& t, int64_t k, double v) {
  if (t.is_real()) {
    t.r[static_cast<size_t>(k)] = v;
  } else {
    t.i[static_cast<size_t>(k)] = static_cast<int64_t>(std::llround(v));
  }
}

// ---- window arithmetic (conv and pools) --------------------------------------------------------

struct Win {
  size_t n = 0;                                      // spatial dims
  std::vector<int64_t> in, out, k, s, d, pb, pe;     // sizes, kernel, strides, dilations, pads
  std::vector<std::vector<int64_t>> kpos;            // every kernel offset, as a multi-index
};

// Resolves the window of a conv/pool from x (input) and y (output, already shaped by inference).
Result<Win> window(const KernelArgs& a, const Shape& x, const Shape& y, std::vector<int64_t> kernel, bool transpose) {
  Win w;
  w.n = x.size() - 2;
  const size_t n = w.n;
  w.in.assign(x.begin() + 2, x.end());
  w.out.assign(y.begin() + 2, y.end());
  w.k = std::move(kernel);
  w.s = a.attr_ints("strides");
  w.d = a.attr_ints("dilations");
  std::vector<int64_t> pads = a.attr_ints("pads");
  if (w.s.empty()) w.s.assign(n, 1);
  if (w.d.empty()) w.d.assign(n, 1);
  if (pads.empty()) pads.assign(2 * n, 0);
  if (w.k.size() != n || w.s.size() != n || w.d.size() != n || pads.size() != 2 * n || w.out.size() != n) {
    return a.fail("kernel_shape/strides/dilations/pads do not match the spatial rank");
  }
  const std::string ap = a.attr_s("auto_pad", "NOTSET");
  std::vector<int64_t> outpad = a.attr_ints("output_padding");
  if (outpad.size() != n) outpad.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t eff = (w.k[i] - 1) * w.d[i] + 1;
    int64_t pb = pads[i], pe = pads[i + n];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t total;
      if (transpose) {
        total = w.s[i] * (w.in[i] - 1) + outpad[i] + eff - w.out[i];
        pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else {
        total = std::max<int64_t>(0, (w.out[i] - 1) * w.s[i] + eff - w.in[i]);
        pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      }
      pe = total - pb;
    } else if (ap == "VALID") {
      pb = pe = 0;
    }
    w.pb.push_back(pb);
    w.pe.push_back(pe);
  }
  const int64_t kn = prod(w.k);
  std::vector<int64_t> idx(n, 0);
  for (int64_t f = 0; f < kn; ++f) {
    w.kpos.push_back(idx);
    for (size_t j = n; j-- > 0;) {
      if (++idx[j] < w.k[j]) break;
      idx[j] = 0;
    }
  }
  return w;
}

// Multi-index odometer over `dims` (all but the last spatial dim for the conv loops).
bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& dims, size_t count) {
  for (size_t j = count; j-- > 0;) {
    if (++idx[j] < dims[j]) return true;
    idx[j] = 0;
  }
  return false;
}

// ---- Conv / ConvInteger / QLinearConv / ConvTranspose ------------------------------------------
// One loop serves both: it walks the output (Conv, a gather) or the input (ConvTranspose, a
// scatter); the other side's position is walk * stride + k * dilation - pad_begin either way.
// QLinearConv (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B) is
// ConvInteger's sum plus its int32 bias B, requantized: round(sum x x_scale x w_scale[m] / y_scale)
// + y_zero_point, saturated to the output's type (w_scale and w_zero_point per tensor or per
// output channel).

Status conv(KernelArgs& a) {
  const bool qlinear = a.node.op_type == "QLinearConv";
  const bool integer = a.node.op_type == "ConvInteger" || qlinear, tr = a.node.op_type == "ConvTranspose";
  const HostTensor &xt = *a.in[0], &wt = *a.in[qlinear ? 3 : 1];
  HostTensor& y = *a.out[0];
  y.allocate();
  const int64_t group = a.attr_i("group", 1);
  std::vector<int64_t> kernel = a.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(wt.shape.begin() + 2, wt.shape.end());
  auto win = window(a, xt.shape, y.shape, kernel, tr);
  if (!win) return win.error();
  const Win& w = *win;
  const int64_t N = xt.shape[0], C = xt.shape[1], M = y.shape[1];
  if (group <= 0 || C % group != 0 || M % group != 0 || (tr ? wt.shape[0] != C || wt.shape[1] * group != M
                                                            : wt.shape[0] != M || wt.shape[1] * group != C)) {
    return a.fail("channels do not divide into the groups");
  }
  const int64_t Cg = C / group, Mg = M / group, in_sp = prod(w.in), out_sp = prod(w.out), k_sp = prod(w.k);
  if (prod(wt.shape, 2) != k_sp) return a.fail("kernel_shape does not match the weight");
  double xzp = 0;
  std::vector<double> wzp(static_cast<size_t>(M), 0.0), bias(static_cast<size_t>(M), 0.0);
  std::vector<double> out_scale;  // QLinearConv: x_scale x w_scale[m] / y_scale
  double yzp = 0, ylo = 0, yhi = 0;
  if (integer) {
    if (a.has(2)) {
      if (a.in[2]->elements() != 1) return a.fail("x_zero_point must be a scalar");
      xzp = a.in[2]->real(0);
    }
    auto z = per_line(a, qlinear ? 5 : 3, M, "w_zero_point", "channel");
    if (!z) return z.error();
    wzp = *z;
  }
  if (qlinear) {
    if (!a.has(1) || a.in[1]->elements() != 1) return a.fail("x_scale must be a scalar");
    if (!a.has(6) || a.in[6]->elements() != 1) return a.fail("y_scale must be a scalar");
    if (a.has(7) && a.in[7]->elements() != 1) return a.fail("y_zero_point must be a scalar");
    auto ws = per_line(a, 4, M, "w_scale", "channel");
    if (!ws) return ws.error();
    const double xs = a.in[1]->real(0), ys = a.in[6]->real(0);
    yzp = a.has(7) ? a.in[7]->real(0) : 0.0;
    switch (y.dtype) {
      case DType::kUInt8: ylo = 0; yhi = 255; break;
      case DType::kInt8: ylo = -128; yhi = 127; break;
      default: return a.fail(fmt::format("the output type {} is not int8 or uint8", dtype_name(y.dtype)));
    }
    for (int64_t m = 0; m < M; ++m) out_scale.push_back(xs * (*ws)[static_cast<size_t>(m)] / ys);
    if (a.has(8)) {
      if (a.in[8]->elements() != M) {
        return a.fail(fmt::format("B {} is not one int32 per output channel ({})", shape_str(a.in[8]->shape), M));
      }
      for (int64_t m = 0; m < M; ++m) bias[static_cast<size_t>(m)] = a.in[8]->real(m);
    }
  } else if (!integer && a.has(2)) {
    for (int64_t m = 0; m < M; ++m) bias[static_cast<size_t>(m)] = a.in[2]->real(m);
  }
  const Reals x(xt), wv(wt);
  const size_t n = w.n, last = n - 1;
  const std::vector<int64_t>& walk = tr ? w.in : w.out;
  const std::vector<int64_t>& other = tr ? w.out : w.in;
  const int64_t walk_last = walk[last], other_last = other[last], walk_sp = tr ? in_sp : out_sp;
  const int64_t rows = walk_sp / walk_last, s = w.s[last];
  base::for_each_chunk(N * M, Cg * k_sp * walk_sp, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(out_sp));
    std::vector<int64_t> wi(n, 0);
    for (int64_t bm = begin; bm < end; ++bm) {
      const int64_t b = bm / M, m = bm % M, g = m / Mg;
      std::fill(acc.begin(), acc.end(), bias[static_cast<size_t>(m)]);
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ic = g * Cg + c, xbase = (b * C + ic) * in_sp;
        const int64_t wbase = (tr ? ic * Mg + m % Mg : m * Cg + c) * k_sp;
        for (int64_t kf = 0; kf < k_sp; ++kf) {
          const double wk = wv[wbase + kf] - wzp[static_cast<size_t>(m)];
          const auto& kp = w.kpos[static_cast<size_t>(kf)];
          const int64_t off = kp[last] * w.d[last] - w.pb[last];
          const int64_t lo = std::max<int64_t>(0, -fdiv(off, s));
          const int64_t hi = std::min(walk_last, fdiv(other_last - 1 - off, s) + 1);
          if (lo >= hi) continue;
          std::fill(wi.begin(), wi.end(), 0);
          for (int64_t row = 0; row < rows; ++row, next_index(wi, walk, last)) {
            int64_t orow = 0;  // the other side's row
            bool ok = true;
            for (size_t j = 0; j < last && ok; ++j) {
              const int64_t op = wi[j] * w.s[j] + kp[j] * w.d[j] - w.pb[j];
              ok = op >= 0 && op < other[j];
              orow = orow * other[j] + op;
            }
            if (!ok) continue;
            if (tr) {
              const double* xp = x.p + xbase + row * walk_last;
              double* ap = acc.data() + orow * other_last;
              for (int64_t i = lo; i < hi; ++i) ap[i * s + off] += wk * xp[i];
            } else {
              const double* xp = x.p + xbase + orow * other_last;
              double* ap = acc.data() + row * walk_last;
              for (int64_t o = lo; o < hi; ++o) ap[o] += wk * (xp[o * s + off] - xzp);
            }
          }
        }
      }
      if (qlinear) {
        const double sc = out_scale[static_cast<size_t>(m)];
        for (int64_t o = 0; o < out_sp; ++o) {
          const double q = std::nearbyint(acc[static_cast<size_t>(o)] * sc) + yzp;
          y.i[static_cast<size_t>(bm * out_sp + o)] = static_cast<int64_t>(std::clamp(q, ylo, yhi));
        }
        continue;
      }
      for (int64_t o = 0; o < out_sp; ++o) put(y, bm * out_sp + o, acc[static_cast<size_t>(o)]);
    }
  });
  return Ok{};
}

// ---- MatMul / MatMulInteger / Gemm -------------------------------------------------------------

Status matmul(KernelArgs& a) {
  const HostTensor &at = *a.in[0], &bt = *a.in[1];
  HostTensor& y = *a.out[0];
  y.allocate();
  Shape as = at.shape, bs = bt.shape;
  if (as.empty() || bs.empty()) return a.fail("MatMul operands must have rank >= 1");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) return a.fail("inner dimensions differ");
  const size_t ra = as.size() - 2, rb = bs.size() - 2, r = std::max(ra, rb);
  Shape batch(r);
  for (size_t j = 0; j < r; ++j) {
    const int64_t da = j + ra >= r ? as[j + ra - r] : 1, db = j + rb >= r ? bs[j + rb - r] : 1;
    if (da != db && da != 1 && db != 1) return a.fail("batch dimensions do not broadcast");
    batch[j] = std::max(da, db);
  }
  const int64_t nb = prod(batch);
  if (nb * M * N != y.elements()) return a.fail("output shape does not match the operands");
  std::vector<int64_t> aoff(static_cast<size_t>(nb)), boff(static_cast<size_t>(nb)), idx(r, 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = 0, ob = 0;
    for (size_t j = 0; j < r; ++j) {
      if (j + ra >= r) oa = oa * as[j + ra - r] + (as[j + ra - r] == 1 ? 0 : idx[j]);
      if (j + rb >= r) ob = ob * bs[j + rb - r] + (bs[j + rb - r] == 1 ? 0 : idx[j]);
    }
    aoff[static_cast<size_t>(bi)] = oa * M * K;
    boff[static_cast<size_t>(bi)] = ob * K * N;
    next_index(idx, batch, r);
  }
  std::vector<double> azp(static_cast<size_t>(M), 0.0), bzp(static_cast<size_t>(N), 0.0);
  if (a.node.op_type == "MatMulInteger") {
    auto za = per_line(a, 2, M, "a_zero_point", "row");
    if (!za) return za.error();
    auto zb = per_line(a, 3, N, "b_zero_point", "column");
    if (!zb) return zb.error();
    azp = *za;
    bzp = *zb;
  }
  const Reals A(at), B(bt);
  base::for_each_chunk(nb * M, K * N, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(N)), brow(static_cast<size_t>(N));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / M, i = row % M;
      std::fill(acc.begin(), acc.end(), 0.0);
      const double* ap = &A.p[aoff[static_cast<size_t>(bi)] + i * K];
      for (int64_t k = 0; k < K; ++k) {
        const double av = ap[k] - azp[static_cast<size_t>(i)];
        const double* bp = &B.p[boff[static_cast<size_t>(bi)] + k * N];
        for (int64_t j = 0; j < N; ++j) acc[static_cast<size_t>(j)] += av * (bp[j] - bzp[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < N; ++j) put(y, row * N + j, acc[static_cast<size_t>(j)]);
    }
  });
  return Ok{};
}

Status gemm(KernelArgs& a) {
  const HostTensor &at = *a.in[0], &bt = *a.in[1];
  HostTensor& y = *a.out[0];
  y.allocate();
  if (at.shape.size() != 2 || bt.shape.size() != 2) return a.fail("A and B must be 2-D");
  const bool ta = a.attr_i("transA", 0) != 0, tb = a.attr_i("transB", 0) != 0;
  const double alpha = a.attr_f("alpha", 1.0), beta = a.attr_f("beta", 1.0);
  const int64_t M = ta ? at.shape[1] : at.shape[0], K = ta ? at.shape[0] : at.shape[1];
  const int64_t N = tb ? bt.shape[0] : bt.shape[1];
  if ((tb ? bt.shape[1] : bt.shape[0]) != K) return a.fail("inner dimensions differ");
  int64_t cr = 1, cc = 1;
  if (a.has(2)) {
    const Shape& cs = a.in[2]->shape;
    if (cs.size() > 2) return a.fail("C must have rank <= 2");
    cc = cs.empty() ? 1 : cs.back();
    cr = cs.size() == 2 ? cs[0] : 1;
    if ((cr != 1 && cr != M) || (cc != 1 && cc != N)) return a.fail("C does not broadcast to [M, N]");
  }
  const Reals A(at), B(bt);
  const int64_t lda = at.shape[1], ldb = bt.shape[1];
  auto finish = [&](int64_t i, int64_t j, double acc) {
    double v = alpha * acc;
    if (a.has(2)) v += beta * a.in[2]->real((cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j));
    put(y, i * N + j, v);
  };
  const int64_t sa = ta ? lda : 1;  // A's step along k
  if (tb) {  // B rows are contiguous in k: one dot product per output element
    base::for_each_chunk(M * N, K, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t i = e / N, j = e % N;
        const double* ap = A.p + (ta ? i : i * lda);
        const double* bp = B.p + j * ldb;
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += ap[k * sa] * bp[k];
        finish(i, j, acc);
      }
    });
    return Ok{};
  }
  base::for_each_chunk(M, K * N, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(N));
    for (int64_t i = begin; i < end; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const double av = ta ? A[k * lda + i] : A[i * lda + k];
        const double* bp = B.p + k * ldb;
        for (int64_t j = 0; j < N; ++j) acc[static_cast<size_t>(j)] += av * bp[j];
      }
      for (int64_t j = 0; j < N; ++j) finish(i, j, acc[static_cast<size_t>(j)]);
    }
  });
  return Ok{};
}

// ---- Einsum -----------------------------------------------------------------------------------

Status einsum(KernelArgs& a) {
  HostTensor& y = *a.out[0];
  y.allocate();
  const size_t nin = a.in.size();
  std::vector<Shape> shapes;
  for (size_t i = 0; i < nin; ++i) {
    if (!a.has(i)) return a.fail("missing operand");
    shapes.push_back(a.in[i]->shape);
  }
  auto lab = einsum_labels(parse_einsum_equation(a.attr_s("equation", "")), shapes);
  if (!lab) return a.fail(lab.error().message);
  const std::vector<std::vector<int>>& labels = lab->inputs;
  std::vector<int64_t> size(lab->count(), 1);
  std::vector<bool> used(size.size(), false);
  for (size_t i = 0; i < nin; ++i) {
    const Shape& sh = shapes[i];
    for (size_t d = 0; d < sh.size(); ++d) {
      const auto l = static_cast<size_t>(labels[i][d]);
      if (used[l] && size[l] != sh[d] && size[l] != 1 && sh[d] != 1) return a.fail("index sizes disagree");
      if (!used[l] || size[l] == 1) size[l] = sh[d];
      used[l] = true;
    }
  }
  // Loop order: the output labels, then the summed ones.
  std::vector<int> order = lab->output;
  const size_t no = order.size();
  for (size_t l = 0; l < used.size(); ++l) {
    if (used[l] && std::find(order.begin(), order.end(), static_cast<int>(l)) == order.end()) {
      order.push_back(static_cast<int>(l));
    }
  }
  const size_t nl = order.size();
  std::vector<int64_t> dims(nl);
  int64_t out_n = 1, sum_n = 1;
  for (size_t j = 0; j < nl; ++j) (j < no ? out_n : sum_n) *= (dims[j] = size[static_cast<size_t>(order[j])]);
  if (out_n != y.elements()) return a.fail("output shape does not match the equation");
  // stride[i][j]: how far operand i moves per step of loop label j (0 for broadcast dims).
  std::vector<std::vector<int64_t>> stride(nin, std::vector<int64_t>(nl, 0));
  std::vector<Reals> vals;
  vals.reserve(nin);
  for (size_t i = 0; i < nin; ++i) {
    vals.emplace_back(*a.in[i]);
    const Shape& sh = a.in[i]->shape;
    for (size_t d = sh.size(), st = 1; d-- > 0; st *= static_cast<size_t>(sh[d])) {
      const auto j = static_cast<size_t>(std::find(order.begin(), order.end(), labels[i][d]) - order.begin());
      if (sh[d] != 1) stride[i][j] += static_cast<int64_t>(st);
    }
  }
  std::vector<int64_t> idx(nl, 0);
  for (int64_t o = 0; o < out_n; ++o) {
    double acc = 0;
    for (int64_t s = 0; s < sum_n; ++s, next_index(idx, dims, nl)) {
      double p = 1;
      for (size_t i = 0; i < nin; ++i) {
        int64_t f = 0;
        for (size_t j = 0; j < nl; ++j) f += idx[j] * stride[i][j];
        p *= vals[i][f];
      }
      acc += p;
    }
    put(y, o, acc);
  }
  return Ok{};
}

// ---- Pools ------------------------------------------------------------------------------------

Status pool(KernelArgs& a) {
  const std::string& op = a.node.op_type;
  const HostTensor& xt = *a.in[0];
  HostTensor& y = *a.out[0];
  y.allocate();
  HostTensor* ind = a.out.size() > 1 ? a.out[1] : nullptr;
  if (ind) ind->allocate();
  auto win = window(a, xt.shape, y.shape, a.attr_ints("kernel_shape"), false);
  if (!win) return win.error();
  const Win& w = *win;
  const bool include_pad = a.attr_i("count_include_pad", 0) != 0;
  const bool col_major = a.attr_i("storage_order", 0) != 0;
  const double p = static_cast<double>(a.attr_i("p", 2));
  const int64_t planes = xt.shape[0] * xt.shape[1], in_sp = prod(w.in), out_sp = prod(w.out);
  const Reals x(xt);
  const size_t n = w.n;
  std::vector<int64_t> oi(n, 0);
  for (int64_t o = 0; o < out_sp; ++o, next_index(oi, w.out, n)) {
    for (int64_t pl = 0; pl < planes; ++pl) {
      double best = -kInf, sum = 0;
      int64_t best_at = -1, count = 0, padded = 0;
      for (const auto& kp : w.kpos) {
        int64_t f = 0, cm = 0, cm_stride = 1;
        bool inside = true, in_pads = true;
        for (size_t j = 0; j < n; ++j) {
          const int64_t ip = oi[j] * w.s[j] + kp[j] * w.d[j] - w.pb[j];
          if (ip < 0 || ip >= w.in[j]) inside = false;
          if (ip < -w.pb[j] || ip >= w.in[j] + w.pe[j]) in_pads = false;
          f = f * w.in[j] + ip;
          cm += ip * cm_stride;
          cm_stride *= w.in[j];
        }
        if (in_pads) ++padded;
        if (!inside) continue;
        const double v = x[pl * in_sp + f];
        ++count;
        if (op == "MaxPool") {
          if (v > best || best_at < 0) {
            best = v;
            best_at = pl * in_sp + (col_major ? cm : f);
          }
        } else if (op == "LpPool") {
          sum += std::pow(std::fabs(v), p);
        } else {
          sum += v;
        }
      }
      double r;
      if (op == "MaxPool") {
        r = best;
        if (ind) ind->i[static_cast<size_t>(pl * out_sp + o)] = best_at;
      } else if (op == "LpPool") {
        r = std::pow(sum, 1.0 / p);
      } else {
        r = sum / static_cast<double>(include_pad ? padded : count);
      }
      put(y, pl * out_sp + o, r);
    }
  }
  return Ok{};
}

Status global_pool(KernelArgs& a) {
  const std::string& op = a.node.op_type;
  const HostTensor& xt = *a.in[0];
  HostTensor& y = *a.out[0];
  y.allocate();
  if (xt.shape.size() < 2) return a.fail("input needs rank >= 2");
  const int64_t planes = xt.shape[0] * xt.shape[1], sp = prod(xt.shape, 2);
  const double p = static_cast<double>(a.attr_i("p", 2));
  const Reals x(xt);
  for (int64_t pl = 0; pl < planes; ++pl) {
    double acc = op == "GlobalMaxPool" ? -kInf : 0.0;
    for (int64_t k = 0; k < sp; ++k) {
      const double v = x[pl * sp + k];
      if (op == "GlobalMaxPool") {
        acc = std::max(acc, v);
      } else if (op == "GlobalLpPool") {
        acc += std::pow(std::fabs(v), p);
      } else {
        acc += v;
      }
    }
    if (op == "GlobalAveragePool") acc /= static_cast<double>(sp);
    if (op == "GlobalLpPool") acc = std::pow(acc, 1.0 / p);
    put(y, pl, acc);
  }
  return Ok{};
}

// ---- Attention --------------------------------------------------------------------------------

// Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv] (query head h reads kv head
// h / (Hq / Hkv)); bias [B, Hq, Sq, Skv] added to the scaled scores (empty: none).
struct Attn {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, D = 0, Dv = 0;
  std::vector<double> q, k, v, bias;
  double scale = 1, softcap = 0;
  int64_t qk_mode = 0;
  std::vector<double> y, qk;  // y [B, Hq, Sq, Dv]; qk [B, Hq, Sq, Skv] when wanted

  void run(bool want_qk) {
    y.assign(static_cast<size_t>(B * Hq * Sq * Dv), 0.0);
    if (want_qk) qk.assign(static_cast<size_t>(B * Hq * Sq * Skv), 0.0);
    std::vector<double> s(static_cast<size_t>(Skv));
    const int64_t rep = Hq / Hkv;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = b * Hkv + h / rep;
        for (int64_t i = 0; i < Sq; ++i) {
          const int64_t row = (b * Hq + h) * Sq + i;
          const double* qp = &q[static_cast<size_t>(row * D)];
          double mx = -kInf;
          for (int64_t j = 0; j < Skv; ++j) {
            const double* kp = &k[static_cast<size_t>((kvh * Skv + j) * D)];
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += qp[d] * kp[d];
            double raw = dot * scale, val = raw;
            if (softcap > 0) val = softcap * std::tanh(val / softcap);
            if (!bias.empty()) val += bias[static_cast<size_t>(row * Skv + j)];
            if (want_qk && qk_mode < 3) qk[static_cast<size_t>(row * Skv + j)] = qk_mode == 0 ? raw : val;
            s[static_cast<size_t>(j)] = val;
            mx = std::max(mx, val);
          }
          double sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          double* yp = &y[static_cast<size_t>(row * Dv)];
          for (int64_t j = 0; j < Skv; ++j) {
            const double pj = s[static_cast<size_t>(j)] / sum;
            if (want_qk && qk_mode == 3) qk[static_cast<size_t>(row * Skv + j)] = pj;
            const double* vp = &v[static_cast<size_t>((kvh * Skv + j) * Dv)];
            for (int64_t d = 0; d < Dv; ++d) yp[d] += pj * vp[d];
          }
        }
      }
    }
  }
  void causal(int64_t offset) {  // key j visible to query i iff j <= i + offset
    if (bias.empty()) bias.assign(static_cast<size_t>(B * Hq * Sq * Skv), 0.0);
    for (int64_t r = 0; r < B * Hq * Sq; ++r) {
      for (int64_t j = (r % Sq) + offset + 1; j < Skv; ++j) bias[static_cast<size_t>(r * Skv + j)] = -kInf;
    }
  }
  // Adds t, broadcast (right-aligned, numpy style) to [B, Hq, Sq, Skv]; bool false / 0 -> `off`.
  void add_mask(const HostTensor& t, bool as_keep, double off, bool pad_last) {
    if (bias.empty()) bias.assign(static_cast<size_t>(B * Hq * Sq * Skv), 0.0);
    Shape sh = t.shape;
    while (sh.size() < 4) sh.insert(sh.begin(), 1);
    const int64_t full[4] = {B, Hq, Sq, Skv};
    for (int64_t f = 0; f < B * Hq * Sq * Skv; ++f) {
      int64_t rem = f, idx[4];
      for (int d = 3; d >= 0; --d) {
        idx[d] = rem % full[d];
        rem /= full[d];
      }
      int64_t mf = 0;
      bool outside = false;
      for (int d = 0; d < 4; ++d) {
        int64_t id = sh[static_cast<size_t>(d)] == 1 && !(d == 3 && pad_last) ? 0 : idx[d];
        if (id >= sh[static_cast<size_t>(d)]) outside = true;
        mf = mf * sh[static_cast<size_t>(d)] + std::min(id, sh[static_cast<size_t>(d)] - 1);
      }
      double add;
      if (outside) {
        add = -kInf;
      } else if (as_keep) {
        add = t.real(mf) != 0 ? 0.0 : off;
      } else {
        add = t.real(mf);
      }
      bias[static_cast<size_t>(f)] += add;
    }
  }
};

// [B, S, N*H] (row stride `ld`, column offset `col`, head stride `hs`, 0 = H) -> [B, N, S, H],
// plus an optional bias.
std::vector<double> to_bnsh(const Reals& src, int64_t B, int64_t S, int64_t N, int64_t H, int64_t ld, int64_t col,
                            const HostTensor* bias = nullptr, int64_t bias_off = 0, int64_t hs = 0) {
  std::vector<double> o(static_cast<size_t>(B * N * S * H));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h) {
          double v = src[(b * S + s) * ld + col + n * (hs ? hs : H) + h];
          if (bias) v += bias->real(bias_off + n * H + h);
          o[static_cast<size_t>(((b * N + n) * S + s) * H + h)] = v;
        }
  return o;
}

// [B, N, S, H] -> y as [B, S, N*H].
void from_bnsh(const std::vector<double>& src, int64_t B, int64_t N, int64_t S, int64_t H, HostTensor& y) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h)
          put(y, (b * S + s) * N * H + n * H + h, src[static_cast<size_t>(((b * N + n) * S + s) * H + h)]);
}

void store(HostTensor* t, const std::vector<double>& v) {
  if (!t) return;
  t->allocate();
  for (size_t k = 0; k < v.size() && static_cast<int64_t>(k) < t->elements(); ++k) put(*t, static_cast<int64_t>(k), v[k]);
}

Status onnx_attention(KernelArgs& a) {
  const HostTensor &qt = *a.in[0], &kt = *a.in[1], &vt = *a.in[2];
  Attn t;
  const Reals q(qt), k(kt), v(vt);
  const bool four = qt.shape.size() == 4;
  t.B = qt.shape[0];
  int64_t Skv_new;
  if (four) {
    t.Hq = qt.shape[1], t.Sq = qt.shape[2], t.D = qt.shape[3];
    t.Hkv = kt.shape[1], Skv_new = kt.shape[2], t.Dv = vt.shape[3];
    t.q.assign(q.p, q.p + qt.elements());
    t.k.assign(k.p, k.p + kt.elements());
    t.v.assign(v.p, v.p + vt.elements());
  } else {
    t.Hq = a.attr_i("q_num_heads", 0), t.Hkv = a.attr_i("kv_num_heads", 0);
    if (t.Hq <= 0 || t.Hkv <= 0) return a.fail("3-D inputs need q_num_heads and kv_num_heads");
    t.Sq = qt.shape[1], t.D = qt.shape[2] / t.Hq, Skv_new = kt.shape[1], t.Dv = vt.shape[2] / t.Hkv;
    t.q = to_bnsh(q, t.B, t.Sq, t.Hq, t.D, qt.shape[2], 0);
    t.k = to_bnsh(k, t.B, Skv_new, t.Hkv, t.D, kt.shape[2], 0);
    t.v = to_bnsh(v, t.B, Skv_new, t.Hkv, t.Dv, vt.shape[2], 0);
  }
  if (t.Hkv <= 0 || t.Hq % t.Hkv != 0) return a.fail("q heads must be a multiple of kv heads");
  if (a.has(6)) return a.fail("nonpad_kv_seqlen (opset 24) is not supported");
  int64_t past = 0;
  if (a.has(4) != a.has(5)) return a.fail("past_key and past_value must be given together");
  if (a.has(4)) {  // concatenate the caches along the sequence
    past = a.in[4]->shape[2];
    auto cat = [&](const HostTensor& p, const std::vector<double>& cur, int64_t H) {
      std::vector<double> o;
      const Reals pr(p);
      for (int64_t bh = 0; bh < t.B * t.Hkv; ++bh) {
        o.insert(o.end(), pr.p + bh * past * H, pr.p + (bh + 1) * past * H);
        o.insert(o.end(), cur.begin() + bh * Skv_new * H, cur.begin() + (bh + 1) * Skv_new * H);
      }
      return o;
    };
    t.k = cat(*a.in[4], t.k, t.D);
    t.v = cat(*a.in[5], t.v, t.Dv);
  }
  t.Skv = past + Skv_new;
  t.scale = a.node.attr("scale") ? a.attr_f("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(t.D));
  t.softcap = a.attr_f("softcap", 0.0);
  t.qk_mode = a.attr_i("qk_matmul_output_mode", 0);
  if (a.has(3)) t.add_mask(*a.in[3], a.in[3]->dtype == DType::kBool, -kInf, true);
  if (a.attr_i("is_causal", 0) != 0) t.causal(past);
  HostTensor* qk_out = a.out.size() > 3 ? a.out[3] : nullptr;
  t.run(qk_out != nullptr);
  HostTensor& y = *a.out[0];
  y.allocate();
  if (four) {
    store(&y, t.y);
  } else {
    from_bnsh(t.y, t.B, t.Hq, t.Sq, t.Dv, y);
  }
  if (a.out.size() > 1) store(a.out[1], t.k);
  if (a.out.size() > 2) store(a.out[2], t.v);
  store(qk_out, t.qk);
  return Ok{};
}

// com.microsoft masks: [B] key lengths, [2B] end/start, [B, L] raw, [B, S, L] 3-D (0 = masked).
Status ms_key_mask(const KernelArgs& a, const HostTensor& m, Attn& t, double filter) {
  if (t.bias.empty()) t.bias.assign(static_cast<size_t>(t.B * t.Hq * t.Sq * t.Skv), 0.0);
  const Shape& s = m.shape;
  const bool lens = s.size() == 1 && s[0] == t.B, ends = s.size() == 1 && s[0] == 2 * t.B;
  const bool raw2 = s.size() == 2 && s[0] == t.B && s[1] == t.Skv;
  const bool raw3 = s.size() == 3 && s[0] == t.B && s[1] == t.Sq && s[2] == t.Skv;
  if (!lens && !ends && !raw2 && !raw3) return a.fail(fmt::format("mask {} is in an unsupported format", shape_str(s)));
  for (int64_t r = 0; r < t.B * t.Hq * t.Sq; ++r) {
    const int64_t b = r / (t.Hq * t.Sq), i = r % t.Sq;
    for (int64_t j = 0; j < t.Skv; ++j) {
      bool keep;
      if (lens || ends) {
        keep = j < m.integer(b) && (!ends || j >= m.integer(t.B + b));
      } else {
        keep = m.real(raw2 ? b * t.Skv + j : (b * t.Sq + i) * t.Skv + j) != 0;
      }
      if (!keep) t.bias[static_cast<size_t>(r * t.Skv + j)] += filter;
    }
  }
  return Ok{};
}

Status ms_multi_head_attention(KernelArgs& a) {
  const HostTensor& qt = *a.in[0];
  Attn t;
  const int64_t N = a.attr_i("num_heads", 0);
  if (N <= 0) return a.fail("num_heads must be positive");
  if (a.has(6) || a.has(7)) return a.fail("past_key/past_value are not supported");
  const HostTensor* bias = a.has(3) ? a.in[3] : nullptr;
  const Reals q(qt);
  t.B = qt.shape[0], t.Sq = qt.shape[1], t.Hq = t.Hkv = N;
  if (qt.shape.size() == 5) {  // packed QKV [B, S, N, 3, H]
    if (a.has(1) || a.has(2) || qt.shape[3] != 3) return a.fail("packed QKV query must be [B, S, N, 3, H] alone");
    const int64_t H = qt.shape[4];
    t.D = t.Dv = H, t.Skv = t.Sq;
    t.q = to_bnsh(q, t.B, t.Sq, N, H, 3 * N * H, 0, bias, 0, 3 * H);
    t.k = to_bnsh(q, t.B, t.Sq, N, H, 3 * N * H, H, bias, N * H, 3 * H);
    t.v = to_bnsh(q, t.B, t.Sq, N, H, 3 * N * H, 2 * H, bias, 2 * N * H, 3 * H);
  } else {
    if (qt.shape.size() != 3 || !a.has(1)) return a.fail("query must be [B, S, N*H] with key and value");
    const HostTensor& kt = *a.in[1];
    const int64_t H = qt.shape[2] / N;
    t.D = H;
    t.q = to_bnsh(q, t.B, t.Sq, N, H, qt.shape[2], 0, bias, 0);
    const Reals k(kt);
    if (kt.shape.size() == 5) {  // packed KV [B, L, N, 2, H]
      if (a.has(2)) return a.fail("packed KV key takes no value input");
      t.Skv = kt.shape[1], t.Dv = H;
      t.k = to_bnsh(k, t.B, t.Skv, N, H, 2 * N * H, 0, bias, N * H, 2 * H);
      t.v = to_bnsh(k, t.B, t.Skv, N, H, 2 * N * H, H, bias, 2 * N * H, 2 * H);
    } else if (!a.has(2)) {
      return a.fail("value is required");
    } else if (kt.shape.size() == 4) {  // already [B, N, L, H]
      const Reals v(*a.in[2]);
      t.Skv = kt.shape[2], t.Dv = a.in[2]->shape[3];
      t.k.assign(k.p, k.p + kt.elements());
      t.v.assign(v.p, v.p + a.in[2]->elements());
    } else {
      const Reals v(*a.in[2]);
      t.Skv = kt.shape[1], t.Dv = a.in[2]->shape[2] / N;
      t.k = to_bnsh(k, t.B, t.Skv, N, H, kt.shape[2], 0, bias, N * H);
      t.v = to_bnsh(v, t.B, t.Skv, N, t.Dv, a.in[2]->shape[2], 0, bias, 2 * N * H);
    }
  }
  t.scale = a.attr_f("scale", 0.0) != 0.0 ? a.attr_f("scale", 0.0) : 1.0 / std::sqrt(static_cast<double>(t.D));
  const double filter = a.attr_f("mask_filter_value", -10000.0);
  if (a.has(4)) {
    if (auto s = ms_key_mask(a, *a.in[4], t, filter); !s) return s;
  }
  if (a.has(5)) t.add_mask(*a.in[5], false, 0.0, false);
  if (a.attr_i("unidirectional", 0) != 0) t.causal(0);
  t.run(false);
  HostTensor& y = *a.out[0];
  y.allocate();
  from_bnsh(t.y, t.B, N, t.Sq, t.Dv, y);
  for (size_t o = 1; o < a.out.size() && o < 3; ++o) {  // present key / value, [B, N, L, H]
    const std::vector<double>& kv = o == 1 ? t.k : t.v;
    if (!a.out[o]) continue;
    if (a.out[o]->elements() != static_cast<int64_t>(kv.size())) return a.fail("present outputs of unexpected shape");
    store(a.out[o], kv);
  }
  return Ok{};
}

Status ms_attention(KernelArgs& a) {
  const HostTensor &xt = *a.in[0], &wt = *a.in[1];
  const int64_t N = a.attr_i("num_heads", 0);
  if (N <= 0) return a.fail("num_heads must be positive");
  if (a.attr_i("do_rotary", 0) != 0) return a.fail("do_rotary is not supported");
  if (a.has(4)) return a.fail("past state is not supported");
  if (a.out.size() > 1 && a.out[1]) return a.fail("the present output is not supported");
  const int64_t B = xt.shape[0], S = xt.shape[1], Hin = xt.shape[2], W = wt.shape[1];
  std::vector<int64_t> sz = a.attr_ints("qkv_hidden_sizes");
  if (sz.empty()) sz = {W / 3, W / 3, W / 3};
  if (sz.size() != 3 || sz[0] + sz[1] + sz[2] != W || sz[0] != sz[1] || sz[0] % N || sz[2] % N) {
    return a.fail("qkv_hidden_sizes do not fit the weights and num_heads");
  }
  // Projection: [B*S, Hin] x [Hin, W] (+ bias).
  const Reals x(xt), w(wt);
  std::vector<double> proj(static_cast<size_t>(B * S * W), 0.0);
  for (int64_t r = 0; r < B * S; ++r) {
    double* pr = &proj[static_cast<size_t>(r * W)];
    if (a.has(2)) {
      for (int64_t c = 0; c < W; ++c) pr[c] = a.in[2]->real(c);
    }
    for (int64_t kk = 0; kk < Hin; ++kk) {
      const double xv = x[r * Hin + kk];
      for (int64_t c = 0; c < W; ++c) pr[c] += xv * w[kk * W + c];
    }
  }
  HostTensor pt;
  pt.dtype = DType::kFloat64;
  pt.r = std::move(proj);
  const Reals p(pt);
  Attn t;
  t.B = B, t.Sq = t.Skv = S, t.Hq = t.Hkv = N, t.D = sz[0] / N, t.Dv = sz[2] / N;
  t.q = to_bnsh(p, B, S, N, t.D, W, 0);
  t.k = to_bnsh(p, B, S, N, t.D, W, sz[0]);
  t.v = to_bnsh(p, B, S, N, t.Dv, W, sz[0] + sz[1]);
  t.scale = a.attr_f("scale", 0.0) != 0.0 ? a.attr_f("scale", 0.0) : 1.0 / std::sqrt(static_cast<double>(t.D));
  if (a.has(3)) {
    if (auto s = ms_key_mask(a, *a.in[3], t, a.attr_f("mask_filter_value", -10000.0)); !s) return s;
  }
  if (a.has(5)) t.add_mask(*a.in[5], false, 0.0, false);
  if (a.attr_i("unidirectional", 0) != 0) t.causal(0);
  t.run(false);
  HostTensor& y = *a.out[0];
  y.allocate();
  from_bnsh(t.y, B, N, S, t.Dv, y);
  return Ok{};
}

}  // namespace

void register_gemm_conv(std::map<std::string, Kernel>& k) {
  k["Conv"] = conv;
  k["ConvInteger"] = conv;
  k["QLinearConv"] = conv;
  k["ConvTranspose"] = conv;
  k["MatMul"] = matmul;
  k["MatMulInteger"] = matmul;
  k["Gemm"] = gemm;
  k["Einsum"] = einsum;
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) k[op] = pool;
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) k[op] = global_pool;
  k["Attention"] = onnx_attention;
  k["com.microsoft:MultiHeadAttention"] = ms_multi_head_attention;
  k["com.microsoft:Attention"] = ms_attention;
}

}  // namespace gpusim::cpu
