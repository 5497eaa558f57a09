// Reductions and normalizations: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
// Layer/Group/Instance/LpNormalization, MeanVarianceNormalization, global pools and CumSum as
// row reductions; BatchNormalization, LRN and windowed pools (gen_pool.cpp) one thread per output.
//
// A row reduction sees its input as R rows of L elements: element j of row r lives at
// base(r) + offset(j), two mixed-radix expressions over the kept and the reduced dims (adjacent
// dims of one kind merged) with the input's strides baked in. Two schemes:
//   - segments of a group per row (rows of more than a few elements): the tile's threads (a
//     power of two) take as many rows as the cost model packs into a CTA (threads x vector width
//     x items per thread over the row length, a power of two); each row's segment of threads
//     strides over it (vector_width elements a step where rows are contiguous), then a
//     shared-memory tree over the segment combines their partials; every pass is one such loop +
//     tree, so mean/variance are two passes (like the CPU reference) and softmax three. Long rows
//     get a group each.
//   - thread per row (rows of 16 elements or fewer, or rows whose reduced dims are not innermost
//     so that adjacent threads read adjacent addresses): a plain loop in groups of the tile's
//     threads, no shared memory.
// Accumulation is fp32. Outputs of normalizations go through the fused elementwise epilogue
// (norm-epilogue) when the plan kernel has one; elementwise ops before a normalization
// (norm-prologue, or ops recomputed into it) are evaluated in registers wherever its input is read,
// once per pass.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gen_rows.h"
#include "gpusim/op_catalog.h"
#include "node_attrs.h"

namespace gpusim::codegen {

// ---- shared with gen_pool.cpp / gen_data.cpp (gen_rows.h) ---------------------------------------

std::string radix(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, const std::string& v) {
  size_t first = 0;
  while (first < sizes.size() && sizes[first] == 1) ++first;
  std::vector<std::string> terms;
  int64_t inner = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (sizes[d] == 0) return "0";
    std::string q = inner == 1 ? v : fmt::format("({} / {})", v, inner);
    if (d != first) q = fmt::format("({} % {})", q, sizes[d]);
    if (strides[d] != 1) q = fmt::format("{} * {}", q, strides[d]);
    terms.insert(terms.begin(), q);
    inner *= sizes[d];
  }
  if (terms.empty()) return "0";
  if (terms.size() == 1) return "(" + terms[0] + ")";
  std::string e;
  for (const auto& t : terms) e += (e.empty() ? "" : " + ") + t;
  return "(" + e + ")";
}

Rows rows_of_mask(const Shape& s, const std::vector<bool>& red) {
  Rows r;
  const auto st = strides_of(s);
  int prev = -1;  // kind of the previous dim kept in the lists: 0 row, 1 reduced
  for (size_t d = 0; d < s.size(); ++d) {
    const bool is_red = red[d];
    if (is_red) r.len *= s[d];
    else r.rows *= s[d];
    if (s[d] == 1) continue;
    auto& sz = is_red ? r.lsz : r.rsz;
    auto& sd = is_red ? r.lst : r.rst;
    if (prev == static_cast<int>(is_red) && !sz.empty()) {
      sz.back() *= s[d];
      sd.back() = st[d];
    } else {
      sz.push_back(s[d]);
      sd.push_back(st[d]);
    }
    prev = static_cast<int>(is_red);
  }
  if (r.rows == 0) {
    r.rsz.clear();
    r.rst.clear();
  }
  if (r.len == 0) {
    r.lsz.clear();
    r.lst.clear();
  }
  return r;
}

Rows rows_split(int64_t outer, int64_t len, int64_t inner) {
  return rows_of_mask({outer, len, inner}, {false, true, false});
}

Result<std::string> store_main(const GenContext& c, ArgList& args, const std::string& value, const std::string& index) {
  const Node& n = c.anchor();
  const TensorId out = n.outputs.at(0);
  if (c.k.nodes.size() == 1) return "      " + args.store(out, index, value) + "\n";
  const bool is_int = !dtype_is_float(c.tensor(out).dtype);
  auto tail = elementwise_tail(c, args, c.k.anchor, "yv", "yo", c.tensor(out).shape);
  if (!tail) return tail.error();
  return fmt::format("      {{\n      {} yv = {};\n      int yo = {};\n{}      }}\n", is_int ? "int" : "float", value,
                     index, *tail);
}

