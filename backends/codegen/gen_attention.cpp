// The attention generator: the planner's 'attention' fusion — MatMul(Q, K^T) -> elementwise
// (scale, mask, ...) -> Softmax(last axis) -> MatMul(P, V), with K^T possibly made by a
// Transpose inside the group (or any operand read through a fused Transpose) — as one
// flash-attention-style kernel: the score matrix never leaves the chip.
//
// One group per (batch x heads entry, block of bq query rows). The Q block is staged in shared
// memory once; then per block of bkv keys: K and V blocks are staged, the bq x bkv scores are
// computed (dot products over the head dim) and run through the fused pre-softmax elementwise
// nodes (their other inputs — a scale constant, a mask — loaded with broadcasting at the score's
// flat index), each row's running max and sum are updated (online softmax: earlier partial sums
// and outputs are rescaled by exp(old max - new max)), and the output accumulators (registers,
// bq x Dv spread over the threads) gain P x V. At the end each output is divided by its row's sum
// and handed to the elementwise tail (nodes after the second MatMul) or stored.
//
// A decode step's few queries over a long cache (flash-decoding): split_k > 1 splits a query
// block's key blocks over that many groups. Each runs the loop above over its share and leaves its
// unnormalised outputs, row maxima and row sums in scratch; the last of them to arrive rescales
// every share to the rows' overall maximum and adds them in share order (one launch, the same
// result on every run), then divides and runs the tail as unsplit.
//
// TileConfig honoured: block_m = query rows per group, block_n = keys per step, threads, split_k;
// fitted to the problem, to 64 accumulators per thread and to the shared memory limit. stages is
// not used (one buffer per block).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "gemm_tile.h"

