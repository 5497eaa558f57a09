// The tiled GEMM main loop shared by the GEMM and implicit-GEMM convolution generators, the
// strided operand views, and the epilogue hand-over to the elementwise tail (see gemm_tile.h).
//
// Kernel layout (one group per output tile, tiles spread linearly over the grid):
//   group  -> (bz, tile_m, tile_n); threads form a (bm/tm) x (bn/tn) grid; thread (ty, tx) owns
//             rows ty + i * (bm/tm) and columns tx + j * (bn/tn) of the tile — strided, so adjacent
//             threads touch adjacent columns when the epilogue stores.
//   k-step -> every thread loads elements of the A tile (bm x bk) and the B tile (bk x bn) into
//             shared memory (zero outside the matrix), a barrier, then bk rank-1 updates of the
//             register micro-tile from shared memory.
// With stages = 2 the tiles are double-buffered: tile t+1 is loaded into the other buffer while
// tile t is consumed, one barrier per k-step instead of two.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "gemm_tile.h"

namespace gpusim::codegen {

int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p *= 2;
  return p;
}

int pow2_floor(int64_t v) {
  int p = 1;
  while (static_cast<int64_t>(p) * 2 <= v && p < (1 << 30)) p *= 2;
  return p;
}

std::string add_term(const std::string& base, const std::string& idx, int64_t stride) {
  if (stride == 0 || idx == "0") return base.empty() ? "0" : base;
  const bool simple = idx.find_first_of(" +-*/%") == std::string::npos;
  const std::string term = stride == 1 ? idx : fmt::format("{} * {}", simple ? idx : "(" + idx + ")", stride);
  if (base.empty() || base == "0") return term;
  return base + " + " + term;
}

std::string batch_offset(const Shape& batch, const Shape& op_batch, const std::vector<int64_t>& strides,
                         const std::string& flat) {
  const size_t off = batch.size() - op_batch.size();
  std::string e;
  for (size_t j = 0; j < op_batch.size(); ++j) {
    if (op_batch[j] == 1) continue;
    e = add_term(e, coord(batch, off + j, flat), strides[j]);
  }
  return e.empty() ? "0" : e;
}

std::string kernel_name(const std::string& prefix, const Node& n) {
  std::string s = prefix + "_";
  for (char ch : n.name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (ok) {
      s += ch;
    } else if (s.back() != '_') {
      s += '_';
    }
    if (s.size() >= 48) break;
  }
  while (s.size() > 1 && s.back() == '_') s.pop_back();
  return s;
}

GemmTile fit_gemm_tile(const TileConfig& tc, const GemmLoop& L, const Options& opts) {
  GemmTile t;
  if (tc.block_m > 0 && tc.block_n > 0 && tc.block_k > 0) {
    t.bm = pow2_floor(std::min(tc.block_m, 256));
    t.bn = pow2_floor(std::min(tc.block_n, 256));
    t.bk = pow2_floor(std::min(tc.block_k, 64));
  }
  t.threads = tc.threads > 0 ? pow2_floor(std::min(tc.threads, 1024)) : 256;
  t.stages = tc.stages >= 2 ? 2 : 1;
  // No larger than the problem: a 7-row GEMM gets an 8-row tile, not 64 rows of idle threads.
  t.bm = std::min(t.bm, pow2_ceil(std::max<int64_t>(1, L.m)));
  t.bn = std::min(t.bn, pow2_ceil(std::max<int64_t>(1, L.n)));
  t.bk = std::min(t.bk, pow2_ceil(std::max<int64_t>(1, L.k)));
  const int max_threads = pow2_floor(std::max(1, opts.max_threads));
  t.threads = std::min(t.threads, max_threads);
  // At most 64 accumulators per thread: more threads where allowed, else a smaller tile.
  while (t.bm * t.bn / t.threads > 64) {
    if (t.threads * 2 <= max_threads) {
      t.threads *= 2;
    } else if (t.bm >= t.bn) {
      t.bm /= 2;
    } else {
      t.bn /= 2;
    }
  }
  while (t.shared_bytes() > opts.max_shared_bytes) {
    if (t.stages > 1) {
      t.stages = 1;
    } else if (t.bk > 4) {
      t.bk /= 2;
    } else if (std::max(t.bm, t.bn) > 1) {
      (t.bm >= t.bn ? t.bm : t.bn) /= 2;
    } else if (t.bk > 1) {
      t.bk /= 2;
    } else {
      break;
    }
  }
  t.threads = std::min(t.threads, t.bm * t.bn);
  const int e = t.bm * t.bn / t.threads;  // outputs per thread, a power of two
  t.tm = 1;
  while (t.tm * 2 * t.tm * 2 <= e && t.tm * 2 <= t.bm) t.tm *= 2;
  t.tn = e / t.tm;
  if (t.tn > t.bn) {
    t.tn = t.bn;
    t.tm = e / t.bn;
  }
  t.split = generated_split_k(tc.split_k, L.k, t.bk);
  return t;
}

int gemm_vector_width(const TileConfig& t, Storage storage) {
  const int cap = storage == Storage::kF16 ? 8 : 4;
  int w = 1;
  while (w * 2 <= std::min(t.vector_width, cap)) w *= 2;
  return w;
}