Result<std::string> input_value(const GenContext& c, ArgList& args, const std::string& index, const std::string& var,
                                const std::string& indent) {
  const Node& a = c.anchor();
  const TensorId x = a.inputs.at(0);
  if (c.k.anchor == 0) return fmt::format("{}float {} = float({});\n", indent, var, args.load(x, index));
  // norm-prologue: the elementwise ops before the anchor, computed at `index` in registers. Their
  // outputs are stored (where needed outside the kernel) by the elementwise tail in store_main,
  // which recomputes them once per element.
  const int64_t n_space = c.tensor(x).elements();
  std::map<TensorId, std::pair<std::string, bool>> vals;  // root -> (variable, is int)
  std::string code;
  for (size_t pos = 0; pos < static_cast<size_t>(c.k.anchor); ++pos) {
    const Node& n = c.node(pos);
    if (op_class(n.domain, n.op_type) != OpClass::kElementwise) {
      return c.unsupported(n, fmt::format("fused before a {} but not elementwise; only elementwise ops fuse there", a.op_type));
    }
    if (n.outputs.empty() || n.outputs[0] == kNoTensor) return c.unsupported(n, "no output");
    const Tensor& ot = c.tensor(n.outputs[0]);
    if (ot.elements() != n_space) {
      return c.unsupported(n, fmt::format("output {} has {} elements, the {}'s input {}; broadcasting inside a fused "
                                          "prologue runs unfused",
                                          shape_str(ot.shape), ot.elements(), a.op_type, n_space));
    }
    std::vector<std::string> ins;
    std::vector<bool> ints;
    for (TensorId t : n.inputs) {
      if (t == kNoTensor) {
        ins.emplace_back();
        ints.push_back(false);
      } else if (auto it = vals.find(c.root(t)); it != vals.end()) {
        ins.push_back(it->second.first);
        ints.push_back(it->second.second);
      } else {
        ins.push_back(args.load(t, broadcast_index(ot.shape, c.tensor(t).shape, index)));
        ints.push_back(args.is_int(t));
      }
    }
    bool int_out = false;
    auto e = scalar_op(c, n, ins, ints, int_out);
    if (!e) return e.error();
    const std::string v = fmt::format("{}_p{}", var, pos);
    code += fmt::format("{}{} {} = {};\n", indent, int_out ? "int" : "float", v, *e);
    vals[c.root(n.outputs[0])] = {v, int_out};
  }
  for (size_t k = 1; k < a.inputs.size(); ++k) {
    if (a.inputs[k] != kNoTensor && vals.count(c.root(a.inputs[k]))) {
      return c.unsupported(a, fmt::format("input {} is computed by a fused op; only the first input can be", k));
    }
  }
  const auto it = vals.find(c.root(x));
  if (it == vals.end()) return c.unsupported(a, "the ops fused before it do not compute its input");
  return code + fmt::format("{}float {} = float({});\n", indent, var, it->second.first);
}

uint32_t pow2_at_most(int v) {
  uint32_t b = 1;
  while (b * 2 <= static_cast<uint32_t>(std::max(v, 1))) b *= 2;
  return b;
}

std::string per_element_start(int64_t n, const std::string& var) {
  return fmt::format("  int {} = {} * BLOCK_X + LID_X;\n  if ({} >= {}) return;\n", var, kLinearGroup, var, n);
}

std::string short_name(const GenContext& c, const char* prefix) {
  return fmt::format("{}_{}", prefix, c.k.nodes[static_cast<size_t>(c.k.anchor)]);
}

namespace {
constexpr const char* kCombineFns =
    "FN float rd_add(float a, float b) { return a + b; }\n"
    "FN float rd_mul(float a, float b) { return a * b; }\n"
    "FN float rd_fmax(float a, float b) { return fmaxf(a, b); }\n"
    "FN float rd_fmin(float a, float b) { return fminf(a, b); }\n"
    // Max/min that propagate NaN (ReduceMax/ReduceMin), as the reference does.
    "FN float rd_max(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : fmaxf(a, b); }\n"
    "FN float rd_min(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : fminf(a, b); }\n";
}  // namespace

// ---- the row emitter -------------------------------------------------------------------------

