// The GEMM generator: MatMul (numpy batching and broadcasting, 1-D operands), Gemm (transA,
// transB, alpha, beta, C broadcast to [M, N]) and two-operand Einsum as one tiled kernel (gemm_tile.h) with the group's
// fused epilogue. A Transpose fused into the kernel (transpose-into-gemm) is read through
// permuted strides instead of being materialized.
//
// Where the target has a matrix path for the operands (fp16; fp32 as TF32 or on fp32 MFMA:
// mma_operand, gemm_tile.h) the main loop runs on matrix units (gemm_mma.cpp).
// TileConfig honoured: block_m/n/k (as powers of two, fitted to the problem and the target),
// threads, stages (2 or more: double-buffered shared memory), vector_width (MatMul and Gemm
// operands whose fastest index is contiguous, with extents and strides the width divides, load
// their tiles in vectors of up to 16 bytes; others, and Einsum's, load scalars), split_k (serial
// split-K in one launch: the last group of a tile adds the slices' partial sums and runs the fused
// epilogue on the whole sum, gemm_tile.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "gemm_tile.h"
#include "graph/einsum.h"

namespace gpusim::codegen {
namespace {


// Whether t is computed inside the group (then it has no buffer the kernel could read).
bool produced_in_group(const GenContext& c, TensorId t) {
  const int p = c.idx.producer[static_cast<size_t>(c.root(t))];
  return p >= 0 && std::find(c.k.nodes.begin(), c.k.nodes.end(), p) != c.k.nodes.end();
}

// The statement setting float `var` to operand element (row, col) at batch offset `base`.
std::string load_stmt(ArgList& args, const Operand& op, const std::string& var, const std::string& base,
                      const std::string& row, int64_t rs, const std::string& col, int64_t cs) {
  const std::string pos = add_term(add_term(base, row, rs), col, cs);
  if (op.deq_scale != kNoTensor) {  // dequantize-into-gemm: (q - zero point) x scale, per tensor or per axis
    const std::string s = op.deq_dim > 0 ? fmt::format("({}p / {}) % {}", var, op.deq_inner, op.deq_dim) : "0";
    const std::string zero = op.deq_zero != kNoTensor ? fmt::format(" - float({})", args.load(op.deq_zero, s)) : "";
    return fmt::format("{{ int {0}p = {1}; {0} = (float({2}){3}) * float({4}); }}", var, pos,
                       args.load(op.tensor, var + "p"), zero, args.load(op.deq_scale, s));
  }
  if (op.remap_shape.empty()) return fmt::format("{} = float({});", var, args.load(op.tensor, pos));
  return fmt::format("int {0}p = {1}; {0} = float({2});", var, pos, args.load(op.tensor, operand_index(op, var + "p")));
}

// The gather form (OperandGather) of load_stmt's element; none (arg -1) for a dequantized operand.
OperandGather gather_of(ArgList& args, const Operand& op, const std::string& var, const std::string& base,
                        const std::string& row, int64_t rs, const std::string& col, int64_t cs) {
  if (op.deq_scale != kNoTensor) return {};
  const std::string pos = add_term(add_term(base, row, rs), col, cs);
  const int k = args.input(op.tensor);
  if (op.remap_shape.empty()) return {k, "", pos, "", args.half(k)};
  return {k, fmt::format("int {}p = {};", var, pos), operand_index(op, var + "p"), "", args.half(k)};
}

// Vector loads of a strided operand element (row, col) at batch offset `base` (whose terms have
// `batch_strides` over dims of `batch_shape`): sets *vec and *stmt (filling array `arr`) when the
// fastest index (col, or row when `row_fastest`) has unit stride and an extent `want` divides,
// and the other stride and the batch strides are multiples of it; leaves them unset otherwise
// (scalar loads). Buffers start 16-byte aligned, so such vectors are aligned.
void vector_operand(ArgList& args, const Operand& op, int want, const std::string& base,
                    const Shape& batch_shape, const std::vector<int64_t>& batch_strides, const std::string& row, int64_t rs,
                    int64_t rows, const std::string& col, int64_t cs, int64_t cols, bool row_fastest, const char* arr,
                    int* vec, std::string* stmt) {
  if (want <= 1 || !op.remap_shape.empty() || op.deq_scale != kNoTensor) return;
  const int64_t fast_stride = row_fastest ? rs : cs, other_stride = row_fastest ? cs : rs;
  const int64_t fast_extent = row_fastest ? rows : cols;
  if (fast_stride != 1 || fast_extent % want != 0 || other_stride % want != 0) return;
  for (size_t d = 0; d < batch_shape.size(); ++d) {
    if (batch_shape[d] != 1 && batch_strides[d] % want != 0) return;
  }
  *vec = want;
  *stmt = args.load_vector(op.tensor, add_term(add_term(base, row, rs), col, cs), arr, want);
}

// Einsum with two operands as a batched GEMM: every label is a batch label (both operands and
// the output), an m label (A and the output), an n label (B and the output) or a k label (summed;
// a label summed in one operand only is a k label the other operand does not move along). Labels
// of one class are flattened in output order; a label's coordinate is taken back out of the flat
// index with constant divisions. Returns the output's flat index expression (from bz, gm, gn).
Result<std::string> einsum_loop(const GenContext& c, const Node& n, ArgList& args, const Operand& a, const Operand& b,
                                GemmLoop& L) {
  const std::string raw = n.attr("equation") ? n.attr("equation")->s : "";
  const EinsumEquation eq = parse_einsum_equation(raw);
  if (eq.inputs.size() != 2) return c.unsupported(n, fmt::format("Einsum \"{}\" has {} operands; only two-operand contractions run as a GEMM", raw, eq.inputs.size()));
  const Operand* ops[2] = {&a, &b};
  auto lab = einsum_labels(eq, {ops[0]->shape, ops[1]->shape});
  if (!lab) return c.unsupported(n, lab.error().message);
  const std::vector<std::vector<int>>& labels = lab->inputs;
  const size_t nl = lab->count();
  std::vector<int64_t> size(nl, 1);
  std::vector<int> in_op(nl, 0);  // bit i: operand i has the label
  for (size_t i = 0; i < 2; ++i) {
    const Shape& sh = ops[i]->shape;
    for (size_t d = 0; d < sh.size(); ++d) {
      const auto l = static_cast<size_t>(labels[i][d]);
      if (in_op[l] & (1 << i)) return c.unsupported(n, fmt::format("Einsum \"{}\" repeats a label in one operand (a diagonal)", raw));
      if (in_op[l] && size[l] != sh[d] && size[l] != 1 && sh[d] != 1) return c.unsupported(n, "Einsum index sizes disagree");
      if (!in_op[l] || size[l] == 1) size[l] = sh[d];
      in_op[l] |= 1 << i;
    }
  }
  const std::vector<int>& out = lab->output;
  std::vector<bool> in_out(nl, false);
  for (int l : out) {
    if (in_out[static_cast<size_t>(l)] || !in_op[static_cast<size_t>(l)]) {
      return c.unsupported(n, fmt::format("Einsum \"{}\": an output label is repeated or in no operand", raw));
    }
    in_out[static_cast<size_t>(l)] = true;
  }
  // The classes, flattened in output order (k: in A's order, then B's).
  enum { kBatch, kM, kN, kK };
  std::vector<int> cls(nl, -1);
  std::vector<int> members[4];
  for (int l : out) {
    const int m = in_op[static_cast<size_t>(l)];
    cls[static_cast<size_t>(l)] = m == 3 ? kBatch : (m == 1 ? kM : kN);
    members[cls[static_cast<size_t>(l)]].push_back(l);
  }
  for (size_t i = 0; i < 2; ++i) {
    for (int l : labels[i]) {
      if (cls[static_cast<size_t>(l)] < 0) {
        cls[static_cast<size_t>(l)] = kK;
        members[kK].push_back(l);
      }
    }
  }
  Shape dims[4];
  int64_t extent[4];
  for (int k = 0; k < 4; ++k) {
    extent[k] = 1;
    for (int l : members[k]) {
      dims[k].push_back(size[static_cast<size_t>(l)]);
      extent[k] *= size[static_cast<size_t>(l)];
    }
  }
  L.batch = extent[kBatch];
  L.m = extent[kM];
  L.n = extent[kN];
  L.k = extent[kK];
  const Shape& ys = c.tensor(n.outputs[0]).shape;
  if (L.batch * L.m * L.n != c.tensor(n.outputs[0]).elements() || ys.size() != out.size()) {
    return c.unsupported(n, fmt::format("output {} does not match Einsum \"{}\"", shape_str(ys), raw));
  }
  const char* var[4] = {"bz", "gm", "gn", "gk"};
  // The coordinate of label l from its class's flat index variable.
  auto coord_of = [&](int l) {
    const int k = cls[static_cast<size_t>(l)];
    const auto it = std::find(members[k].begin(), members[k].end(), l);
    return coord(dims[k], static_cast<size_t>(it - members[k].begin()), var[k]);
  };
  std::string pos[2];
  int64_t inner_stride[2][4];  // per operand: the stride of its class's innermost label
  for (size_t i = 0; i < 2; ++i) {
    for (auto& s : inner_stride[i]) s = -1;
    const Shape& sh = ops[i]->shape;
    for (size_t d = 0; d < sh.size(); ++d) {
      const int l = labels[i][d];
      const int64_t st = sh[d] == 1 && size[static_cast<size_t>(l)] != 1 ? 0 : ops[i]->strides[d];
      pos[i] = add_term(pos[i], coord_of(l), st);
      const int k = cls[static_cast<size_t>(l)];
      if (members[k].back() == l) inner_stride[i][k] = st;
    }
    if (pos[i].empty()) pos[i] = "0";
  }
  auto load = [&](size_t i, const char* v) {
    if (ops[i]->remap_shape.empty()) return fmt::format("{} = float({});", v, args.load(ops[i]->tensor, pos[i]));
    return fmt::format("int {0}p = {1}; {0} = float({2});", v, pos[i],
                       args.load(ops[i]->tensor, operand_index(*ops[i], std::string(v) + "p")));
  };
  auto gather = [&](size_t i, const char* v) -> OperandGather {
    const int k = args.input(ops[i]->tensor);
    if (ops[i]->remap_shape.empty()) return {k, "", pos[i], "", args.half(k)};
    return {k, fmt::format("int {}p = {};", v, pos[i]), operand_index(*ops[i], std::string(v) + "p"), "", args.half(k)};
  };
  L.load_a = load(0, "av");
  L.load_b = load(1, "bv");
  L.a_gather = gather(0, "av");
  L.b_gather = gather(1, "bv");
  L.a_m_fastest = inner_stride[0][kM] == 1 && inner_stride[0][kK] != 1;
  L.b_n_fastest = !(inner_stride[1][kK] == 1 && inner_stride[1][kN] != 1);
  const auto ost = strides_of(ys);
  std::string o;
  for (size_t d = 0; d < out.size(); ++d) {
    if (ys[d] != size[static_cast<size_t>(out[d])]) return c.unsupported(n, "output dims do not match the labels' sizes");
    o = add_term(o, coord_of(out[d]), ost[d]);
  }
  return o.empty() ? std::string("0") : o;
}

// MatMulNBits (com.microsoft) as a GEMM whose B is dequantized as it is loaded: A [..., K] (rows
// = the rest) by B' [N, K], where row n's block b (block_size values of `bits`, packed from the low
// bits of each byte up) is (q - zero point) x scales[n x blocks + b]. The zero point is
// 2^(bits - 1) without input 3, else read as the reference reads it (cpu/kernels_quantization.cpp):
// packed bytes when uint8, one value a block otherwise. So Q4_0 (4 bits, blocks of 32, zero
// point 8) and Q8_0 (8 bits, zero point 128 over uint8) are this loop with their arithmetic; the
// bytes sit in ONNX Runtime's layout (scales apart from the packed values), not GGUF's interleaved
// blocks. Each element of B costs a byte load, a shift, a mask and a multiply-add, in every
// main loop (GEMV-shaped, SIMT tiles, matrix units). Returns the output's flat index; sets *value
// when a bias (input 5) is added.
Result<std::string> nbits_loop(const GenContext& c, const Node& n, ArgList& args, const Operand& a, GemmLoop& L,
                               std::string* value) {
  const int64_t K = n.attr("K") ? n.attr("K")->i : 0, N = n.attr("N") ? n.attr("N")->i : 0;
  const int64_t bits = n.attr("bits") ? n.attr("bits")->i : 4, bs = n.attr("block_size") ? n.attr("block_size")->i : 0;
  if (bits != 2 && bits != 4 && bits != 8) {
    return c.unsupported(n, fmt::format("bits = {}: generated kernels unpack 2, 4 or 8 bits (whole values a byte)", bits));
  }
  if (n.inputs.size() > 4 && n.inputs[4] != kNoTensor) return c.unsupported(n, "g_idx (act-order) is not generated");
  if (n.inputs.size() < 3 || n.inputs[2] == kNoTensor) return c.unsupported(n, "needs its scales");
  if (!a.remap_shape.empty() || a.shape.empty() || a.shape.back() != K || a.strides != strides_of(a.shape)) {
    return c.unsupported(n, fmt::format("A {} is not a contiguous [..., K = {}] tensor", shape_str(a.shape), K));
  }
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8, mask = (int64_t{1} << bits) - 1;
  const TensorId bt = n.inputs[1], st = n.inputs[2];
  if (c.tensor(bt).dtype != DType::kUInt8 || c.tensor(bt).elements() != N * blocks * blob) {
    return c.unsupported(n, "B is not N x blocks x block_size x bits / 8 bytes");
  }
  L.batch = 1;
  L.k = K;
  L.n = N;
  L.m = c.tensor(a.tensor).elements() / K;
  L.load_a = fmt::format("av = float({});", args.load(a.tensor, fmt::format("gm * {} + gk", K)));
  const int ka = args.input(a.tensor);
  L.a_gather = {ka, "", fmt::format("gm * {} + gk", K), "", args.half(ka)};
  std::string zero = float_lit(static_cast<double>(int64_t{1} << (bits - 1)));
  if (n.inputs.size() > 3 && n.inputs[3] != kNoTensor) {
    const TensorId zt = n.inputs[3];
    if (c.tensor(zt).dtype == DType::kUInt8) {
      const int64_t zrow = (blocks * bits + 7) / 8;
      zero = fmt::format("float(({} >> ((blk_q * {}) & 7)) & {})",
                         args.load(zt, fmt::format("gn * {} + ((blk_q * {}) >> 3)", zrow, bits)), bits, mask);
    } else {
      zero = fmt::format("float({})", args.load(zt, fmt::format("gn * {} + blk_q", blocks)));
    }
  }
  L.load_b = fmt::format(
      "{{ int blk_q = gk / {0}; int bit_q = (gk % {0}) * {1}; "
      "int q_q = ({2} >> (bit_q & 7)) & {3}; bv = (float(q_q) - {4}) * float({5}); }}",
      bs, bits, args.load(bt, fmt::format("(gn * {} + blk_q) * {} + (bit_q >> 3)", blocks, blob)), mask, zero,
      args.load(st, fmt::format("gn * {} + blk_q", blocks)));
  L.a_m_fastest = false;
  L.b_n_fastest = false;  // a row of B' is contiguous along k
  // Vector loads: one 32-bit word of packed values (8 of 4 bits, 4 of 8) a load, with the block's
  // scale and zero point read once for them, where K is whole words of whole blocks; A alongside
  // in a vector of the same width where that is at most 16 bytes.
  const int vec = static_cast<int>(32 / bits);
  if (K % bs == 0 && bs % vec == 0) {
    L.b_vec = vec;
    L.load_b_vec = fmt::format(
        "{{ int blk_q = gk / {0}; uint w_q = {1}; float z_q = {2}; float s_q = float({3}); "
        "for (int v = 0; v < {4}; ++v) bv_v[v] = (float((w_q >> (v * {5})) & {6}u) - z_q) * s_q; }}",
        bs, args.load_word(bt, fmt::format("(gn * {} + blk_q) * {} + (((gk % {}) * {}) >> 3)", blocks, blob, bs, bits)),
        zero, args.load(st, fmt::format("gn * {} + blk_q", blocks)), vec, bits, mask);
    if (vec * storage_bytes(storage_of(c.tensor(a.tensor).dtype, c.opts)) <= 16) {
      L.a_vec = vec;
      L.load_a_vec = args.load_vector(a.tensor, fmt::format("gm * {} + gk", K), "av_v", vec);
    }
  }
  if (n.inputs.size() > 5 && n.inputs[5] != kNoTensor) *value = fmt::format("acc_v + float({})", args.load(n.inputs[5], "gn"));
  return fmt::format("gm * {} + gn", N);
}

}  // namespace

Result<Kernel> gen_gemm(const GenContext& c) {
  const Node& n = c.anchor();
  const auto anchor_pos = static_cast<size_t>(c.k.anchor);
  if (n.op_type != "MatMul" && n.op_type != "Gemm" && n.op_type != "Einsum" && n.op_type != "MatMulNBits") {
    return c.unsupported(n, "the GEMM generator covers MatMul, Gemm, two-operand Einsum and MatMulNBits only");
  }
  if (n.inputs.size() < 2 || n.inputs[0] == kNoTensor || n.inputs[1] == kNoTensor || n.outputs.empty()) {
    return c.unsupported(n, "needs two inputs and an output");
  }
  const TensorId yt = n.outputs[0];
  const Shape& ys = c.tensor(yt).shape;
  for (TensorId t : {n.inputs[0], n.inputs[1], yt}) {
    if (c.tensor(t).elements() > kMaxIndex) {
      return c.unsupported(n, fmt::format("tensor \"{}\" has {} elements, past the 32-bit indices generated kernels use",
                                          c.tensor(t).name, c.tensor(t).elements()));
    }
  }
  ArgList args(c);
  std::vector<size_t> folded;
  // MatMul and Gemm read a folded DequantizeLinear's quantized values (dequantize-into-gemm).
  const bool dequant = n.op_type == "MatMul" || n.op_type == "Gemm";
  auto a = resolve_operand(c, n, n.inputs[0], folded, dequant);
  if (!a) return a.error();
  auto b = resolve_operand(c, n, n.inputs[1], folded, dequant);
  if (!b) return b.error();
  Shape as = a->shape, bs = b->shape;
  std::vector<int64_t> ast = a->strides, bst = b->strides;

  GemmLoop L;
  // The tile's vector width, per operand storage (Einsum operands load scalars).
  const int vec_a = gemm_vector_width(c.k.tile, storage_of(c.tensor(a->tensor).dtype, c.opts));
  const int vec_b = gemm_vector_width(c.k.tile, storage_of(c.tensor(b->tensor).dtype, c.opts));
  std::string value = "acc_v";  // the anchor's output value, from the accumulator
  std::string out_index;        // flat index into the output, from bz, gm, gn
  if (n.op_type == "Einsum") {
    if (n.inputs.size() != 2) return c.unsupported(n, "only two-operand Einsum runs as a GEMM");
    auto o = einsum_loop(c, n, args, *a, *b, L);
    if (!o) return o.error();
    out_index = *o;
  } else if (n.op_type == "MatMul") {
    if (as.empty() || bs.empty()) return c.unsupported(n, "MatMul operands must have rank >= 1");
    if (as.size() == 1) {
      as.insert(as.begin(), 1);
      ast.insert(ast.begin(), 0);
    }
    if (bs.size() == 1) {
      bs.push_back(1);
      bst.push_back(0);
    }
    const size_t ra = as.size() - 2, rb = bs.size() - 2, r = std::max(ra, rb);
    L.m = as[ra];
    L.k = as[ra + 1];
    L.n = bs[rb + 1];
    if (bs[rb] != L.k) {
      return c.unsupported(n, fmt::format("inner dimensions differ ({} vs {})", shape_str(a->shape), shape_str(b->shape)));
    }
    Shape batch(r, 1);
    for (size_t j = 0; j < r; ++j) {
      const int64_t da = j + ra >= r ? as[j + ra - r] : 1, db = j + rb >= r ? bs[j + rb - r] : 1;
      if (da != db && da != 1 && db != 1) return c.unsupported(n, "batch dimensions do not broadcast");
      batch[j] = std::max(da, db);
    }
    L.batch = shape_elements(batch).value_or(0);
    if (L.batch * L.m * L.n != c.tensor(yt).elements()) {
      return c.unsupported(n, fmt::format("output {} does not match the operands", shape_str(ys)));
    }
    if (rb == 0 && L.batch > 1) {
      // One B for every batch: A's batch dims and its rows are one M when they are laid out as one
      // (each stride the next dim's extent times its stride, size-1 dims aside), so the kernel is
      // one GEMM of batch x m rows, as the cost model prices it, not `batch` GEMMs of m rows each
      // reading all of B (ViT's [197, 1, 768] attention input: 197 GEMMs of one row).
      std::vector<std::pair<int64_t, int64_t>> dims;  // extent, stride
      for (size_t j = 0; j <= ra; ++j) {
        if (as[j] != 1) dims.emplace_back(as[j], ast[j]);
      }
      bool one = true;
      for (size_t j = 0; j + 1 < dims.size(); ++j) one = one && dims[j].second == dims[j + 1].first * dims[j + 1].second;
      if (one) {
        ast[ra] = dims.empty() ? ast[ra] : dims.back().second;
        as[ra] = L.batch * L.m;
        for (size_t j = 0; j < ra; ++j) {
          as[j] = 1;
          ast[j] = 0;
        }
        L.m = as[ra];
        L.batch = 1;
        std::fill(batch.begin(), batch.end(), 1);
      }
    }
    const Shape ab(as.begin(), as.begin() + static_cast<std::ptrdiff_t>(ra));
    const Shape bb(bs.begin(), bs.begin() + static_cast<std::ptrdiff_t>(rb));
    L.setup = fmt::format("  int a_off = {};\n  int b_off = {};\n", batch_offset(batch, ab, ast, "bz"),
                          batch_offset(batch, bb, bst, "bz"));
    L.load_a = load_stmt(args, *a, "av", "a_off", "gm", ast[ra], "gk", ast[ra + 1]);
    L.load_b = load_stmt(args, *b, "bv", "b_off", "gk", bst[rb], "gn", bst[rb + 1]);
    L.a_gather = gather_of(args, *a, "av", "a_off", "gm", ast[ra], "gk", ast[ra + 1]);
    L.b_gather = gather_of(args, *b, "bv", "b_off", "gk", bst[rb], "gn", bst[rb + 1]);
    L.a_m_fastest = ast[ra + 1] != 1 && ast[ra] == 1;
    L.b_n_fastest = !(bst[rb + 1] != 1 && bst[rb] == 1);
    const std::vector<int64_t> abst(ast.begin(), ast.begin() + static_cast<std::ptrdiff_t>(ra));
    const std::vector<int64_t> bbst(bst.begin(), bst.begin() + static_cast<std::ptrdiff_t>(rb));
    vector_operand(args, *a, vec_a, "a_off", ab, abst, "gm", ast[ra], L.m, "gk", ast[ra + 1], L.k, L.a_m_fastest, "av_v",
                   &L.a_vec, &L.load_a_vec);
    vector_operand(args, *b, vec_b, "b_off", bb, bbst, "gk", bst[rb], L.k, "gn", bst[rb + 1], L.n, !L.b_n_fastest, "bv_v",
                   &L.b_vec, &L.load_b_vec);
    out_index = fmt::format("(bz * {} + gm) * {} + gn", L.m, L.n);
  } else if (n.op_type == "MatMulNBits") {
    auto o = nbits_loop(c, n, args, *a, L, &value);
    if (!o) return o.error();
    out_index = *o;
  } else {  // Gemm
    if (as.size() != 2 || bs.size() != 2) return c.unsupported(n, "Gemm needs 2-D A and B");
    const bool ta = n.attr("transA") && n.attr("transA")->i != 0;
    const bool tb = n.attr("transB") && n.attr("transB")->i != 0;
    const double alpha = n.attr("alpha") ? n.attr("alpha")->f : 1.0;
    const double beta = n.attr("beta") ? n.attr("beta")->f : 1.0;
    L.m = ta ? as[1] : as[0];
    L.k = ta ? as[0] : as[1];
    L.n = tb ? bs[0] : bs[1];
    if ((tb ? bs[1] : bs[0]) != L.k) {
      return c.unsupported(n, fmt::format("inner dimensions differ ({} vs {})", shape_str(as), shape_str(bs)));
    }
    if (L.m * L.n != c.tensor(yt).elements()) return c.unsupported(n, "output does not match [M, N]");
    const int64_t ars = ta ? ast[1] : ast[0], acs = ta ? ast[0] : ast[1];
    const int64_t brs = tb ? bst[1] : bst[0], bcs = tb ? bst[0] : bst[1];
    L.load_a = load_stmt(args, *a, "av", "", "gm", ars, "gk", acs);
    L.load_b = load_stmt(args, *b, "bv", "", "gk", brs, "gn", bcs);
    L.a_gather = gather_of(args, *a, "av", "", "gm", ars, "gk", acs);
    L.b_gather = gather_of(args, *b, "bv", "", "gk", brs, "gn", bcs);
    L.a_m_fastest = acs != 1 && ars == 1;
    L.b_n_fastest = !(bcs != 1 && brs == 1);
    vector_operand(args, *a, vec_a, "", {}, {}, "gm", ars, L.m, "gk", acs, L.k, L.a_m_fastest, "av_v", &L.a_vec,
                   &L.load_a_vec);
    vector_operand(args, *b, vec_b, "", {}, {}, "gk", brs, L.k, "gn", bcs, L.n, !L.b_n_fastest, "bv_v", &L.b_vec,
                   &L.load_b_vec);
    out_index = fmt::format("gm * {} + gn", L.n);
    if (alpha != 1.0) value = fmt::format("{} * acc_v", float_lit(alpha));
    if (n.inputs.size() > 2 && n.inputs[2] != kNoTensor && beta != 0.0) {
      const TensorId ct = n.inputs[2];
      const Shape& cs = c.tensor(ct).shape;
      if (produced_in_group(c, ct)) return c.unsupported(n, "its C input is computed inside the same kernel");
      if (cs.size() > 2 || (cs.size() == 2 && cs[0] != 1 && cs[0] != L.m) || (!cs.empty() && cs.back() != 1 && cs.back() != L.n)) {
        return c.unsupported(n, fmt::format("C {} does not broadcast to [{}, {}]", shape_str(cs), L.m, L.n));
      }
      const std::string ci = broadcast_index({L.m, L.n}, cs, "o");
      const std::string cv = "float(" + args.load(ct, ci) + ")";
      value += " + " + (beta == 1.0 ? cv : float_lit(beta) + " * " + cv);
    }
  }
  auto epi = gemm_epilogue(c, args, anchor_pos, folded, "v", "o");
  if (!epi) return epi.error();
  // `o` first: the C term of Gemm indexes by it.
  L.epilogue = fmt::format("        int o = {};\n        float v = {};\n{}", out_index, value, *epi);

  Kernel k;
  k.name = kernel_name("gemm", n);
  k.cls = "gemm";
  emit_gemm_kernel(L, c.k.tile, c.opts, k);
  k.args.insert(k.args.begin(), args.args.begin(), args.args.end());  // the kernel's own first, then any scratch
  return k;
}

}  // namespace gpusim::codegen