namespace {

// One operand's share of a tile: `u` loads a thread of `vec` consecutive elements each (`n` in the
// tile), along the operand's fastest index.
struct Share {
  bool is_a = true, p_fastest = false;
  int p = 0, bk = 0, T = 0, vec = 1, per = 0, n = 0, u = 0;
  int64_t extent = 0, k = 0;
  const char *pv = "r", *gv = "gm", *base = "m0", *val = "av";
  std::string load, load_vec;
  OperandGather gather;
  int floats() const { return u * vec; }
  // Staged in the buffer's raw type, converted as the values go to shared memory: one element a
  // load (raw), or one vector (raw_vec: RAWVk, whose first element the gather's index names).
  bool raw() const { return vec <= 1 && gather.arg >= 0; }
  bool raw_vec() const { return vec > 1 && gather.arg >= 0 && gather.stmts.empty() && gather.ok.empty(); }
  bool gathered() const { return raw() || raw_vec(); }
  // Array entries a load takes.
  int slots() const { return raw_vec() ? 1 : vec; }
  std::string type() const {
    if (raw_vec()) return fmt::format("RAWV{}", gather.arg);
    return raw() ? fmt::format("RAW{}", gather.arg) : std::string("float");
  }
  std::string value(const std::string& x) const { return raw() ? fmt::format("FROM_RAW{}({})", gather.arg, x) : x; }
};

Share share_of(const GemmLoop& L, bool is_a, int p, int bk, int T) {
  Share o;
  o.is_a = is_a;
  o.p_fastest = is_a ? L.a_m_fastest : L.b_n_fastest;
  o.p = p;
  o.bk = bk;
  o.T = T;
  o.extent = is_a ? L.m : L.n;
  o.k = L.k;
  if (!is_a) {
    o.pv = "c";
    o.gv = "gn";
    o.base = "n0";
    o.val = "bv";
  }
  o.load = is_a ? L.load_a : L.load_b;
  o.load_vec = is_a ? L.load_a_vec : L.load_b_vec;
  o.gather = is_a ? L.a_gather : L.b_gather;
  o.vec = std::max(1, is_a ? L.a_vec : L.b_vec);
  // A vector wider than the tile along its fastest index loads scalars: the loop's vector statement
  // fills exactly its own width.
  if (o.vec > (o.p_fastest ? p : bk)) o.vec = 1;
  o.per = (o.p_fastest ? p : bk) / o.vec;
  o.n = p * bk / o.vec;
  o.u = (o.n + T - 1) / T;
  return o;
}

// The unrolled loop over a thread's loads `from` .. `to` (after `off` more, an int expression or
// ""): int `e` the load's index in the tile (the last one for a thread past the tile's end, whose
// value is not stored).
std::string share_loop(const Share& o, int from, int to, const std::string& off = "") {
  std::string s = fmt::format("    UNROLL for (int u = {}; u < {}; ++u) {{\n", from, to);
  const std::string u = off.empty() ? "u" : "(u + " + off + ")";
  s += o.n % o.T == 0 ? fmt::format("      int e = LID_X + {} * {};\n", u, o.T)
                      : fmt::format("      int e = min(LID_X + {} * {}, {});\n", u, o.T, o.n - 1);
  return s;
}

// Statements declaring the tile position (pv, kk) of load `e`.
std::string position(const Share& o) {
  if (o.vec <= 1) {
    return o.p_fastest ? fmt::format("int {0} = e % {1}; int kk = e / {1}; ", o.pv, o.p)
                       : fmt::format("int {0} = e / {1}; int kk = e % {1}; ", o.pv, o.bk);
  }
  return o.p_fastest ? fmt::format("int {0} = (e % {1}) * {2}; int kk = e / {1}; ", o.pv, o.per, o.vec)
                     : fmt::format("int {0} = e / {1}; int kk = (e % {1}) * {2}; ", o.pv, o.per, o.vec);
}

// The coordinates of load `e` at k-offset k0, clamped into the matrix (the last vector start
// along the fastest index), so a load needs no branch, and bool `in_`: whether they were inside.
std::string clamped(const Share& o, const std::string& k0) {
  const bool vp = o.vec > 1 && o.p_fastest, vk = o.vec > 1 && !o.p_fastest;
  return fmt::format("int {0} = min({1} + {2}, {3}); int gk = min({4} + kk, {5}); bool in_ = {1} + {2} < {6} && {4} + kk < {7};\n",
                     o.gv, o.base, o.pv, o.extent - (vp ? o.vec : 1), k0, o.k - (vk ? o.vec : 1), o.extent, o.k);
}

// Loads `from` .. `to` of the share at k-offset k0 into array `dst` (of o.type(), `o.vec` entries a
// load, load u's at `at(u)`). A gather computes every index first, then issues every load; a
// statement runs whole per load, its values outside the matrix set to 0.
std::string issue_share(const Share& o, const std::string& k0, const std::string& dst, int from, int to,
                        const std::function<std::string(const std::string&)>& at, const std::string& off = "") {
  std::string s;
  if (o.gathered()) {
    const OperandGather& g = o.gather;
    const char* v = o.raw_vec() ? "V" : "";
    s += fmt::format("    {{\n    int gi_[{}];\n", to - from);
    s += share_loop(o, from, to, off) + "      { " + position(o) + clamped(o, k0);
    s += fmt::format("        {}\n        gi_[u - {}] = in_{} ? ({}) : -1;\n      }}\n    }}\n", g.stmts, from,
                     g.ok.empty() ? "" : " && (" + g.ok + ")", g.index);
    s += fmt::format("    UNROLL for (int u = {0}; u < {1}; ++u) {2} = gi_[u - {0}] >= 0 ? LDR{4}{3}(gi_[u - {0}]) : RAW{4}Z{3};\n",
                     from, to, fmt::format("{}[{}]", dst, at("u")), g.arg, v);
    return s + "    }\n";
  }
  s += share_loop(o, from, to, off) + "      { " + position(o) + clamped(o, k0);
  if (o.vec <= 1) {
    s += fmt::format("        float {0} = 0.0f;\n        {{ {1} }}\n        {2}[{3}] = in_ ? {0} : 0.0f;\n", o.val, o.load, dst, at("u"));
  } else {
    s += fmt::format("        float {0}_v[{1}];\n        {{ {2} }}\n", o.val, o.vec, o.load_vec);
    s += fmt::format("        for (int v = 0; v < {}; ++v) {}[{} + v] = in_ ? {}_v[v] : 0.0f;\n", o.vec, dst, at("u"), o.val);
  }
  return s + "      }\n    }\n";
}

// Stores loads `from` .. `to` from array `src` (load u's values at `at(u)`) into stage `buf`.
std::string commit_share(const Share& o, const std::string& buf, const std::string& src, int from, int to,
                         const std::function<std::string(const std::string&)>& at, const TileStore& store,
                         const TileStoreVector& store_vec, const std::string& off = "") {
  std::string s = share_loop(o, from, to, off);
  s += o.n % o.T == 0 ? "      { " : fmt::format("      if (LID_X + u * {} < {}) {{ ", o.T, o.n);
  s += position(o);
  if (o.raw_vec()) {
    // The vector whole where the tile takes it, else unpacked element by element.
    const std::string x = fmt::format("{}[{}]", src, at("u"));
    const std::string whole = store_vec ? store_vec(buf, o.pv, "kk", o.p_fastest, o.vec, o.gather.half, o.type(), x) : "";
    if (!whole.empty()) return s + whole + " }\n    }\n";
    const std::string pi = o.p_fastest ? std::string(o.pv) + " + v" : o.pv, kk = o.p_fastest ? "kk" : "kk + v";
    s += fmt::format("UNROLL for (int v = 0; v < {}; ++v) {} }}\n", o.vec,
                     store(buf, pi, kk, fmt::format("FROM_RAWV{}({}, v)", o.gather.arg, x)));
    return s + "    }\n";
  }
  if (o.vec <= 1) {
    s += store(buf, o.pv, "kk", o.value(fmt::format("{}[{}]", src, at("u")))) + " }\n";
  } else {
    const std::string pi = o.p_fastest ? std::string(o.pv) + " + v" : o.pv, kk = o.p_fastest ? "kk" : "kk + v";
    s += fmt::format("for (int v = 0; v < {}; ++v) {} }}\n", o.vec, store(buf, pi, kk, fmt::format("{}[{} + v]", src, at("u"))));
  }
  return s + "    }\n";
}

// The SIMT loop's operand-tile loads: two a thread in flight (UNROLL2), each element's load
// statement whole. The gathers of tile_loads kept 4 in flight there too but took 20-60 registers
// more than the cost model's figure for the tile on sm_86 (blocks per SM as assumed fell from
// 99.7% to 70-83%, three kernels spilled): fp32 values need no conversion, and the earlier loads
// already kept two in flight (the SASS of the H200 runs' fp32 kernels).
std::string unroll2_tile_load(const GemmLoop& L, bool is_a, int p, int bk, int T, const std::string& k0,
                              const std::function<std::string(const std::string&, const std::string&, const std::string&)>& store) {
  const bool p_fastest = is_a ? L.a_m_fastest : L.b_n_fastest;
  const char* pv = is_a ? "r" : "c";
  const char* gv = is_a ? "gm" : "gn";
  const char* base = is_a ? "m0" : "n0";
  const char* val = is_a ? "av" : "bv";
  const int64_t extent = is_a ? L.m : L.n;
  int vec = std::max(1, is_a ? L.a_vec : L.b_vec);
  // A vector wider than the tile along its fastest index loads scalars: the loop's vector statement
  // fills exactly its own width.
  if (vec > (p_fastest ? p : bk)) vec = 1;
  // Two loads a thread in flight (UNROLL2): left to itself the compiler unrolled these loops four
  // times or more, holding every gather's address and value at once: 15-27 registers a thread more
  // than the cost model's figure for the tile (bench/RESULTS.md "Compiled truth"), and spills.
  std::string s;
  if (vec <= 1) {
    s += fmt::format("    UNROLL2 for (int e = LID_X; e < {}; e += {}) {{\n", p * bk, T);
    s += p_fastest ? fmt::format("      int {} = e % {}; int kk = e / {};\n", pv, p, p)
                   : fmt::format("      int {} = e / {}; int kk = e % {};\n", pv, bk, bk);
    s += fmt::format("      int {} = {} + {}; int gk = {} + kk;\n", gv, base, pv, k0);
    s += fmt::format("      float {} = 0.0f;\n", val);
    s += fmt::format("      if ({} < {} && gk < {}) {{ {} }}\n", gv, extent, L.k, is_a ? L.load_a : L.load_b);
    s += "      " + store(pv, "kk", val) + "\n    }\n";
    return s;
  }
  // vec consecutive elements a thread along the fastest index; the extent along it is a multiple
  // of vec, so a vector starting inside the matrix lies wholly inside it.
  const int per = (p_fastest ? p : bk) / vec;
  s += fmt::format("    UNROLL2 for (int e = LID_X; e < {}; e += {}) {{\n", p * bk / vec, T);
  s += p_fastest ? fmt::format("      int {} = (e % {}) * {}; int kk = e / {};\n", pv, per, vec, per)
                 : fmt::format("      int {} = e / {}; int kk = (e % {}) * {};\n", pv, per, per, vec);
  s += fmt::format("      int {} = {} + {}; int gk = {} + kk;\n", gv, base, pv, k0);
  s += fmt::format("      float {}_v[{}];\n", val, vec);
  s += fmt::format("      if ({} < {} && gk < {}) {{ {} }} else {{ for (int v = 0; v < {}; ++v) {}_v[v] = 0.0f; }}\n", gv,
                   extent, L.k, is_a ? L.load_a_vec : L.load_b_vec, vec, val);
  s += fmt::format("      for (int v = 0; v < {}; ++v) {}\n    }}\n", vec,
                   store(p_fastest ? std::string(pv) + " + v" : pv, p_fastest ? "kk" : "kk + v", std::string(val) + "_v[v]"));
  return s;
}

}  // namespace