RowEmitter::RowEmitter(const GenContext& c, const Rows& r) : c_(c), rows_(r) {
  const uint32_t cap = pow2_at_most(std::min(c.opts.max_threads, 1024));
  const bool strided = !r.lst.empty() && r.lst.back() != 1;
  per_thread_ = r.len <= 16 || (strided && r.rows >= 2048 && r.len <= 4096);
  if (per_thread_) {  // a row a thread: groups of the tile's threads
    block_ = std::min<uint32_t>(pow2_at_most(c.k.tile.threads > 0 ? c.k.tile.threads : 128), cap);
    seg_ = 1;
  } else {
    // The tile's threads (a power of two), and as many rows per group as the cost model packs
    // into a CTA: threads x vector width x items per thread elements, over the row length,
    // rounded down to a power of two. Each row gets a segment of block_ / rows threads.
    block_ = std::min<uint32_t>(pow2_at_most(c.k.tile.threads > 0 ? c.k.tile.threads : 256), cap);
    // The tree needs 8 bytes of shared memory a thread (value and index).
    while (block_ > 1 && uint64_t{block_} * 8 > c.opts.max_shared_bytes) block_ /= 2;
    const int64_t per = int64_t{block_} * vector_lanes(c.k.tile.vector_width, r.len) *
                        std::max(1, c.k.tile.items_per_thread);
    const int64_t packed = std::clamp<int64_t>(per / std::max<int64_t>(1, r.len), 1, block_);
    seg_ = block_ / pow2_at_most(static_cast<int>(packed));
  }
}

std::string RowEmitter::start() const {
  if (per_thread_) {
    return fmt::format("  int rw = {} * BLOCK_X + LID_X;\n  if (rw >= {}) return;\n  int xb = {};\n", kLinearGroup,
                       rows_.rows, rows_.base("rw"));
  }
  if (seg_ == block_) {  // a row per group: the whole group returns together
    return fmt::format("  int rw = {};\n  if (rw >= {}) return;\n  const int lane = LID_X;\n  const bool live = true;\n"
                       "  int xb = {};\n",
                       kLinearGroup, rows_.rows, rows_.base("rw"));
  }
  // Rows packed a segment each: a segment past the last row stays for the barriers, idle.
  return fmt::format("  int rw = {} * {} + LID_X / {};\n  const int lane = LID_X % {};\n  const bool live = rw < {};\n"
                     "  int xb = {};\n",
                     kLinearGroup, block_ / seg_, seg_, seg_, rows_.rows, rows_.base("rw"));
}

std::string RowEmitter::loop(const std::string& body) const {
  if (vec_ > 1) {  // steps of vec_ contiguous elements (input_x); the lanes run the body in order
    return fmt::format("  for (int jj0 = lane * {0}; live && jj0 < {1}; jj0 += {4}) {{\n    float xv_[{0}]; {2}\n"
                       "    for (int vv = 0; vv < {0}; ++vv) {{\n    int jj = jj0 + vv;\n    int ix = xb + jj;\n{3}    }}\n  }}\n",
                       vec_, rows_.len, vec_load_, body, seg_ * vec_);
  }
  const std::string head = per_thread_ ? fmt::format("  for (int jj = 0; jj < {}; ++jj) {{\n", rows_.len)
                                       : fmt::format("  for (int jj = lane; live && jj < {}; jj += {}) {{\n", rows_.len, seg_);
  return head + fmt::format("    int ix = xb + {};\n", rows_.offset("jj")) + body + "  }\n";
}

Result<std::string> RowEmitter::input_x(ArgList& args) {
  const int w = vector_lanes(c_.k.tile.vector_width, rows_.len);
  bool ok = w > 1 && !per_thread_ && c_.k.anchor == 0 && rows_.lsz.size() == 1 && rows_.lst[0] == 1;
  for (int64_t st : rows_.rst) ok = ok && st % w == 0;
  if (!ok) return input_value(c_, args, "ix", "x", "    ");
  vec_ = w;
  vec_load_ = args.load_vector(c_.anchor().inputs.at(0), "xb + jj0", "xv_", w);
  return std::string("    float x = xv_[vv];\n");
}

std::string RowEmitter::combine(const std::string& var, const std::string& fn) {
  if (seg_ == 1) return "";
  need_f_ = true;
  return fmt::format(
      "  rd_f[LID_X] = {0};\n  BARRIER();\n"
      "  for (int s = {2} / 2; s > 0; s = s / 2) {{\n"
      "    if (lane < s) rd_f[LID_X] = {1}(rd_f[LID_X], rd_f[LID_X + s]);\n    BARRIER();\n  }}\n"
      "  {0} = rd_f[LID_X - lane];\n  BARRIER();\n",
      var, fn, seg_);
}