namespace gpusim::codegen {
namespace {


// The group node reading tensor t (by its memory), other than those already taken; -1 if none,
// -2 if several.
int sole_reader(const GenContext& c, TensorId t) {
  int found = -1;
  for (size_t p = 0; p < c.k.nodes.size(); ++p) {
    for (TensorId in : c.node(p).inputs) {
      if (in != kNoTensor && c.root(in) == c.root(t)) {
        if (found >= 0 && found != static_cast<int>(p)) return -2;
        found = static_cast<int>(p);
      }
    }
  }
  return found;
}

// The next node of the attention chain: the one group node reading `cur`, which nothing outside
// the kernel may need (it is never stored).
Result<int> chain_reader(const GenContext& c, const Node& anchor, TensorId cur) {
  if (escapes(c, cur)) {
    return c.unsupported(anchor, fmt::format("intermediate \"{}\" of the attention is needed outside the kernel",
                                             c.tensor(cur).name));
  }
  const int r = sole_reader(c, cur);
  if (r < 0) {
    return c.unsupported(anchor, fmt::format("\"{}\" must be read by exactly one node of the attention kernel",
                                             c.tensor(cur).name));
  }
  return r;
}

bool produced_in_group(const GenContext& c, TensorId t) {
  const int p = c.idx.producer[static_cast<size_t>(c.root(t))];
  return p >= 0 && std::find(c.k.nodes.begin(), c.k.nodes.end(), p) != c.k.nodes.end();
}

// Loads `rows` x `cols` of an operand block into shared array `dst` (row-major, rows x cols),
// zero outside [row_limit, cols]: element (r, e) is operand row row0 + r, column e.
std::string stage(ArgList& args, const Operand& op, const std::string& base, int64_t rs, int64_t cs, const std::string& dst,
                  int rows, int64_t cols, const std::string& row0, int64_t row_limit, int threads) {
  const bool col_fastest = !(rs == 1 && cs != 1);
  std::string s = fmt::format("    for (int e = LID_X; e < {}; e += {}) {{\n", rows * cols, threads);
  if (col_fastest) {
    s += fmt::format("      int r = e / {0}; int cc = e % {0};\n", cols);
  } else {
    s += fmt::format("      int r = e % {0}; int cc = e / {0};\n", rows);
  }
  s += fmt::format("      int gr = {} + r;\n      float val = 0.0f;\n", row0);
  s += fmt::format("      if (gr < {}) {{ int sp = {}; val = float({}); }}\n", row_limit,
                   add_term(add_term(base, "gr", rs), "cc", cs), args.load(op.tensor, operand_index(op, "sp")));
  s += fmt::format("      {}[r * {} + cc] = val;\n    }}\n", dst, cols);
  return s;
}

}  // namespace

AttentionTile fit_attention_tile(const TileConfig& tc, int64_t sq, int64_t skv, int64_t d, int64_t dv, const Options& opts) {
  AttentionTile t;
  t.d = d;
  t.dv = dv;
  if (tc.block_m > 0 && tc.block_n > 0) {
    t.bq = pow2_floor(std::min(tc.block_m, 128));
    t.bkv = pow2_floor(std::min(tc.block_n, 128));
  }
  const int max_threads = pow2_floor(std::max(1, opts.max_threads));
  t.threads = std::min(tc.threads > 0 ? pow2_floor(std::min(tc.threads, 1024)) : 128, max_threads);
  t.bq = std::min(t.bq, pow2_ceil(std::max<int64_t>(1, sq)));
  t.bkv = std::min(t.bkv, pow2_ceil(std::max<int64_t>(1, skv)));
  while (t.accumulators() > 64) {
    if (t.threads * 2 <= max_threads) {
      t.threads *= 2;
    } else if (t.bq > 1) {
      t.bq /= 2;
    } else {
      break;
    }
  }
  const auto fit_split = [&] { t.split = generated_split_k(tc.split_k, std::max<int64_t>(1, skv), t.bkv); };
  fit_split();
  while (t.shared_bytes() > opts.max_shared_bytes && (t.bq > 1 || t.bkv > 1)) {
    (t.bkv >= t.bq && t.bkv > 1 ? t.bkv : t.bq) /= 2;
    fit_split();
  }
  // No more threads than the larger of the score block and the output block has elements.
  const int64_t work = std::max<int64_t>(static_cast<int64_t>(t.bq) * t.bkv, static_cast<int64_t>(t.bq) * dv);
  t.threads = std::min(t.threads, std::max(32, pow2_ceil(work)));
  t.threads = std::min(t.threads, max_threads);
  return t;
}


Result<Kernel> gen_attention(const GenContext& c) {
  // Find the pattern: two MatMuls, one Softmax between them.
  int qk_pos = -1, pv_pos = -1, sm_pos = -1;
  for (size_t p = 0; p < c.k.nodes.size(); ++p) {
    const std::string& op = c.node(p).op_type;
    if (op == "MatMul") {
      if (qk_pos < 0) {
        qk_pos = static_cast<int>(p);
      } else if (pv_pos < 0) {
        pv_pos = static_cast<int>(p);
      } else {
        return c.unsupported(c.node(p), "an attention kernel has exactly two MatMuls");
      }
    } else if (op == "Softmax") {
      if (sm_pos >= 0) return c.unsupported(c.node(p), "an attention kernel has exactly one Softmax");
      sm_pos = static_cast<int>(p);
    }
  }
  const Node& anchor = c.anchor();
  if (qk_pos < 0 || pv_pos < 0 || sm_pos < 0) {
    return c.unsupported(anchor, "not an attention pattern: needs MatMul(Q, K^T), Softmax and MatMul(P, V)");
  }
  const Node& qk = c.node(static_cast<size_t>(qk_pos));
  const Node& sm = c.node(static_cast<size_t>(sm_pos));
  const Node& pv = c.node(static_cast<size_t>(pv_pos));
  std::vector<size_t> folded;  // positions handled here (everything but the tail after PV)

  // Q K^T -> pre-softmax elementwise chain -> Softmax.
  const TensorId st = qk.outputs[0];
  const Shape& ss = c.tensor(st).shape;
  if (ss.size() < 2) return c.unsupported(qk, "attention scores must have rank >= 2");
  // Views keep flat order, so nodes may read the scores reshaped (OPT's [B*H, S, S] as
  // [B, H, S, S] for the mask, Swin's windows): same element count and the same key axis.
  const int64_t n_scores = c.tensor(st).elements();
  auto same_rows = [&](TensorId t) {
    const Shape& s = c.tensor(t).shape;
    return c.tensor(t).elements() == n_scores && !s.empty() && s.back() == ss.back();
  };
  struct Step {
    const Node* node;
    size_t chain_input;
    Shape out;  // the node's output shape, against which its other inputs broadcast
  };
  std::vector<Step> pre;
  TensorId cur = st;
  for (;;) {
    const auto reader = chain_reader(c, anchor, cur);
    if (!reader) return reader.error();
    const int r = *reader;
    const Node& n = c.node(static_cast<size_t>(r));
    folded.push_back(static_cast<size_t>(r));
    size_t which = 0;
    while (which < n.inputs.size() && (n.inputs[which] == kNoTensor || c.root(n.inputs[which]) != c.root(cur))) ++which;
    if (!same_rows(n.inputs[which])) {
      return c.unsupported(n, fmt::format("reads the attention scores {} as {}, which moves the key axis",
                                          shape_str(ss), shape_str(c.tensor(n.inputs[which]).shape)));
    }
    if (r == sm_pos) break;
    if (op_class(n.domain, n.op_type) != OpClass::kElementwise) {
      return c.unsupported(n, "only elementwise nodes may sit between MatMul(Q, K^T) and Softmax");
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i != which && n.inputs[i] != kNoTensor && (c.root(n.inputs[i]) == c.root(cur) || produced_in_group(c, n.inputs[i]))) {
        return c.unsupported(n, fmt::format("its input \"{}\" is computed inside the attention kernel", c.tensor(n.inputs[i]).name));
      }
    }
    if (n.outputs.size() != 1 || c.tensor(n.outputs[0]).shape != c.tensor(n.inputs[which]).shape) {
      return c.unsupported(n, fmt::format("output {} does not have the shape of the scores it reads, {}",
                                          shape_str(c.tensor(n.outputs[0]).shape), shape_str(c.tensor(n.inputs[which]).shape)));
    }
    pre.push_back({&n, which, c.tensor(n.outputs[0]).shape});
    cur = n.outputs[0];
  }
  {
    const int64_t rank = static_cast<int64_t>(c.tensor(sm.inputs[0]).shape.size());
    int64_t axis = sm.attr_int("axis", c.g.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) return c.unsupported(sm, fmt::format("softmax over axis {} of {}; fused only over the last axis", axis, rank));
  }
  // Softmax -> pass-through nodes (Identity, inference Dropout, Cast to float) -> MatMul(P, V).
  cur = sm.outputs[0];
  for (;;) {
    const auto reader = chain_reader(c, anchor, cur);
    if (!reader) return reader.error();
    const int r = *reader;
    const Node& n = c.node(static_cast<size_t>(r));
    if (c.root(n.inputs[0]) != c.root(cur) || !same_rows(n.inputs[0])) {
      return c.unsupported(n, "must read the softmax probabilities as its first input, with the key axis last");
    }
    if (r == pv_pos) break;
    const bool pass = n.op_type == "Identity" || n.op_type == "Dropout" ||
                      (n.op_type == "Cast" && dtype_is_float(c.tensor(n.outputs[0]).dtype));
    if (!pass) {
      return c.unsupported(n, "between Softmax and MatMul(P, V) only Identity, Dropout (inference) and Cast to a float "
                              "type are fused (the online softmax never forms P)");
    }
    for (size_t k = 1; k < n.outputs.size(); ++k) {
      if (n.outputs[k] != kNoTensor && escapes(c, n.outputs[k])) return c.unsupported(n, "its mask output is not computed");
    }
    folded.push_back(static_cast<size_t>(r));
    cur = n.outputs[0];
  }
  folded.push_back(static_cast<size_t>(qk_pos));