bool stages_tile_loads(int staged_floats, int acc, int T) {
  const int cap = std::min(255, 65536 / std::max(1, T));  // a thread's registers, the block resident
  return staged_floats <= kMaxStagedFloats && acc + staged_floats <= kMaxStagedAndAccumulators &&
         acc + staged_floats + kStagingOverhead <= cap;
}

KernelChain design_chain(int bm, int bn, int bk, int T, int acc, int a_vec, int b_vec, int split, int fragments,
                         int fragment_barriers, int round) {
  const auto loads = [&](int p, int vec) { return std::max(1, (p * bk / std::max(1, vec) + T - 1) / T); };
  const int ua = loads(bm, a_vec), ub = loads(bn, b_vec);
  KernelChain c;
  c.loads_ahead = stages_tile_loads(ua * a_vec + ub * b_vec, acc, T) ? 1 : 0;
  // The matrix path's gathers (rounds of kLoadRound) issue both shares in one round when they fit.
  const bool together = round == kLoadRound && ua + ub <= round;
  c.load_rounds = c.loads_ahead || together ? 1 : (ua + round - 1) / round + (ub + round - 1) / round;
  const int values = std::max(1, bm * bn / std::max(1, T));
  c.epilogue_rounds = split > 1 ? 2 + values * ((split + 15) / 16) : 0;
  c.epilogue_barriers = (split > 1 ? 2 : 0) + fragments * fragment_barriers;
  return c;
}