std::string RowEmitter::combine_arg(const std::string& v, const std::string& i) {
  if (seg_ == 1) return "";
  need_f_ = need_i_ = true;
  return fmt::format(
      "  rd_f[LID_X] = {0};\n  rd_i[LID_X] = {1};\n  BARRIER();\n"
      "  for (int s = {2} / 2; s > 0; s = s / 2) {{\n"
      "    if (lane < s && rd_beats(rd_f[LID_X], rd_i[LID_X], rd_f[LID_X + s], rd_i[LID_X + s])) {{\n"
      "      rd_f[LID_X] = rd_f[LID_X + s];\n      rd_i[LID_X] = rd_i[LID_X + s];\n    }}\n    BARRIER();\n  }}\n"
      "  {0} = rd_f[LID_X - lane];\n  {1} = rd_i[LID_X - lane];\n  BARRIER();\n",
      v, i, seg_);
}

std::string RowEmitter::once(const std::string& stmts) const {
  if (per_thread_) return stmts;
  return "  if (lane == 0 && live) {\n" + stmts + "  }\n";
}

std::string RowEmitter::pass(const std::string& var, const std::string& init, const std::string& fn,
                             const std::string& xdef, const std::string& term) {
  return fmt::format("  float {} = {};\n", var, init) +
         loop(xdef + fmt::format("    {} = {}({}, {});\n", var, fn, var, term)) + combine(var, fn);
}

void RowEmitter::finish(Kernel& k, std::string decls, std::string body) const {
  std::string shared;
  if (need_f_) shared += "SHARED float rd_f[BLOCK_X];\n";
  if (need_i_) shared += "SHARED int rd_i[BLOCK_X];\n";
  k.block = {block_, 1, 1};
  const int64_t packed = block_ / seg_;  // rows per group (1 row a thread in the per-thread scheme)
  k.groups = groups_for((rows_.rows + packed - 1) / packed * block_, block_);
  k.shared_bytes = (need_f_ ? block_ * 4 : 0) + (need_i_ ? block_ * 4 : 0);
  k.decls = shared + kCombineFns + decls;
  k.body = start() + body;
}

namespace {

// "float(LDk(idx))": every input is read as float (integer tensors included: fp32 is exact to 2^24).
std::string loadf(ArgList& args, TensorId t, const std::string& idx) { return "float(" + args.load(t, idx) + ")"; }

// The ArgMax/ArgMin/Hardmax winner test: does (vb, ib) beat (va, ia)? Index -1 is "none yet".
std::string beats_fn(bool is_max, bool last) {
  return fmt::format(
      "FN bool rd_beats(float va, int ia, float vb, int ib) {{\n"
      "  if (ib < 0) return false;\n  if (ia < 0) return true;\n"
      "  if (vb {} va) return true;\n  if (vb == va) return ib {} ia;\n  return false;\n}}\n",
      is_max ? ">" : "<", last ? ">" : "<");
}

struct Gen {
  const GenContext& c;
  const Node& n;
  ArgList args;
  Kernel k;

