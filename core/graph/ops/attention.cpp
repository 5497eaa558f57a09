// Fused attention ops: softmax(Q K^T * scale + mask) V in one kernel (flash-style: the
// [q_seq, kv_seq] score matrix never reaches memory, so bytes are Q, K, V, mask in and Y out).
//   ONNX Attention (opset 23): Q [B, Hq, Sq, D] or [B, Sq, Hq*D] with q_num_heads.
//   com.microsoft MultiHeadAttention: query [B, S, N*H], key [B, L, N*H], value [B, L, N*Hv].
//   com.microsoft Attention: input [B, S, in] projected by weights [in, 3*N*H] (+ bias) first.
// MACs: B x heads x Sq x Skv x (D + Dv) for QK^T and PV (plus the projection for Attention).
// FLOPs: 2 per MAC, and per score 3 fma + 1 exp + 1 compare for the online softmax.
#include <fmt/format.h>

#include "ops/registry.h"

namespace gpusim::ops {
namespace {

// Dimensions of one attention computation, read back by the cost function from the tensors.
struct Dims {
  int64_t batch, heads, q_seq, kv_seq, head, v_head;
};

Result<Dims> onnx_attention_dims(const InferContext& c) {
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  if (q.size() == 4) {
    if (k.size() != 4 || v.size() != 4) return c.fail("Q is 4-D, so K and V must be 4-D too");
    if (k[3] != q[3]) return c.fail(fmt::format("Q head size {} != K head size {}", q[3], k[3]));
    if (q[1] % k[1] != 0) return c.fail(fmt::format("Q heads {} not a multiple of KV heads {}", q[1], k[1]));
    return Dims{q[0], q[1], q[2], k[2], q[3], v[3]};
  }
  if (q.size() != 3 || k.size() != 3 || v.size() != 3) return c.fail("Q, K, V must be all 3-D or all 4-D");
  const int64_t qh = c.attr_i("q_num_heads", 0), kvh = c.attr_i("kv_num_heads", 0);
  if (qh <= 0 || kvh <= 0 || q[2] % qh != 0 || k[2] % kvh != 0 || v[2] % kvh != 0) {
    return c.fail(fmt::format("3-D inputs need q_num_heads ({}) and kv_num_heads ({}) dividing the hidden sizes "
                              "{}, {}, {}",
                              qh, kvh, q[2], k[2], v[2]));
  }
  return Dims{q[0], qh, q[1], k[1], q[2] / qh, v[2] / kvh};
}

Status infer_onnx_attention(InferContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    if (auto s = c.need(i, i == 0 ? "Q" : (i == 1 ? "K" : "V")); !s) return s;
  }
  auto d = onnx_attention_dims(c);
  if (!d) return d.error();
  const Shape& q = c.shape(0);
  const Shape y = q.size() == 4 ? Shape{d->batch, d->heads, d->q_seq, d->v_head}
                                : Shape{d->batch, d->q_seq, d->heads * d->v_head};
  if (auto s = c.set(0, c.dtype(0), y); !s) return s;
  // present_key / present_value: past (input 4/5) concatenated with K/V; qk output: the scores.
  for (size_t i = 1; i < c.num_outputs() && i < 3; ++i) {
    const Shape& kv = c.shape(i);
    const int64_t head = i == 1 ? d->head : d->v_head;
    Shape present = kv.size() == 4 ? kv : Shape{d->batch, c.attr_i("kv_num_heads", 1), kv[1], head};
    if (c.has_input(3 + i)) present[2] += c.shape(3 + i)[2];
    if (auto s = c.set(i, c.dtype(i), present); !s) return s;
  }
  if (c.num_outputs() > 3) return c.set(3, c.dtype(0), {d->batch, d->heads, d->q_seq, d->kv_seq});
  return Ok{};
}

void add_attention_work(OpCost& cost, int64_t batch_heads, int64_t q_seq, int64_t kv_seq, int64_t head,
                        int64_t v_head) {
  const int64_t scores = batch_heads * q_seq * kv_seq;
  cost.macs += scores * (head + v_head);
  cost.flops.fma += 2 * scores * (head + v_head) + 3 * scores;
  cost.flops.transcendental += scores;
  cost.flops.compare += scores;
}

void cost_onnx_attention(const CostContext& c, OpCost& cost) {
  const Shape &q = c.in(0).shape, &k = c.in(1).shape, &y = c.out(0).shape;
  if (q.size() == 4) {
    add_attention_work(cost, q[0] * q[1], q[2], k[2], q[3], y[3]);
  } else {
    const int64_t heads = c.attr_i("q_num_heads", 1);
    add_attention_work(cost, q[0] * heads, q[1], k[1], q[2] / heads, y[2] / heads);
  }
}

Status infer_mha(InferContext& c) {
  if (auto s = c.need(0, "query"); !s) return s;
  const int64_t n = c.attr_i("num_heads", 0);
  if (n <= 0) return c.fail(fmt::format("num_heads = {} must be positive", n));
  const Shape& q = c.shape(0);
  if (q.size() == 5) {  // packed QKV [B, S, N, 3, H]
    return c.set(0, c.dtype(0), {q[0], q[1], q[2] * q[4]});
  }
  if (q.size() != 3) return c.fail(fmt::format("query {} must be [batch, seq, hidden] or packed 5-D", shape_str(q)));
  if (q[2] % n != 0) return c.fail(fmt::format("query hidden size {} is not a multiple of num_heads {}", q[2], n));
  int64_t v_hidden = q[2];
  if (c.has_input(2) && c.rank(2) == 3) v_hidden = c.shape(2)[2];
  if (c.has_input(2) && c.rank(2) == 4) v_hidden = c.shape(2)[1] * c.shape(2)[3];
  return c.set(0, c.dtype(0), {q[0], q[1], v_hidden});
}

void cost_mha(const CostContext& c, OpCost& cost) {
  const Shape& q = c.in(0).shape;
  const int64_t n = c.attr_i("num_heads", 1);
  const Shape& y = c.out(0).shape;
  if (q.size() == 5) {
    add_attention_work(cost, q[0] * q[2], q[1], q[1], q[4], q[4]);
    return;
  }
  int64_t kv_seq = q[1];
  if (c.has_input(1)) {
    const Shape& k = c.in(1).shape;
    kv_seq = k.size() == 3 ? k[1] : k[2];  // [B, L, D] or [B, N, L, H]
  }
  add_attention_work(cost, q[0] * n, q[1], kv_seq, q[2] / n, y[2] / n);
}

Status infer_ms_attention(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  if (auto s = c.need(1, "weights"); !s) return s;
  const Shape &x = c.shape(0), &w = c.shape(1);
  const int64_t n = c.attr_i("num_heads", 0);
  if (x.size() != 3 || w.size() != 2 || w[0] != x[2]) {
    return c.fail(fmt::format("input {} must be [batch, seq, hidden] and weights {} [hidden, 3 x hidden]", shape_str(x),
                              shape_str(w)));
  }
  std::vector<int64_t> sizes = c.attr_ints("qkv_hidden_sizes");
  if (sizes.empty()) sizes = {w[1] / 3, w[1] / 3, w[1] / 3};
  if (n <= 0 || sizes.size() != 3 || sizes[0] % n != 0 || sizes[2] % n != 0) {
    return c.fail(fmt::format("num_heads = {} must divide the q/v hidden sizes {}", n, shape_str(sizes)));
  }
  return c.set(0, c.dtype(0), {x[0], x[1], sizes[2]});
}

void cost_ms_attention(const CostContext& c, OpCost& cost) {
  const Shape &x = c.in(0).shape, &w = c.in(1).shape;
  const int64_t n = c.attr_i("num_heads", 1);
  const Attribute* a = c.node().attr("qkv_hidden_sizes");
  const int64_t qk = a && a->ints.size() == 3 ? a->ints[0] : w[1] / 3;
  const int64_t vh = c.out(0).shape[2];
  const int64_t proj = x[0] * x[1] * x[2] * w[1];
  cost.macs += proj;
  cost.flops.fma += 2 * proj + (c.has_input(2) ? x[0] * x[1] * w[1] : 0);
  add_attention_work(cost, x[0] * n, x[1], x[1], qk / n, vh / n);
}

}  // namespace

std::vector<OpDef> attention_ops() {
  return {
      {"Attention", "", OpClass::kAttention, infer_onnx_attention, cost_onnx_attention},
      {"MultiHeadAttention", "com.microsoft", OpClass::kAttention, infer_mha, cost_mha},
      {"Attention", "com.microsoft", OpClass::kAttention, infer_ms_attention, cost_ms_attention},
  };
}

}  // namespace gpusim::ops