TileLoads tile_loads(const GemmLoop& L, int bm, int bn, int bk, int T, int acc, TileStore store_a, TileStore store_b,
                     bool gathers, TileStoreVector vec_a, TileStoreVector vec_b) {
  const Share a = share_of(L, true, bm, bk, T), b = share_of(L, false, bn, bk, T);
  TileLoads io;
  if (!gathers) {
    io.staged = false;
    io.issue = [](const std::string&) { return std::string(); };
    io.commit = [L, bm, bn, bk, T, store_a, store_b](const std::string& buf, const std::string& k0) {
      const auto at = [&](const TileStore& st) {
        return [&st, buf](const std::string& pi, const std::string& kk, const std::string& v) { return st(buf, pi, kk, v); };
      };
      return unroll2_tile_load(L, true, bm, bk, T, k0, at(store_a)) + unroll2_tile_load(L, false, bn, bk, T, k0, at(store_b));
    };
    return io;
  }
  const auto whole = [](const Share& o) {
    return [vec = o.slots()](const std::string& u) { return vec == 1 ? u : fmt::format("{} * {}", u, vec); };
  };
  if (stages_tile_loads(a.floats() + b.floats(), acc, T)) {
    io.decls = fmt::format("  {} sta_a[{}];\n  {} sta_b[{}];\n", a.type(), a.u * a.slots(), b.type(), b.u * b.slots());
    io.issue = [a, b, whole](const std::string& k0) {
      return issue_share(a, k0, "sta_a", 0, a.u, whole(a)) + issue_share(b, k0, "sta_b", 0, b.u, whole(b));
    };
    io.commit = [a, b, whole, store_a, store_b, vec_a, vec_b](const std::string& buf, const std::string&) {
      return commit_share(a, buf, "sta_a", 0, a.u, whole(a), store_a, vec_a) +
             commit_share(b, buf, "sta_b", 0, b.u, whole(b), store_b, vec_b);
    };
    return io;
  }
  // Too many to hold across the products: rounds of kLoadRound loads, each in flight together,
  // in a loop the compiler keeps rolled (UNROLL1): unrolled, it hoisted every load's address out
  // of the k-loop, and 256-row tiles spilled.
  io.staged = false;
  io.issue = [](const std::string&) { return std::string(); };
  io.commit = [a, b, whole, store_a, store_b, vec_a, vec_b](const std::string& buf, const std::string& k0) {
    std::string s;
    if (a.u + b.u <= kLoadRound) {
      // Both shares in one round: every load of the step in flight together (a compiler that
      // keeps stores to shared memory in order, as AMD's does, otherwise waits for A's before
      // issuing B's).
      s += fmt::format("    {{\n    {} stc[{}];\n    {} stcb[{}];\n", a.type(), a.u * a.slots(), b.type(), b.u * b.slots());
      s += issue_share(a, k0, "stc", 0, a.u, whole(a)) + issue_share(b, k0, "stcb", 0, b.u, whole(b));
      s += commit_share(a, buf, "stc", 0, a.u, whole(a), store_a, vec_a) +
           commit_share(b, buf, "stcb", 0, b.u, whole(b), store_b, vec_b);
      return s + "    }\n";
    }
    for (const Share* o : {&a, &b}) {
      const int round = std::min(o->u, kLoadRound);  // u and kLoadRound are powers of two
      const auto at = whole(*o);
      const std::string off = o->u > round ? "r0_" : "";
      if (o->u > round) s += fmt::format("    UNROLL1 for (int r0_ = 0; r0_ < {0}; r0_ += {1}) {{\n", o->u, round);
      s += fmt::format("    {{\n    {} stc[{}];\n", o->type(), round * o->slots());
      s += issue_share(*o, k0, "stc", 0, round, at, off);
      s += commit_share(*o, buf, "stc", 0, round, at, o->is_a ? store_a : store_b, o->is_a ? vec_a : vec_b, off);
      s += "    }\n";
      if (o->u > round) s += "    }\n";
    }
    return s;
  };
  return io;
}