  Gen(const GenContext& ctx) : c(ctx), n(ctx.anchor()), args(ctx) {}  // NOLINT
  const Tensor& in(size_t i) const { return c.tensor(n.inputs[i]); }
  const Tensor& out(size_t i) const { return c.tensor(n.outputs[i]); }
  Error fail(const std::string& why) const { return c.unsupported(n, why); }
};

// ---- Reduce* -----------------------------------------------------------------------------------

// Sets mask[axis] for each (possibly negative) axis; an axis outside the rank is refused.
Status mark_axes(const Gen& g, const Shape& xs, const std::vector<int64_t>& axes, std::vector<bool>& mask) {
  for (int64_t a : axes) {
    int64_t v = a;
    if (!normalize_axis(v, xs.size()) || xs.empty()) {
      return g.fail(fmt::format("axis {} is out of range for rank {}", a, xs.size()));
    }
    mask[static_cast<size_t>(v)] = true;
  }
  return Ok{};
}

Result<Kernel> reduce(Gen& g) {
  const std::string& op = g.n.op_type;
  const Shape& xs = g.in(0).shape;
  std::vector<int64_t> axes;
  const ConstInput ax = const_input(g.c.g, g.n, 1);
  if (ax.present) {
    if (!ax.known) return g.fail("the axes input is not a constant; axes must be known to generate the kernel");
    axes = ax.ints;
  } else {
    axes = node_ints(g.n, "axes");
  }
  const bool noop = axes.empty() && node_int(g.n, "noop_with_empty_axes", 0) != 0;
  std::vector<bool> mask(xs.size(), axes.empty() && !noop);
  if (auto s = mark_axes(g, xs, axes, mask); !s) return s.error();
  const Rows r = rows_of_mask(xs, mask);
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body;
  std::string result;
  if (noop) {
    body += e.pass("acc", "0.0f", "rd_add", load, "x");  // one element per row: a copy
    result = "acc";
  } else if (op == "ReduceLogSumExp") {
    body += e.pass("pk", "(-INF_F)", "rd_fmax", load, "x");
    body += "  if (isinf(pk) || isnan(pk)) pk = 0.0f;\n";
    body += e.pass("acc", "0.0f", "rd_add", load, "expf(x - pk)");
    result = "logf(acc) + pk";
  } else {
    struct R {
      const char* op;
      const char* init;
      const char* fn;
      const char* term;
    };
    static const R table[] = {
        {"ReduceSum", "0.0f", "rd_add", "x"},         {"ReduceMean", "0.0f", "rd_add", "x"},
        {"ReduceMax", "(-INF_F)", "rd_max", "x"},     {"ReduceMin", "INF_F", "rd_min", "x"},
        {"ReduceProd", "1.0f", "rd_mul", "x"},        {"ReduceL1", "0.0f", "rd_add", "fabsf(x)"},
        {"ReduceL2", "0.0f", "rd_add", "x * x"},      {"ReduceSumSquare", "0.0f", "rd_add", "x * x"},
        {"ReduceLogSum", "0.0f", "rd_add", "x"},
    };
    const R* row = nullptr;
    for (const R& t : table) {
      if (op == t.op) row = &t;
    }
    if (!row) return g.fail("no generator for this reduction");
    body += e.pass("acc", row->init, row->fn, load, row->term);
    result = op == "ReduceMean"     ? fmt::format("acc / {}", float_lit(static_cast<double>(r.len)))
             : op == "ReduceL2"     ? "sqrtf(acc)"
             : op == "ReduceLogSum" ? "logf(acc)"
                                    : "acc";
  }
  auto st = store_main(g.c, g.args, result, "rw");
  if (!st) return st.error();
  body += e.once(*st);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

// ---- ArgMax / ArgMin ---------------------------------------------------------------------------

Result<Kernel> arg_extreme(Gen& g) {
  const Shape& xs = g.in(0).shape;
  int64_t axis = node_int(g.n, "axis", 0);
  if (!normalize_axis(axis, xs.size()) || xs.empty()) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto a = static_cast<size_t>(axis);
  const Rows r = rows_split(shape_elements(Shape(xs.begin(), xs.begin() + static_cast<long>(a))).value_or(0), xs[a],
                            shape_elements(Shape(xs.begin() + static_cast<long>(a) + 1, xs.end())).value_or(0));
  RowEmitter e(g.c, r);
  std::string body = "  float bv = 0.0f;\n  int bi = -1;\n";
  body += e.loop(fmt::format("    float x = {};\n    if (rd_beats(bv, bi, x, jj)) {{\n      bv = x;\n      bi = jj;\n    }}\n",
                             loadf(g.args, g.n.inputs[0], "ix")));  // (reductions take no prologue)
  body += e.combine_arg("bv", "bi");
  auto st = store_main(g.c, g.args, "(bi < 0 ? 0 : bi)", "rw");
  if (!st) return st.error();
  body += e.once(*st);
  e.finish(g.k, beats_fn(g.n.op_type == "ArgMax", node_int(g.n, "select_last_index", 0) != 0), body);
  return std::move(g.k);
}

// ---- Softmax / LogSoftmax / Hardmax --------------------------------------------------------------

Result<Kernel> softmax(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const bool legacy = g.c.g.opset < 13;
  int64_t axis = node_int(g.n, "axis", legacy ? 1 : -1);
  Rows r = rows_split(1, 1, 1);
  if (!xs.empty()) {
    if (!normalize_axis(axis, xs.size())) return g.fail(fmt::format("axis {} is out of range", axis));
    const auto a = static_cast<long>(axis);
    const int64_t outer = shape_elements(Shape(xs.begin(), xs.begin() + a)).value_or(0);
    const int64_t rest = shape_elements(Shape(xs.begin() + a, xs.end())).value_or(0);
    r = legacy ? rows_split(outer, rest, 1)
               : rows_split(outer, xs[static_cast<size_t>(a)], shape_elements(Shape(xs.begin() + a + 1, xs.end())).value_or(0));
  }
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body;
  std::string value;
  std::string decls;
  if (g.n.op_type == "Hardmax") {
    body = "  float bv = 0.0f;\n  int bi = -1;\n";
    body += e.loop(load + "    if (rd_beats(bv, bi, x, jj)) {\n      bv = x;\n      bi = jj;\n    }\n");
    body += e.combine_arg("bv", "bi");
    decls = beats_fn(true, false);
    value = "(jj == bi ? 1.0f : 0.0f)";
  } else {
    body += e.pass("mx", "(-INF_F)", "rd_fmax", load, "x");
    body += "  if (isinf(mx) || isnan(mx)) mx = 0.0f;\n";
    body += e.pass("sm", "0.0f", "rd_add", load, "expf(x - mx)");
    value = g.n.op_type == "LogSoftmax" ? "(x - mx) - logf(sm)" : "expf(x - mx) / sm";
  }
  auto st = store_main(g.c, g.args, value, "ix");
  if (!st) return st.error();
  body += e.loop(load + *st);
  e.finish(g.k, decls, body);
  return std::move(g.k);
}

// Mean and 1/sqrt(var + eps) of each row, two passes: `mean`, `inv` (float variables).
std::string mean_inv(RowEmitter& e, const std::string& load, int64_t len, double eps) {
  std::string b = e.pass("sm", "0.0f", "rd_add", load, "x");
  b += fmt::format("  float mean = sm / {};\n", float_lit(static_cast<double>(len)));
  b += e.pass("sq", "0.0f", "rd_add", load, "(x - mean) * (x - mean)");
  b += fmt::format("  float inv = 1.0f / sqrtf(sq / {} + {});\n", float_lit(static_cast<double>(len)), float_lit(eps));
  return b;
}

// ---- LayerNormalization ------------------------------------------------------------------------

Result<Kernel> layernorm(Gen& g) {
  const Shape& xs = g.in(0).shape;
  int64_t axis = node_int(g.n, "axis", -1);
  if (!normalize_axis(axis, xs.size()) || xs.empty()) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto a = static_cast<long>(axis);
  const int64_t rows = shape_elements(Shape(xs.begin(), xs.begin() + a)).value_or(0);
  const int64_t cols = shape_elements(Shape(xs.begin() + a, xs.end())).value_or(0);
  const Rows r = rows_split(rows, cols, 1);
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body = mean_inv(e, load, cols, node_float(g.n, "epsilon", 1e-5));
  std::string y = "(x - mean) * inv";
  for (size_t k = 1; k <= 2; ++k) {
    if (!has_input(g.n, k)) continue;
    const int64_t np = g.in(k).elements();
    if (np == 0 || cols % np != 0) return g.fail("scale/bias do not broadcast to the normalized dims");
    const std::string idx = np == 1 ? "0" : np == cols ? "jj" : fmt::format("(jj % {})", np);
    y = fmt::format("{} {} {}", k == 1 ? "(" + y + ")" : y, k == 1 ? "*" : "+", loadf(g.args, g.n.inputs[k], idx));
  }
  auto st = store_main(g.c, g.args, y, "ix");
  if (!st) return st.error();
  body += e.loop(load + *st);
  std::string stats;
  for (size_t k = 1; k <= 2 && k < g.n.outputs.size(); ++k) {
    if (g.n.outputs[k] == kNoTensor) continue;
    stats += "    " + g.args.store(g.n.outputs[k], "rw", k == 1 ? "mean" : "inv") + "\n";
  }
  if (!stats.empty()) body += e.once(stats);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

// ---- GroupNormalization / InstanceNormalization ---------------------------------------------------

Result<Kernel> groupnorm(Gen& g) {
  const Shape& xs = g.in(0).shape;
  if (xs.size() < 2) return g.fail("X needs rank >= 2");
  if (!has_input(g.n, 1) || !has_input(g.n, 2)) return g.fail("scale and bias inputs are required");
  const int64_t nb = xs[0], ch = xs[1], spatial = shape_elements(Shape(xs.begin() + 2, xs.end())).value_or(0);
  const bool instance = g.n.op_type == "InstanceNormalization";
  const int64_t groups = instance ? ch : node_int(g.n, "num_groups", 0);
  if (groups <= 0 || ch % groups != 0) return g.fail(fmt::format("num_groups = {} does not divide {} channels", groups, ch));
  const int64_t ns = g.in(1).elements();
  const bool per_channel = ns == ch;
  if (!per_channel && ns != groups) {
    return g.fail(fmt::format("scale has {} elements: neither the {} channels nor the {} groups", ns, ch, groups));
  }
  if (g.in(2).elements() != ns) return g.fail("bias and scale lengths differ");
  const int64_t cpg = ch / groups, len = cpg * spatial;
  const Rows r = rows_split(nb * groups, len, 1);
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body = mean_inv(e, load, len, node_float(g.n, "epsilon", 1e-5));
  const std::string grp = groups == 1 ? "0" : fmt::format("(rw % {})", groups);
  std::string p = grp;
  if (per_channel && cpg > 1) {
    p = fmt::format("{} * {} + {}", grp, cpg, spatial == 1 ? "jj" : fmt::format("jj / {}", spatial));
  }
  const std::string scale = loadf(g.args, g.n.inputs[1], "pc");
  const std::string bias = loadf(g.args, g.n.inputs[2], "pc");
  const std::string y = fmt::format("(x - mean) * inv * {} + {}", scale, bias);
  auto st = store_main(g.c, g.args, y, "ix");
  if (!st) return st.error();
  body += e.loop(load + fmt::format("    int pc = {};\n", p) + *st);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

// ---- LpNormalization / MeanVarianceNormalization ------------------------------------------------

Result<Kernel> lpnorm(Gen& g) {
  const Shape& xs = g.in(0).shape;
  int64_t axis = node_int(g.n, "axis", -1);
  if (!normalize_axis(axis, xs.size()) || xs.empty()) return g.fail(fmt::format("axis {} is out of range", axis));
  const int64_t p = node_int(g.n, "p", 2);
  if (p != 1 && p != 2) return g.fail(fmt::format("p = {}: only the L1 and L2 norms are defined", p));
  const auto a = static_cast<long>(axis);
  const Rows r = rows_split(shape_elements(Shape(xs.begin(), xs.begin() + a)).value_or(0), xs[static_cast<size_t>(a)],
                            shape_elements(Shape(xs.begin() + a + 1, xs.end())).value_or(0));
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body = e.pass("sm", "0.0f", "rd_add", load, p == 1 ? "fabsf(x)" : "x * x");
  body += p == 1 ? "  float nrm = sm;\n" : "  float nrm = sqrtf(sm);\n";
  auto st = store_main(g.c, g.args, "x / nrm", "ix");
  if (!st) return st.error();
  body += e.loop(load + *st);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

Result<Kernel> mvn(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const std::vector<int64_t> axes = g.n.attr("axes") ? node_ints(g.n, "axes") : std::vector<int64_t>{0, 2, 3};
  std::vector<bool> mask(xs.size(), false);
  if (auto s = mark_axes(g, xs, axes, mask); !s) return s.error();
  const Rows r = rows_of_mask(xs, mask);
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  std::string body = e.pass("sm", "0.0f", "rd_add", load, "x");
  body += fmt::format("  float mean = sm / {};\n", float_lit(static_cast<double>(r.len)));
  body += e.pass("sq", "0.0f", "rd_add", load, "(x - mean) * (x - mean)");
  body += fmt::format("  float sd = sqrtf(sq / {}) + 1e-9f;\n", float_lit(static_cast<double>(r.len)));
  auto st = store_main(g.c, g.args, "(x - mean) / sd", "ix");
  if (!st) return st.error();
  body += e.loop(load + *st);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

// ---- GlobalAveragePool / GlobalMaxPool / GlobalLpPool -------------------------------------------

Result<Kernel> global_pool(Gen& g) {
  const Shape& xs = g.in(0).shape;
  if (xs.size() < 2) return g.fail("input needs rank >= 2");
  const int64_t sp = shape_elements(Shape(xs.begin() + 2, xs.end())).value_or(0);
  const Rows r = rows_split(xs[0] * xs[1], sp, 1);
  RowEmitter e(g.c, r);
  auto xv = e.input_x(g.args);
  if (!xv) return xv.error();
  const std::string& load = *xv;
  const std::string& op = g.n.op_type;
  std::string body;
  std::string result = "acc";
  if (op == "GlobalMaxPool") {
    body = e.pass("acc", "(-INF_F)", "rd_fmax", load, "x");
  } else if (op == "GlobalLpPool") {
    const int64_t p = node_int(g.n, "p", 2);
    if (p <= 0) return g.fail(fmt::format("p = {} must be positive", p));
    body = e.pass("acc", "0.0f", "rd_add", load,
                  p == 1 ? "fabsf(x)" : p == 2 ? "x * x" : fmt::format("powf(fabsf(x), {})", float_lit(double(p))));
    result = p == 1 ? "acc" : p == 2 ? "sqrtf(acc)" : fmt::format("powf(acc, {})", float_lit(1.0 / double(p)));
  } else {
    body = e.pass("acc", "0.0f", "rd_add", load, "x");
    result = fmt::format("acc / {}", float_lit(static_cast<double>(sp)));
  }
  auto st = store_main(g.c, g.args, result, "rw");
  if (!st) return st.error();
  body += e.once(*st);
  e.finish(g.k, "", body);
  return std::move(g.k);
}

// ---- CumSum: one thread per row, a serial scan ------------------------------------------------------

Result<Kernel> cumsum(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const ConstInput ax = const_input(g.c.g, g.n, 1);
  if (!ax.present || !ax.known || ax.ints.empty()) return g.fail("the axis input must be a constant");
  int64_t axis = ax.ints[0];
  if (!normalize_axis(axis, xs.size()) || xs.empty()) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto a = static_cast<long>(axis);
  const int64_t len = xs[static_cast<size_t>(a)];
  const int64_t inner = shape_elements(Shape(xs.begin() + a + 1, xs.end())).value_or(0);
  const Rows r = rows_split(shape_elements(Shape(xs.begin(), xs.begin() + a)).value_or(0), len, inner);
  const bool exclusive = node_int(g.n, "exclusive", 0) != 0, reverse = node_int(g.n, "reverse", 0) != 0;
  const bool is_int = g.args.is_int(g.n.inputs[0]);
  const char* type = is_int ? "int" : "float";
  auto st = store_main(g.c, g.args, "acc", "ix");
  if (!st) return st.error();
  std::string body = fmt::format("  {} acc = {};\n", type, is_int ? "0" : "0.0f");
  body += fmt::format("  for (int tt = 0; tt < {}; ++tt) {{\n    int jj = {};\n    int ix = xb + {};\n", len,
                      reverse ? fmt::format("{} - tt", len - 1) : "tt", r.offset("jj"));
  body += fmt::format("    {} x = {}({});\n", type, type, g.args.load(g.n.inputs[0], "ix"));
  if (!exclusive) body += "    acc = acc + x;\n";
  body += *st;
  if (exclusive) body += "    acc = acc + x;\n";
  body += "  }\n";
  // Always one thread per row (the scan is serial).
  Kernel& k = g.k;
  const uint32_t block = std::min<uint32_t>(128, pow2_at_most(g.c.opts.max_threads));
  k.block = {block, 1, 1};
  k.groups = groups_for(r.rows, block);
  k.decls = "";
  k.body = fmt::format("  int rw = {} * BLOCK_X + LID_X;\n  if (rw >= {}) return;\n  int xb = {};\n", kLinearGroup, r.rows,
                       r.base("rw")) +
           body;
  return std::move(g.k);
}

}  // namespace

Result<Kernel> gen_reduction(const GenContext& c) {
  const Node& n = c.anchor();
  if (c.k.anchor != 0 && op_class(n.domain, n.op_type) != OpClass::kNormalization) {
    return c.unsupported(n, "ops fused before a reduction are not generated (only before a normalization)");
  }
  if (n.inputs.empty() || n.inputs[0] == kNoTensor || n.outputs.empty() || n.outputs[0] == kNoTensor) {
    return c.unsupported(n, "the first input or output is missing");
  }
  for (TensorId t : n.inputs) {
    if (t != kNoTensor && c.tensor(t).elements() > kMaxIndex) return c.unsupported(n, "over 2^31 elements: 32-bit indexing");
  }
  for (TensorId t : n.outputs) {
    if (t != kNoTensor && c.tensor(t).elements() > kMaxIndex) return c.unsupported(n, "over 2^31 elements: 32-bit indexing");
  }
  const std::string& op = n.op_type;
  Gen g(c);
  g.k.name = short_name(c, "red");
  g.k.cls = "reduction";
  Result<Kernel> r = make_error(ErrorCode::kUnsupported, "");
  if (op.rfind("Reduce", 0) == 0) {
    r = reduce(g);
  } else if (op == "ArgMax" || op == "ArgMin") {
    r = arg_extreme(g);
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
    r = global_pool(g);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    return gen_pool(c);
  } else if (op == "CumSum") {
    r = cumsum(g);
  } else {
    g.k.name = short_name(c, "norm");
    g.k.cls = "normalization";
    if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") r = softmax(g);
    else if (op == "LayerNormalization") r = layernorm(g);
    else if (op == "GroupNormalization" || op == "InstanceNormalization") r = groupnorm(g);
    else if (op == "LpNormalization") r = lpnorm(g);
    else if (op == "MeanVarianceNormalization") r = mvn(g);
    else if (op == "BatchNormalization" || op == "LRN") return gen_pointwise_norm(c);
    else if (op == "TopK") return c.unsupported(n, "TopK (a per-row sort) has no generator");
    else return c.unsupported(n, "no reduction/normalization generator for this op");
  }
  if (!r) return r;
  r->args = std::move(g.args.args);
  return r;
}

}  // namespace gpusim::codegen