  // Operands, as strided views (a fused Transpose making K^T becomes strides).
  ArgList args(c);
  auto q = resolve_operand(c, qk, qk.inputs[0], folded);
  if (!q) return q.error();
  auto kt = resolve_operand(c, qk, qk.inputs[1], folded);
  if (!kt) return kt.error();
  auto v = resolve_operand(c, pv, pv.inputs[1], folded);
  if (!v) return v.error();
  if (q->shape.size() < 2 || kt->shape.size() < 2 || v->shape.size() < 2) {
    return c.unsupported(qk, "Q, K^T and V must have rank >= 2");
  }
  const size_t rq = q->shape.size() - 2, rk = kt->shape.size() - 2, rv = v->shape.size() - 2, rs = ss.size() - 2;
  const int64_t sq = q->shape[rq], d = q->shape[rq + 1], skv = kt->shape[rk + 1], dv = v->shape[rv + 1];
  if (kt->shape[rk] != d || v->shape[rv] != skv || ss[rs] != sq || ss[rs + 1] != skv) {
    return c.unsupported(qk, fmt::format("shapes Q {}, K^T {}, V {} do not form an attention", shape_str(q->shape),
                                         shape_str(kt->shape), shape_str(v->shape)));
  }
  const Shape batch(ss.begin(), ss.begin() + static_cast<std::ptrdiff_t>(rs));
  // P may be a view of the scores with other batch dims (same rows): V broadcasts against those.
  const Shape& ps = c.tensor(pv.inputs[0]).shape;
  if (ps.size() < 2 || ps[ps.size() - 2] != sq) {
    return c.unsupported(pv, fmt::format("reads the probabilities as {}, not [..., {}, {}]", shape_str(ps), sq, skv));
  }
  const size_t rp = ps.size() - 2;
  const Shape pbatch(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(rp));
  if (rv > rp) return c.unsupported(pv, "V has more batch dims than the probabilities");
  for (size_t j = 0; j < rv; ++j) {
    if (v->shape[j] != 1 && v->shape[j] != pbatch[rp - rv + j]) {
      return c.unsupported(pv, "V's batch dims do not broadcast to the probabilities'");
    }
  }
  const TensorId ot = pv.outputs[0];
  const int64_t nb = shape_elements(batch).value_or(0);
  if (c.tensor(ot).elements() != nb * sq * dv) {
    return c.unsupported(pv, fmt::format("output {} is not [batch, {}, {}]", shape_str(c.tensor(ot).shape), sq, dv));
  }
  for (TensorId t : {q->tensor, kt->tensor, v->tensor, st, ot}) {
    if (c.tensor(t).elements() > kMaxIndex) {
      return c.unsupported(qk, fmt::format("tensor \"{}\" has {} elements, past the 32-bit indices generated kernels use",
                                           c.tensor(t).name, c.tensor(t).elements()));
    }
  }
  const AttentionTile t = fit_attention_tile(c.k.tile, sq, skv, d, dv, c.opts);
  if (t.shared_bytes() > c.opts.max_shared_bytes) {
    return c.unsupported(qk, fmt::format("head dims {} and {} need {} bytes of shared memory even with 1x1 blocks; the "
                                         "target allows {}",
                                         d, dv, t.shared_bytes(), c.opts.max_shared_bytes));
  }
  const auto sub = [](const Shape& s, size_t r) { return Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(r)); };
  const auto subst = [](const std::vector<int64_t>& s, size_t r) {
    return std::vector<int64_t>(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(r));
  };

  // The pre-softmax chain on float `s` at flat score index `si`.
  std::string chain;
  for (const Step& step : pre) {
    const Node& n = *step.node;
    std::vector<std::string> ins;
    std::vector<bool> int_in;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i == step.chain_input) {
        ins.push_back("s");
        int_in.push_back(false);
      } else if (n.inputs[i] == kNoTensor) {
        ins.emplace_back();
        int_in.push_back(false);
      } else {
        const Shape& is = c.tensor(n.inputs[i]).shape;
        if (is.size() > step.out.size()) return c.unsupported(n, "an input has more dims than the scores");
        ins.push_back(args.load(n.inputs[i], broadcast_index(step.out, is, "si")));
        int_in.push_back(args.is_int(n.inputs[i]));
      }
    }
    bool int_out = false;
    auto e = scalar_op(c, n, ins, int_in, int_out);
    if (!e) return e.error();
    if (int_out) return c.unsupported(n, "an integer-valued step cannot feed the softmax");
    chain += fmt::format("          s = {};\n", *e);
  }

  auto epi = gemm_epilogue(c, args, static_cast<size_t>(pv_pos), folded, "v", "o");
  if (!epi) return epi.error();

  const int T = t.threads, BQ = t.bq, BKV = t.bkv, NO = t.accumulators();
  const int64_t qblocks = (sq + BQ - 1) / BQ, total = nb * qblocks;
  // The key blocks, split over sk.split groups a query block (t.split: flash-decoding).
  const SplitK sk = split_k_plan(skv, BKV, t.split);
  Kernel k;
  k.name = kernel_name("attention", qk);
  k.cls = "attention";
  k.block = {static_cast<uint32_t>(T), 1, 1};
  k.groups = groups_for(std::max<int64_t>(total * sk.split, 1), 1);
  k.shared_bytes = t.shared_floats() * 4;  // add_split_scratch adds the split's flag
  k.decls = fmt::format(
      "SHARED float sQ[{}];\nSHARED float sK[{}];\nSHARED float sV[{}];\nSHARED float sS[{}];\n"
      "SHARED float sM[{}];\nSHARED float sL[{}];\nSHARED float sA[{}];\n",
      BQ * d, BKV * d, BKV * dv, BQ * BKV, BQ, BQ, BQ);
  std::string& b = k.body;
  b += fmt::format("  // attention: {} x [{} queries x {} keys], head dims {}/{}; {} queries x {} keys per step, {} threads{}\n",
                   nb, sq, skv, d, dv, BQ, BKV, T, sk.split > 1 ? fmt::format(", keys split {} ways", sk.split) : "");
  // split_k_header: the group's tile, and where split, its slice ks: key blocks from key kb, ksteps_here of them.
  b += split_k_header(sk, total, BKV);
  b += fmt::format("  int bh = tile / {};\n  int q0 = (tile % {}) * {};\n", qblocks, qblocks, BQ);
  b += fmt::format("  int q_off = {};\n", batch_offset(batch, sub(q->shape, rq), subst(q->strides, rq), "bh"));
  b += fmt::format("  int k_off = {};\n", batch_offset(batch, sub(kt->shape, rk), subst(kt->strides, rk), "bh"));
  b += fmt::format("  int v_off = {};\n", batch_offset(pbatch, sub(v->shape, rv), subst(v->strides, rv), "bh"));
  b += "  {\n" + stage(args, *q, "q_off", q->strides[rq], q->strides[rq + 1], "sQ", BQ, d, "q0", sq, T) + "  }\n";
  b += fmt::format("  for (int r = LID_X; r < {}; r += {}) {{ sM[r] = -INF_F; sL[r] = 0.0f; }}\n", BQ, T);
  b += fmt::format("  float oacc[{}];\n  for (int i = 0; i < {}; ++i) oacc[i] = 0.0f;\n", NO, NO);
  b += "  BARRIER();\n";
  if (sk.split > 1) {
    b += fmt::format("  for (int kstep = 0; kstep < ksteps_here; ++kstep) {{\n    int k0 = kb + kstep * {};\n", BKV);
  } else {
    b += fmt::format("  for (int kstep = 0; kstep < {}; ++kstep) {{\n    int k0 = kstep * {};\n", sk.ksteps, BKV);
  }
  // K^T is [d, skv]: stage its block as sK[j][dd] (key row j, head-dim column dd).
  b += stage(args, *kt, "k_off", kt->strides[rk + 1], kt->strides[rk], "sK", BKV, d, "k0", skv, T);
  b += stage(args, *v, "v_off", v->strides[rv], v->strides[rv + 1], "sV", BKV, dv, "k0", skv, T);
  b += "    BARRIER();\n";
  b += fmt::format("    for (int e = LID_X; e < {}; e += {}) {{\n", BQ * BKV, T);
  b += fmt::format("      int r = e / {0}; int j = e % {0};\n", BKV);
  b += "      int qi = q0 + r; int kj = k0 + j;\n      float s = -INF_F;\n";
  b += fmt::format("      if (qi < {} && kj < {}) {{\n", sq, skv);
  b += "        float dp = 0.0f;\n";
  b += fmt::format("        for (int dd = 0; dd < {}; ++dd) dp += sQ[r * {} + dd] * sK[j * {} + dd];\n", d, d, d);
  b += "        s = dp;\n";
  if (!chain.empty()) {
    b += fmt::format("        {{\n          int si = (bh * {} + qi) * {} + kj;\n{}        }}\n", sq, skv, chain);
  }
  b += "      }\n      sS[e] = s;\n    }\n    BARRIER();\n";
  // Online softmax, one thread per query row.
  b += fmt::format("    for (int r = LID_X; r < {}; r += {}) {{\n", BQ, T);
  b += "      float mo = sM[r]; float mb = mo;\n";
  b += fmt::format("      for (int j = 0; j < {}; ++j) mb = fmaxf(mb, sS[r * {} + j]);\n", BKV, BKV);
  b += "      float ms = mb == -INF_F ? 0.0f : mb;\n      float al = expf(mo - ms);\n      float sum = 0.0f;\n";
  b += fmt::format("      for (int j = 0; j < {}; ++j) {{ float p = expf(sS[r * {} + j] - ms); sS[r * {} + j] = p; sum += p; }}\n",
                   BKV, BKV, BKV);
  b += "      sL[r] = sL[r] * al + sum; sM[r] = mb; sA[r] = al;\n    }\n    BARRIER();\n";
  b += fmt::format("    for (int i = 0; i < {}; ++i) {{\n      int e = LID_X + i * {};\n", NO, T);
  b += fmt::format("      if (e < {}) {{\n        int r = e / {}; int dd = e % {};\n", BQ * dv, dv, dv);
  b += "        float a = oacc[i] * sA[r];\n";
  b += fmt::format("        for (int j = 0; j < {}; ++j) a += sS[r * {} + j] * sV[j * {} + dd];\n", BKV, BKV, dv);
  b += "        oacc[i] = a;\n      }\n    }\n    BARRIER();\n  }\n";
  if (sk.split > 1) {
    // Flash-decoding's combine. Slice ks of the tile leaves its unnormalised outputs, its rows'
    // maxima and sums at slab(ks) = (tile * split + ks) * BQ * (Dv + 2): outputs, then maxima,
    // then sums. The last group of the tile rescales each slice to the rows' overall maximum and
    // adds the slices in slice order (the same sum on every run).
    const int64_t slab = static_cast<int64_t>(BQ) * (dv + 2);
    const auto at = [&](const std::string& slice, const std::string& off) {
      return fmt::format("(tile * {} + {}) * {} + {}", sk.split, slice, slab, off);
    };
    b += fmt::format("  for (int i = 0; i < {}; ++i) {{\n    int e = LID_X + i * {};\n", NO, T);
    b += fmt::format("    if (e < {}) SPLIT_ST({}, oacc[i]);\n  }}\n", BQ * dv, at("ks", "e"));
    b += fmt::format("  for (int r = LID_X; r < {}; r += {}) {{\n", BQ, T);
    b += fmt::format("    SPLIT_ST({}, sM[r]);\n    SPLIT_ST({}, sL[r]);\n  }}\n", at("ks", fmt::format("{} + r", BQ * dv)),
                     at("ks", fmt::format("{} + r", BQ * dv + BQ)));
    b += split_k_arrive(sk);
    b += fmt::format("  for (int r = LID_X; r < {}; r += {}) {{\n    float mx = -INF_F;\n", BQ, T);
    b += fmt::format("    for (int sl = 0; sl < {}; ++sl) mx = fmaxf(mx, SPLIT_LD({}));\n", sk.split,
                     at("sl", fmt::format("{} + r", BQ * dv)));
    b += "    float ms = mx == -INF_F ? 0.0f : mx;\n    float l = 0.0f;\n";
    b += fmt::format("    for (int sl = 0; sl < {}; ++sl) l += SPLIT_LD({}) * expf(SPLIT_LD({}) - ms);\n", sk.split,
                     at("sl", fmt::format("{} + r", BQ * dv + BQ)), at("sl", fmt::format("{} + r", BQ * dv)));
    b += "    sA[r] = ms; sL[r] = l;\n  }\n  BARRIER();\n";
    b += fmt::format("  for (int i = 0; i < {}; ++i) {{\n    int e = LID_X + i * {};\n", NO, T);
    b += fmt::format("    if (e < {}) {{\n      int r = e / {};\n      float a = 0.0f;\n", BQ * dv, dv);
    b += fmt::format("      for (int sl = 0; sl < {}; ++sl) a += SPLIT_LD({}) * expf(SPLIT_LD({}) - sA[r]);\n", sk.split,
                     at("sl", "e"), at("sl", fmt::format("{} + r", BQ * dv)));
    b += "      oacc[i] = a;\n    }\n  }\n";
    add_split_scratch(k, total * sk.split * slab, total);
  }
  b += fmt::format("  for (int i = 0; i < {}; ++i) {{\n    int e = LID_X + i * {};\n", NO, T);
  b += fmt::format("    if (e >= {}) continue;\n", BQ * dv);
  b += fmt::format("    int r = e / {}; int dd = e % {}; int qi = q0 + r;\n", dv, dv);
  b += fmt::format("    if (qi >= {}) continue;\n", sq);
  b += fmt::format("    {{\n        int o = (bh * {} + qi) * {} + dd;\n        float v = oacc[i] / sL[r];\n{}    }}\n  }}\n", sq,
                   dv, *epi);
  k.args.insert(k.args.begin(), args.args.begin(), args.args.end());  // the kernel's own first, then any scratch
  return k;
}

}  // namespace gpusim::codegen