namespace {

// Leading dims of the shared tiles: a tile loaded with k fastest gets one float of padding per
// k-row, so the threads of a warp storing consecutive k hit different banks.
int lda(const GemmLoop& L, const GemmTile& t) { return L.a_m_fastest ? t.bm : t.bm + 1; }
int ldb(const GemmLoop& L, const GemmTile& t) { return L.b_n_fastest ? t.bn : t.bn + 1; }

// The A and B tiles' loads (tile_loads) into shared-memory stage `buf`.
TileLoads simt_tile_loads(const GemmLoop& L, const GemmTile& t) {
  const int bk = t.bk, la = lda(L, t), lb = ldb(L, t);
  return tile_loads(
      L, t.bm, t.bn, t.bk, t.threads, t.tm * t.tn,
      [bk, la](const std::string& buf, const std::string& r, const std::string& kk, const std::string& v) {
        return fmt::format("sA[({} * {} + {}) * {} + {}] = {};", buf, bk, kk, la, r, v);
      },
      [bk, lb](const std::string& buf, const std::string& c, const std::string& kk, const std::string& v) {
        return fmt::format("sB[({} * {} + {}) * {} + {}] = {};", buf, bk, kk, lb, c, v);
      },
      false);
}

std::string compute_tile(const GemmLoop& L, const GemmTile& t, const std::string& buf) {
  const int rm = t.bm / t.tm, rn = t.bn / t.tn;
  std::string s;
  s += fmt::format("    for (int kk = 0; kk < {}; ++kk) {{\n", t.bk);
  s += fmt::format("      float ra[{}]; float rb[{}];\n", t.tm, t.tn);
  s += fmt::format("      for (int i = 0; i < {}; ++i) ra[i] = sA[({} * {} + kk) * {} + ty + i * {}];\n", t.tm, buf, t.bk,
                   lda(L, t), rm);
  s += fmt::format("      for (int j = 0; j < {}; ++j) rb[j] = sB[({} * {} + kk) * {} + tx + j * {}];\n", t.tn, buf, t.bk,
                   ldb(L, t), rn);
  s += fmt::format("      for (int i = 0; i < {}; ++i) {{\n", t.tm);
  s += fmt::format("        for (int j = 0; j < {}; ++j) acc[i * {} + j] += ra[i] * rb[j];\n", t.tn, t.tn);
  s += "      }\n    }\n";
  return s;
}

}  // namespace

void emit_gemm(const GemmLoop& L, const GemmTile& t, Kernel& k) {
  const int64_t tiles_m = (L.m + t.bm - 1) / t.bm, tiles_n = (L.n + t.bn - 1) / t.bn;
  const int64_t total = L.batch * tiles_m * tiles_n;
  const SplitK sk = split_k_plan(L.k, t.bk, t.split);
  const int rn = t.bn / t.tn, rm = t.bm / t.tm;
  k.block = {static_cast<uint32_t>(t.threads), 1, 1};
  k.groups = groups_for(std::max<int64_t>(total * sk.split, 1), 1);
  const int sa = t.stages * t.bk * lda(L, t), sb = t.stages * t.bk * ldb(L, t);
  k.shared_bytes = static_cast<uint64_t>(sa + sb) * 4;
  k.decls += fmt::format("SHARED float sA[{}];\nSHARED float sB[{}];\n", sa, sb);
  std::string& s = k.body;
  s += fmt::format("  // GEMM {} x [{} x {} x {}], tile {}x{}x{}, {} threads of {}x{} outputs, {} stage(s){}\n", L.batch, L.m,
                   L.n, L.k, t.bm, t.bn, t.bk, t.threads, t.tm, t.tn, t.stages,
                   sk.split > 1 ? fmt::format(", K split {} ways", sk.split) : "");
  s += split_k_header(sk, total, t.bk);
  s += fmt::format("  int n0 = (tile % {}) * {};\n", tiles_n, t.bn);
  s += fmt::format("  int m0 = ((tile / {}) % {}) * {};\n", tiles_n, tiles_m, t.bm);
  s += fmt::format("  int bz = tile / {};\n", tiles_n * tiles_m);
  s += fmt::format("  int tx = LID_X % {}; int ty = LID_X / {};\n", rn, rn);
  s += L.setup;
  const int acc_n = t.tm * t.tn;
  s += fmt::format("  float acc[{}];\n  for (int i = 0; i < {}; ++i) acc[i] = 0.0f;\n", acc_n, acc_n);
  s += k_loop(sk.split > 1 ? "ksteps_here" : std::to_string(sk.ksteps), t.bk, t.stages, sk.split > 1 ? "kb" : "",
              simt_tile_loads(L, t), [&](const std::string& buf) { return compute_tile(L, t, buf); });
  if (sk.split > 1) {
    // Partial sums: accumulator a of thread x of slice ks of the tile at ((tile * split + ks) *
    // acc_n + a) * threads + x, so a warp's stores are consecutive.
    const auto slab = [&](const std::string& slice) {
      return fmt::format("((tile * {} + {}) * {} + a) * {} + LID_X", sk.split, slice, acc_n, t.threads);
    };
    // Unrolled, so the accumulators stay in registers (an indexed array goes to local memory).
    s += fmt::format("  UNROLL for (int a = 0; a < {}; ++a) SPLIT_ST({}, acc[a]);\n", acc_n, slab("ks"));
    s += split_k_arrive(sk);
    add_split_scratch(k, total * sk.split * acc_n * t.threads, total);
  }
  s += fmt::format("  for (int i = 0; i < {}; ++i) {{\n", t.tm);
  s += fmt::format("    int gm = m0 + ty + i * {};\n", rm);
  s += fmt::format("    if (gm >= {}) continue;\n", L.m);
  s += fmt::format("    for (int j = 0; j < {}; ++j) {{\n", t.tn);
  s += fmt::format("      int gn = n0 + tx + j * {};\n", rn);
  s += fmt::format("      if (gn >= {}) continue;\n", L.n);
  if (sk.split > 1) {
    // The last group of the tile: each output is the slices' sum, in slice order, read where the
    // epilogue needs it (the accumulators are dead after the partials went out: rebuilding them
    // first, in an unrolled loop over the slices, spilled).
    s += fmt::format("      int acc_i = i * {} + j;\n      float acc_v = 0.0f;\n", t.tn);
    s += split_sum("      ", sk.split, fmt::format("((tile * {} + sl) * {} + acc_i) * {} + LID_X", sk.split, acc_n, t.threads));
  } else {
    s += fmt::format("      float acc_v = acc[i * {} + j];\n", t.tn);
  }
  s += "      {\n" + L.epilogue + "      }\n";
  s += "    }\n  }\n";
}

std::string k_loop(const std::string& steps, int bk, int stages, const std::string& kbase, const TileLoads& io,
                   const std::function<std::string(const std::string&)>& compute) {
  if (steps.empty() || steps == "0") return {};
  const std::string base = kbase.empty() ? "" : kbase + " + ";
  const std::string k0 = kbase.empty() ? "0" : kbase;
  const std::string next = fmt::format("{}(kt + 1) * {}", base, bk);
  std::string s = io.decls;
  if (stages == 1) {
    // Registers hold the next step's loads while this one computes from the one stage.
    if (io.staged) s += "  {\n" + io.issue(k0) + "  }\n";
    s += fmt::format("  for (int kt = 0; kt < {}; ++kt) {{\n", steps);
    s += io.commit("0", fmt::format("{}kt * {}", base, bk));
    s += "    BARRIER();\n";
    if (io.staged) s += fmt::format("    if (kt + 1 < {}) {{\n", steps) + io.issue(next) + "    }\n";
    s += compute("0");
    s += "    BARRIER();\n  }\n";
    return s;
  }
  s += "  {\n" + io.issue(k0) + io.commit("0", k0) + "  }\n  BARRIER();\n";
  s += fmt::format("  for (int kt = 0; kt < {}; ++kt) {{\n", steps);
  s += "    int cur = kt & 1;\n";
  if (io.staged) {
    s += fmt::format("    if (kt + 1 < {}) {{\n", steps) + io.issue(next) + "    }\n";
    s += compute("cur");
    s += fmt::format("    if (kt + 1 < {}) {{\n", steps) + io.commit("(1 - cur)", next) + "    }\n";
  } else {
    s += fmt::format("    if (kt + 1 < {}) {{\n", steps) + io.commit("(1 - cur)", next) + "    }\n";
    s += compute("cur");
  }
  s += "    BARRIER();\n  }\n";
  return s;
}

SplitK split_k_plan(int64_t k, int bk, int split) {
  SplitK s;
  s.ksteps = (k + bk - 1) / bk;
  s.split = generated_split_k(split, k, bk);
  s.per = (s.ksteps + s.split - 1) / s.split;
  return s;
}

std::string split_sum(const std::string& indent, int split, const std::string& at) {
  return fmt::format("{}{}for (int sl = 0; sl < {}; ++sl) acc_v += SPLIT_LD({});\n", indent, split <= 16 ? "UNROLL " : "",
                     split, at);
}

std::string split_k_header(const SplitK& s, int64_t tiles, int bk) {
  std::string h = fmt::format("  int tile = {};\n  if (tile >= {}) return;\n", kLinearGroup, tiles * s.split);
  if (s.split <= 1) return h;
  // A tile's slices are neighbouring groups, so they run at the same time.
  h += fmt::format("  int ks = tile % {0};\n  tile = tile / {0};\n", s.split);
  h += fmt::format("  int kb = ks * {};\n  int ksteps_here = min({}, {} - ks * {});\n", s.per * bk, s.per, s.ksteps, s.per);
  return h;
}

std::string split_k_arrive(const SplitK& s) {
  // The partial sums visible to every group (fence), all of this group's stored (barrier), then one
  // arrival per group; the last sees split - 1 arrivals before its own.
  return fmt::format(
      "  FENCE();\n  BARRIER();\n  if (LID_X == 0) split_last = SPLIT_ARRIVE(tile) == {} ? 1 : 0;\n  BARRIER();\n"
      "  if (split_last == 0) return;\n  FENCE();\n  if (LID_X == 0) SPLIT_RESET(tile);\n",
      s.split - 1);
}

void add_split_scratch(Kernel& k, int64_t partial_floats, int64_t tiles) {
  k.decls += "SHARED int split_last;\n";
  k.shared_bytes += kSplitFlagBytes;
  for (const auto& [kind, storage, elements] :
       {std::tuple{Scratch::kPartials, Storage::kF32, partial_floats}, std::tuple{Scratch::kCounters, Storage::kI32, tiles}}) {
    Arg a;
    a.scratch = kind;
    a.storage = storage;
    a.elements = elements;
    a.written = true;
    k.args.push_back(a);
  }
}

std::string operand_index(const Operand& op, const std::string& pos) {
  if (op.remap_shape.empty()) return pos;
  std::string e;
  for (size_t d = 0; d < op.remap_shape.size(); ++d) e = add_term(e, coord(op.remap_shape, d, pos), op.remap_strides[d]);
  return e.empty() ? "0" : e;
}

namespace {

// resolve_operand's DequantizeLinear (at group position `pos`): its quantized input as the operand.
Result<Operand> dequantized_operand(const GenContext& c, const Node& reader, const Node& p, size_t pos,
                                    std::vector<size_t>& folded) {
  const TensorId y = p.outputs[0], x = p.inputs[0];
  auto no = [&](const std::string& why) {
    return c.unsupported(reader, fmt::format("the fused DequantizeLinear \"{}\" {}", p.name, why));
  };
  if (escapes(c, y)) return no("is also needed outside the kernel, which a folded dequantize never stores");
  for (size_t q = 0; q < c.k.nodes.size(); ++q) {
    const Node& n = c.node(q);
    if (&n == &reader || q == pos) continue;
    for (TensorId in : n.inputs) {
      if (in != kNoTensor && c.root(in) == c.root(y)) return no(fmt::format("is also read by node \"{}\" in the kernel", n.name));
    }
  }
  for (size_t k = 0; k < p.inputs.size() && k < 3; ++k) {
    if (p.inputs[k] == kNoTensor) continue;
    const int xp = c.idx.producer[static_cast<size_t>(c.root(p.inputs[k]))];
    for (int node : c.k.nodes) {
      if (node == xp) return no("reads a tensor computed inside the kernel");
    }
  }
  const DType xt = c.tensor(x).dtype;
  if (xt != DType::kInt8 && xt != DType::kUInt8) return no(fmt::format("reads {}; folded dequantizes read int8 or uint8", dtype_name(xt)));
  if (c.tensor(y).shape != c.tensor(x).shape || c.root(x) != x) return no("reads a view");
  Operand op;
  op.tensor = x;
  op.shape = c.tensor(x).shape;
  op.strides = strides_of(op.shape);
  op.deq_scale = p.inputs.size() > 1 ? p.inputs[1] : kNoTensor;
  op.deq_zero = p.inputs.size() > 2 ? p.inputs[2] : kNoTensor;
  if (op.deq_scale == kNoTensor) return no("has no scale");
  std::string why;
  const auto idx = quant_param_index(c, p, 1, op.shape, "p", &why);
  if (!idx || idx->empty()) return no(why.empty() ? "has a scale the GEMM cannot index" : why);
  if (*idx != "0") {
    auto rank = static_cast<int64_t>(op.shape.size());
    int64_t axis = p.attr("axis") ? p.attr("axis")->i : 1;
    if (axis < 0) axis += rank;
    op.deq_dim = op.shape[static_cast<size_t>(axis)];
    for (auto d = static_cast<size_t>(axis) + 1; d < op.shape.size(); ++d) op.deq_inner *= op.shape[d];
  }
  folded.push_back(pos);
  return op;
}

}  // namespace

Result<Operand> resolve_operand(const GenContext& c, const Node& reader, TensorId t, std::vector<size_t>& folded,
                                bool dequant) {
  Operand op;
  op.tensor = t;
  op.shape = c.tensor(t).shape;
  op.strides = strides_of(op.shape);
  const TensorId r = c.root(t);
  const int prod = c.idx.producer[static_cast<size_t>(r)];
  auto in_group = [&](int node) -> int {
    for (size_t p = 0; p < c.k.nodes.size(); ++p) {
      if (c.k.nodes[p] == node) return static_cast<int>(p);
    }
    return -1;
  };
  const int pos = prod < 0 ? -1 : in_group(prod);
  if (pos < 0) return op;
  const Node& p = c.node(static_cast<size_t>(pos));
  if (dequant && p.op_type == "DequantizeLinear") return dequantized_operand(c, reader, p, static_cast<size_t>(pos), folded);
  if (p.op_type != "Transpose") {
    return c.unsupported(reader, fmt::format("its input \"{}\" is computed inside the same kernel by node \"{}\" ({}), "
                                             "which this generator cannot fold into its operand loads; plan them as "
                                             "separate kernels",
                                             c.tensor(t).name, p.name, p.op_type));
  }
  const TensorId y = p.outputs[0];
  const bool reshaped = c.tensor(y).shape != op.shape;  // read through a view (views keep flat order)
  if (escapes(c, y)) {
    return c.unsupported(reader, fmt::format("the output of the fused Transpose \"{}\" is also needed outside the "
                                             "kernel, which a folded transpose never stores",
                                             p.name));
  }
  for (size_t q = 0; q < c.k.nodes.size(); ++q) {
    const Node& n = c.node(q);
    if (&n == &reader || static_cast<int>(q) == pos) continue;
    for (TensorId in : n.inputs) {
      if (in != kNoTensor && c.root(in) == c.root(y)) {
        return c.unsupported(reader, fmt::format("the fused Transpose \"{}\" is also read by node \"{}\" in the kernel",
                                                 p.name, n.name));
      }
    }
  }
  const TensorId x = p.inputs[0];
  const int xprod = c.idx.producer[static_cast<size_t>(c.root(x))];
  if (xprod >= 0 && in_group(xprod) >= 0) {
    return c.unsupported(reader, fmt::format("the fused Transpose \"{}\" reads a tensor computed inside the kernel", p.name));
  }
  const Shape& xs = c.tensor(x).shape;
  std::vector<int64_t> perm;
  if (const Attribute* a = p.attr("perm"); a && !a->ints.empty()) {
    perm = a->ints;
  } else {
    for (size_t d = xs.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != xs.size() || perm.size() != c.tensor(y).shape.size()) {
    return c.unsupported(reader, fmt::format("the fused Transpose \"{}\" has perm of {} axes for a rank-{} input", p.name,
                                             perm.size(), xs.size()));
  }
  const auto xst = strides_of(xs);
  std::vector<int64_t> permuted(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    const int64_t a = perm[d] < 0 ? perm[d] + static_cast<int64_t>(xs.size()) : perm[d];
    if (a < 0 || a >= static_cast<int64_t>(xs.size())) {
      return c.unsupported(reader, fmt::format("the fused Transpose \"{}\" has perm value {} out of range", p.name, perm[d]));
    }
    permuted[d] = xst[static_cast<size_t>(a)];
  }
  op.tensor = x;
  if (reshaped) {
    op.remap_shape = c.tensor(y).shape;
    op.remap_strides = permuted;
  } else {
    op.strides = permuted;
  }
  if (std::find(folded.begin(), folded.end(), static_cast<size_t>(pos)) == folded.end()) {
    folded.push_back(static_cast<size_t>(pos));
  }
  return op;
}

Result<std::string> gemm_epilogue(const GenContext& c, ArgList& args, size_t anchor_pos, const std::vector<size_t>& folded,
                                  const std::string& v, const std::string& o) {
  const Node& a = c.node(anchor_pos);
  const TensorId y = a.outputs[0];
  const Shape& ys = c.tensor(y).shape;
  auto is_folded = [&](size_t p) { return std::find(folded.begin(), folded.end(), p) != folded.end(); };
  // An inference BatchNormalization reading the anchor's output (batchnorm-fold).
  int bn_pos = -1;
  for (size_t p = 0; p < c.k.nodes.size(); ++p) {
    const Node& n = c.node(p);
    if (p == anchor_pos || is_folded(p) || n.op_type != "BatchNormalization") continue;
    if (!n.inputs.empty() && n.inputs[0] != kNoTensor && c.root(n.inputs[0]) == c.root(y)) {
      bn_pos = static_cast<int>(p);
      break;
    }
  }
  std::string code;
  size_t new_anchor = anchor_pos;
  if (bn_pos >= 0) {
    const Node& bn = c.node(static_cast<size_t>(bn_pos));
    if (const Attribute* tm = bn.attr("training_mode"); tm && tm->i != 0) {
      return c.unsupported(bn, "training-mode BatchNormalization cannot be folded into an epilogue");
    }
    if (bn.inputs.size() < 5) return c.unsupported(bn, "BatchNormalization needs scale, B, mean and var inputs");
    for (size_t k = 1; k < bn.outputs.size(); ++k) {
      if (bn.outputs[k] != kNoTensor && escapes(c, bn.outputs[k])) {
        return c.unsupported(bn, "the running mean/var outputs of BatchNormalization are not computed by the epilogue");
      }
    }
    if (c.tensor(bn.inputs[0]).shape != ys || ys.size() < 2) {
      return c.unsupported(bn, fmt::format("folds only a BatchNormalization of the {} output itself (rank >= 2)", a.op_type));
    }
    for (size_t p = 0; p < c.k.nodes.size(); ++p) {
      const Node& n = c.node(p);
      if (p == anchor_pos || static_cast<int>(p) == bn_pos || is_folded(p)) continue;
      for (TensorId in : n.inputs) {
        if (in != kNoTensor && c.root(in) == c.root(y)) {
          return c.unsupported(n, fmt::format("reads the output of \"{}\" beside the folded BatchNormalization \"{}\"",
                                              a.name, bn.name));
        }
      }
    }
    if (escapes(c, y)) code += "        " + args.store(y, o, v) + "\n";
    const double eps = bn.attr("epsilon") ? bn.attr("epsilon")->f : 1e-5;
    auto ld = [&](size_t i) {
      const TensorId t = bn.inputs[i];
      return "float(" + args.load(t, c.tensor(t).elements() <= 1 ? "0" : "bnc") + ")";
    };
    code += fmt::format("        {{ int bnc = {}; {} = ({} - {}) * ({} * rsqrtf({} + {})) + {}; }}\n", coord(ys, 1, o), v, v,
                        ld(3), ld(1), ld(4), float_lit(eps), ld(2));
    new_anchor = static_cast<size_t>(bn_pos);
  }
  PlanKernel sub = c.k;
  sub.nodes.clear();
  sub.anchor = -1;
  for (size_t p = 0; p < c.k.nodes.size(); ++p) {
    if (is_folded(p) || (bn_pos >= 0 && p == anchor_pos)) continue;
    if (p == new_anchor) sub.anchor = static_cast<int>(sub.nodes.size());
    sub.nodes.push_back(c.k.nodes[p]);
  }
  const GenContext c2{c.g, c.idx, sub, c.opts};
  auto tail = elementwise_tail(c2, args, sub.anchor, v, o, ys);
  if (!tail) return tail.error();
  return code + *tail;
}

}  // namespace gpusim::codegen
