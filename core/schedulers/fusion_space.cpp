// The fusion space: the eager plan, the fusion passes that find candidate merges, and fast
// scoring of decisions with cached kernel costs. See include/gpusim/scheduler.h.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>

#include "gpusim/cancel.h"
#include "gpusim/patterns.h"
#include "gpusim/scheduler.h"
#include "core/schedulers/registry.h"

namespace gpusim {
namespace {

enum Kind { kPointwise = 0, kMainLoop = 1, kRowwise = 2 };

Kind kind_of(NodeKind k) {
  switch (k) {
    case NodeKind::kMainLoop: return kMainLoop;
    case NodeKind::kRowwise: return kRowwise;
    default: return kPointwise;
  }
}

// Order-free hash of a group: the sum of a mixed value per member.
uint64_t mix(int k) { return schedulers::mix(static_cast<uint64_t>(k)); }

// The distinct groups a merge candidate's kernels are in, and whether one kernel may hold them
// all: one main loop, or the two of an attention; no GEMM and row-wise pass together; data movement
// folded into an element-wise reader (codegen's index math in its loads) in a kernel with no main
// loop and no row-wise pass (a GEMM reads only a folded Transpose, through transpose-into-gemm). Flags per group and candidate: 1 attention, 2 a folded data movement.
// A fused kernel holds at most kMaxFusedKernels eager kernels (inductor's max_fusion_size is the
// same 64 nodes): a generated kernel of thousands of ops would take longer to compile than to run,
// and the cap keeps the plan search linear on long chains (each group is costed in O(its size)).
constexpr int kMaxFusedKernels = 64;

struct Merge {
  int roots[16];
  int n = 0, mains = 0, rows = 0, size = 0;
  uint8_t flags = 0;
  bool legal() const {
    const bool attention = (flags & 1) != 0, folds = (flags & 2) != 0;
    return kinds_fuse(mains, rows, attention) && !(folds && (rows > 0 || mains > 0 || attention)) &&
           size <= kMaxFusedKernels;
  }
};

template <typename Find>
Merge merge_of(const FusionCandidate& fc, uint8_t flags, const std::vector<int>& mains, const std::vector<int>& rows,
               const std::vector<uint8_t>& grp_flags, const std::vector<int>& sizes, Find&& find) {
  Merge m;
  m.flags = flags;
  for (int k : fc.kernels) {
    const int rt = find(k);
    if (std::find(m.roots, m.roots + m.n, rt) != m.roots + m.n || m.n == 16) continue;
    m.roots[m.n++] = rt;
    m.mains += mains[static_cast<size_t>(rt)];
    m.rows += rows[static_cast<size_t>(rt)];
    m.size += sizes[static_cast<size_t>(rt)];
    m.flags |= grp_flags[static_cast<size_t>(rt)];
  }
  return m;
}

}  // namespace

FusionSpace::FusionSpace(const Graph& g, const Target& target) : g_(g), target_(target), dev_(target_.device) {
  idx_ = index_graph(g);
  eager_ = eager_plan(g, target_, idx_);
  kernel_of_node_.assign(g.nodes.size(), -1);
  for (size_t k = 0; k < eager_.kernels.size(); ++k) kernel_of_node_[static_cast<size_t>(eager_.kernels[k].nodes[0])] = static_cast<int>(k);
  const GpuProfile& gpu = target_.gpu();
  launch_us_ = gpu.launch.overhead_us * gpu.efficiency.launch;
  kind_.resize(eager_.kernels.size());
  for (size_t k = 0; k < eager_.kernels.size(); ++k) {
    kind_[k] = static_cast<uint8_t>(kind_of(idx_.kind[static_cast<size_t>(eager_.kernels[k].nodes[0])]));
  }
  find_candidates();
  fold_source_.assign(eager_.kernels.size(), 0);
  for (const FusionCandidate& c : cands_) {
    cand_attention_.push_back(c.pass == "attention" ? 1 : (c.pass == "fold-data-movement" ? 2 : 0));
    cand_recompute_.push_back(c.pass == "recompute");
    if (c.pass == "fold-data-movement") fold_source_[static_cast<size_t>(c.kernels[0])] = 1;
  }
  single_us_.resize(eager_.kernels.size());
  for (size_t k = 0; k < eager_.kernels.size(); ++k) {
    if ((k & 255) == 0) check_cancelled();
    single_us_[k] = cached({static_cast<int>(k)}).us;
  }
}

void FusionSpace::find_candidates() {
  // The passes are patterns (include/gpusim/patterns.h), matched by the matcher the runtimes'
  // lowerings use; each eager kernel is one node, so a match's nodes name its kernels.
  const PatternMatcher pm(g_, idx_);
  const size_t nk = eager_.kernels.size();
  auto node_of = [&](size_t k) { return eager_.kernels[k].nodes[0]; };
  auto kernel_of = [&](int n) { return kernel_of_node_[static_cast<size_t>(n)]; };
  auto add = [&](const std::string& pass, std::vector<int> ks) { cands_.push_back({pass, std::move(ks)}); };
  // A producer and its sole consumer: the first pass that matches the pair names the candidate.
  // Folds of data movement come after every other merge (unite() applies candidates in order): a
  // kernel that takes a fold can no longer join a GEMM, a row-wise pass or an attention, so a fold
  // never takes a kernel those passes would have merged (a head split's transpose feeding the
  // attention's K^T, a GEGLU slice whose product feeds a LayerNorm).
  std::vector<FusionCandidate> folds;
  for (size_t ku = 0; ku < nk; ++ku) {
    for (const Pattern& pass : planner_pair_passes()) {
      auto m = pm.match_at(pass, node_of(ku));
      if (!m || m->nodes.size() != 2) continue;
      // A DequantizeLinear folds into a GEMM's loads when it reads stored values (a weight, a graph
      // input): one fed by a kernel would pull that kernel's nodes in front of the main loop,
      // which no generator builds (the QDQ activation pair stays an elementwise kernel).
      if (pass.name == "dequantize-into-gemm") {
        const Node& dq = g_.nodes[static_cast<size_t>(m->nodes[0])];
        if (dq.inputs.empty() || idx_.producer[static_cast<size_t>(idx_.root[static_cast<size_t>(dq.inputs[0])])] >= 0) continue;
      }
      std::vector<int> ks = {kernel_of(m->nodes[0]), kernel_of(m->nodes[1])};
      if (pass.name == "fold-data-movement") {
        folds.push_back({pass.name, std::move(ks)});
      } else {
        add(pass.name, std::move(ks));
      }
      break;
    }
  }
  // Attention: MatMul(Q, K^T) -> elementwise* -> Softmax -> elementwise* -> MatMul(P, V), each step
  // the previous one's only reader; a Transpose producing K^T for it alone joins too.
  for (size_t ku = 0; ku < nk; ++ku) {
    auto m = pm.match_at(planner_attention_pass(), node_of(ku));
    if (!m) continue;
    std::vector<int> chain;
    for (int n : m->nodes) chain.push_back(kernel_of(n));
    const Node& qk = g_.nodes[static_cast<size_t>(node_of(ku))];
    if (qk.inputs.size() > 1) {
      const int prod = idx_.producer[static_cast<size_t>(idx_.root[static_cast<size_t>(qk.inputs[1])])];
      if (prod >= 0) {
        const int pk = kernel_of_node_[static_cast<size_t>(prod)];
        if (pk >= 0 && g_.nodes[static_cast<size_t>(prod)].op_type == "Transpose" &&
            pm.sole_consumer(prod) == node_of(ku)) {
          chain.insert(chain.begin(), pk);
        }
      }
    }
    add("attention", chain);
  }
  for (FusionCandidate& fc : folds) cands_.push_back(std::move(fc));
  // Recompute: a cheap elementwise op read by 2-4 pointwise or row-wise kernels (not a GEMM, whose
  // tiles would recompute it many times) can run inside each of them instead of being stored.
  for (size_t ku = 0; ku < nk; ++ku) {
    const int n = node_of(ku);
    const Node& a = g_.nodes[static_cast<size_t>(n)];
    if (pm.kind(n) != NodeKind::kPointwise || op_class(a.domain, a.op_type) != OpClass::kElementwise) continue;
    std::vector<int> users;
    bool ok = true;
    for (TensorId t : a.outputs) {
      if (t == kNoTensor) continue;
      if (pm.escapes(t)) ok = false;
      for (int j : pm.readers(t)) {
        const int kj = kernel_of(j);
        if (std::find(users.begin(), users.end(), kj) == users.end()) users.push_back(kj);
      }
    }
    if (!ok || users.size() < 2 || users.size() > 4) continue;
    for (int j : users) ok = ok && kind_[static_cast<size_t>(j)] != kMainLoop;
    if (!ok) continue;
    std::vector<int> ks = {static_cast<int>(ku)};
    ks.insert(ks.end(), users.begin(), users.end());
    add("recompute", ks);
  }
}

int FusionSpace::root(int k) const {
  while (parent_[static_cast<size_t>(k)] != k) {
    parent_[static_cast<size_t>(k)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(k)])];
    k = parent_[static_cast<size_t>(k)];
  }
  return k;
}

void FusionSpace::unite(const Decision& d) const {
  const size_t nk = eager_.kernels.size();
  parent_.resize(nk);
  mains_.resize(nk);
  rows_.resize(nk);
  sizes_.assign(nk, 1);
  attention_.assign(nk, 0);
  merged_.assign(nk, 0);
  std::iota(parent_.begin(), parent_.end(), 0);
  for (size_t k = 0; k < nk; ++k) {
    mains_[k] = kind_[k] == kMainLoop;
    rows_[k] = kind_[k] == kRowwise;
  }
  recomp_.clear();
  for (size_t c = 0; c < cands_.size() && c < d.size(); ++c) {
    if (!d[c]) continue;
    const FusionCandidate& fc = cands_[c];
    if (cand_recompute_[c]) {
      recomp_.push_back(c);  // decided below, once the merges are known
      continue;
    }
    const Merge mg = merge_of(fc, cand_attention_[c], mains_, rows_, attention_, sizes_, [&](int k) { return root(k); });
    if (!mg.legal()) continue;
    const int* roots = mg.roots;
    for (int i = 1; i < mg.n; ++i) parent_[static_cast<size_t>(roots[i])] = roots[0];
    if (mg.n > 1) merged_[static_cast<size_t>(roots[0])] = 1;
    mains_[static_cast<size_t>(roots[0])] = mg.mains;
    rows_[static_cast<size_t>(roots[0])] = mg.rows;
    sizes_[static_cast<size_t>(roots[0])] = mg.size;
    attention_[static_cast<size_t>(roots[0])] = mg.flags;
  }
  // Recomputes: the producer must still be a kernel of its own, and no recompute may feed another.
  removed_.assign(nk, 0);
  copied_.assign(nk, 0);
  size_t kept = 0;
  for (size_t i = 0; i < recomp_.size(); ++i) {
    const FusionCandidate& fc = cands_[recomp_[i]];
    const int p = fc.kernels[0];
    bool ok = root(p) == p && !merged_[static_cast<size_t>(p)] && !removed_[static_cast<size_t>(p)] &&
              !copied_[static_cast<size_t>(p)];
    // A kernel that reads folded data movement through index math cannot take a recomputed value
    // at another index: none is copied into it.
    for (size_t u = 1; ok && u < fc.kernels.size(); ++u) {
      ok = !removed_[static_cast<size_t>(fc.kernels[u])] && !(attention_[static_cast<size_t>(root(fc.kernels[u]))] & 2);
    }
    if (!ok) continue;
    removed_[static_cast<size_t>(p)] = 1;
    for (size_t u = 1; u < fc.kernels.size(); ++u) copied_[static_cast<size_t>(fc.kernels[u])] = 1;
    recomp_[kept++] = recomp_[i];
  }
  recomp_.resize(kept);
}

std::vector<int> FusionSpace::recomputed_of(const std::vector<int>& group) const {
  const int nk = static_cast<int>(eager_.kernels.size());
  std::vector<int> nodes;
  for (int v : group) {
    if (v >= nk) nodes.push_back(eager_.kernels[static_cast<size_t>(v - nk)].nodes[0]);
  }
  return nodes;
}

std::vector<std::vector<int>> FusionSpace::groups(const Decision& d) const {
  unite(d);
  const size_t nk = eager_.kernels.size();
  std::vector<std::vector<int>> by_root(nk);
  for (size_t k = 0; k < nk; ++k) {
    if (!removed_[k]) by_root[static_cast<size_t>(root(static_cast<int>(k)))].push_back(static_cast<int>(k));
  }
  for (size_t c : recomp_) {
    const FusionCandidate& fc = cands_[c];
    for (size_t u = 1; u < fc.kernels.size(); ++u) {
      auto& grp = by_root[static_cast<size_t>(root(fc.kernels[u]))];
      const int copy = fc.kernels[0] + static_cast<int>(nk);
      if (std::find(grp.begin(), grp.end(), copy) == grp.end()) grp.push_back(copy);
    }
  }
  std::vector<std::vector<int>> out;
  for (auto& grp : by_root) {
    if (grp.empty()) continue;
    std::sort(grp.begin(), grp.end());
    out.push_back(std::move(grp));
  }
  // In execution order: by the last eager kernel each group contains.
  auto last = [&](const std::vector<int>& grp) {
    int m = -1;
    for (int v : grp) m = v < static_cast<int>(nk) ? std::max(m, v) : m;
    return m;
  };
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return last(a) < last(b); });
  return out;
}

std::vector<int> FusionSpace::nodes_of(const std::vector<int>& group) const {
  const int nk = static_cast<int>(eager_.kernels.size());
  std::vector<int> nodes;
  for (int v : group) nodes.push_back(eager_.kernels[static_cast<size_t>(v >= nk ? v - nk : v)].nodes[0]);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

const FusionSpace::Cached& FusionSpace::cached(const std::vector<int>& group) const {
  uint64_t key = 0;
  for (int k : group) key += mix(k);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Cached c{};
  const std::vector<int> nodes = nodes_of(group);
  int mains = 0, anchor = 0, best_rank = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = g_.nodes[static_cast<size_t>(nodes[i])];
    const Kind kd = kind_of(idx_.kind[static_cast<size_t>(nodes[i])]);
    mains += kd == kMainLoop;
    // Data movement never anchors: a transpose or slice folded into a reader's kernel is read
    // through that kernel's index math.
    const bool moves = op_class(n.domain, n.op_type) == OpClass::kDataMovement;
    const int rank = kd == kMainLoop ? 3 : (kd == kRowwise ? 2 : (moves ? 0 : 1));
    if (rank > best_rank) {
      best_rank = rank;
      anchor = static_cast<int>(i);
    }
  }
  c.attention = mains == 2;
  if (c.attention) {  // anchor the attention on its first MatMul
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (g_.nodes[static_cast<size_t>(nodes[i])].op_type == "MatMul") {
        anchor = static_cast<int>(i);
        break;
      }
    }
  }
  c.anchor = anchor;
  c.work = group_work(g_, idx_, nodes, anchor, c.attention, recomputed_of(group));
  c.tile = best_generated_tile(c.work, dev_, target_.capability());
  const KernelCost cost = kernel_cost(c.work, c.tile, dev_);
  // A group no tile can run (too much shared memory, say) is not a legal fusion: infinite cost.
  c.us = cost.feasible ? cost.total_us : std::numeric_limits<double>::infinity();
  return cache_.emplace(std::move(key), std::move(c)).first->second;
}

void FusionSpace::remember(const Decision& d, std::shared_ptr<State> s) const {
  std::string key(d.begin(), d.end());
  if (states_.count(key)) return;
  // At most 64 states, and at most ~16 M union-find entries in all (a few on a 1 M-node graph).
  const size_t limit = std::clamp<size_t>((size_t{1} << 24) / std::max<size_t>(1, eager_.kernels.size()), 2, 64);
  if (state_order_.size() >= limit) {  // drop the oldest half
    for (size_t i = 0; i < state_order_.size() / 2; ++i) states_.erase(state_order_[i]);
    state_order_.erase(state_order_.begin(), state_order_.begin() + static_cast<long>(state_order_.size() / 2));
  }
  state_order_.push_back(key);
  states_.emplace(std::move(key), std::move(s));
}

// The time of group `r` in state `s` (a root), at least the launch overhead.
double FusionSpace::group_cost(State& s, int r) const {
  const auto ru = static_cast<size_t>(r);
  if (s.size[ru] == 1) return std::max(single_us_[ru], launch_us_);
  if (auto it = cache_.find(s.hash[ru]); it != cache_.end()) return std::max(it->second.us, launch_us_);
  std::vector<int> members;
  members_of(s, r, members);
  std::sort(members.begin(), members.end());
  return std::max(cached(members).us, launch_us_);
}

void FusionSpace::members_of(const State& s, int r, std::vector<int>& out) const {
  int k = r;
  do {
    out.push_back(k);
    if (auto it = s.copies.find(k); it != s.copies.end()) {
      for (int c : it->second) {
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
    }
    k = s.next[static_cast<size_t>(k)];
  } while (k != r);
}

void FusionSpace::trim_cache() const {
  // Scoring meets one new group per candidate tried: the cache is emptied between scoring calls
  // once it is large, so a million-node graph's search keeps bounded memory (a dropped group is
  // costed again if it comes back). Never inside a call: a scoring pass relies on what it found
  // cached, and build() holds references into the cache.
  if (cache_.size() >= kScoringCacheLimit) cache_.clear();
}

double FusionSpace::score_us(const Decision& d) const {
  trim_cache();
  // An exact match, or the parent of this decision (the last candidate taken removed).
  size_t last = d.size();
  for (size_t c = d.size(); c-- > 0;) {
    if (d[c]) {
      last = c;
      break;
    }
  }
  if (auto it = states_.find(std::string(d.begin(), d.end())); it != states_.end()) return it->second->total;
  if (last == d.size()) return full_score(d);
  Decision parent_d = d;
  parent_d[last] = 0;
  auto it = states_.find(std::string(parent_d.begin(), parent_d.end()));
  if (it == states_.end()) return full_score(d);
  // `last` comes after every other candidate taken, so the full evaluation would apply it last
  // too (recompute candidates, listed after all merges, are applied after them): same result.
  auto s = std::make_shared<State>(*it->second);
  const FusionCandidate& fc = cands_[last];
  const int nk = static_cast<int>(eager_.kernels.size());
  auto find = [&](int k) {
    int r = k;
    while (s->parent[static_cast<size_t>(r)] != r) r = s->parent[static_cast<size_t>(r)];
    while (s->parent[static_cast<size_t>(k)] != r) {
      const int next = s->parent[static_cast<size_t>(k)];
      s->parent[static_cast<size_t>(k)] = r;
      k = next;
    }
    return r;
  };
  if (!cand_recompute_[last]) {
    const Merge mg = merge_of(fc, cand_attention_[last], s->mains, s->rows, s->attention, s->size, find);
    const int* roots = mg.roots;
    const int n = mg.n;
    if (mg.legal() && n > 1) {
      const auto r0 = static_cast<size_t>(roots[0]);
      for (int i = 0; i < n; ++i) s->total -= s->cost[static_cast<size_t>(roots[i])];
      for (int i = 1; i < n; ++i) {
        const auto ri = static_cast<size_t>(roots[i]);
        s->parent[ri] = roots[0];
        std::swap(s->next[r0], s->next[ri]);  // the two circular member lists become one
        s->hash[r0] += s->hash[ri];
        s->size[r0] += s->size[ri];
      }
      s->merged[r0] = 1;
      s->mains[r0] = mg.mains;
      s->rows[r0] = mg.rows;
      s->attention[r0] = mg.flags;
      s->cost[r0] = group_cost(*s, roots[0]);
      s->total += s->cost[r0];
    }
  } else {
    const int p = fc.kernels[0];
    const auto pu = static_cast<size_t>(p);
    bool ok = find(p) == p && !s->merged[pu] && !s->removed[pu] && !s->copied[pu];
    for (size_t u = 1; ok && u < fc.kernels.size(); ++u) {
      ok = !s->removed[static_cast<size_t>(fc.kernels[u])] && !(s->attention[static_cast<size_t>(find(fc.kernels[u]))] & 2);
    }
    if (ok) {
      s->removed[pu] = 1;
      s->total -= s->cost[pu];
      for (size_t u = 1; u < fc.kernels.size(); ++u) {
        s->copied[static_cast<size_t>(fc.kernels[u])] = 1;
        s->copies[fc.kernels[u]].push_back(p + nk);
      }
      s->recomp.push_back(last);
      int done[16], nd = 0;
      for (size_t u = 1; u < fc.kernels.size(); ++u) {
        const int r = find(fc.kernels[u]);
        if (std::find(done, done + nd, r) != done + nd || nd == 16) continue;
        done[nd++] = r;
        const auto ru = static_cast<size_t>(r);
        s->total -= s->cost[ru];
        s->hash[ru] += mix(p + nk);
        ++s->size[ru];
        s->cost[ru] = group_cost(*s, r);
        s->total += s->cost[ru];
      }
    }
  }
  const double total = s->total;
  if (!d.back()) remember(d, std::move(s));
  return total;
}

double FusionSpace::full_score(const Decision& d) const {
  // Children add a candidate after the last one taken: with the last one taken there are none, and
  // the state need not be kept (the reusable scratch state serves).
  if (d.empty() || d.back()) return fill_state(d, scratch_);
  auto fresh = std::make_shared<State>();
  const double t = fill_state(d, *fresh);
  remember(d, std::move(fresh));
  return t;
}

double FusionSpace::fill_state(const Decision& d, State& st) const {
  check_cancelled();
  // Group hashes from the union-find; a group's members are collected only on a cache miss. The
  // union-find (moved in, O(1)) and each group's cost are kept in `st`.
  unite(d);
  const size_t nk = eager_.kernels.size();
  st.hash.assign(nk, 0);
  st.size.assign(nk, 0);
  st.cost.assign(nk, 0.0);
  for (size_t k = 0; k < nk; ++k) {
    if (removed_[k]) continue;
    const auto r = static_cast<size_t>(root(static_cast<int>(k)));
    st.hash[r] += mix(static_cast<int>(k));
    ++st.size[r];
  }
  for (size_t c : recomp_) {  // a recomputed copy joins each reader's group once
    const FusionCandidate& fc = cands_[c];
    for (size_t u = 1; u < fc.kernels.size(); ++u) {
      const auto r = static_cast<size_t>(root(fc.kernels[u]));
      bool seen = false;
      for (size_t v = 1; v < u; ++v) seen = seen || root(fc.kernels[v]) == static_cast<int>(r);
      if (seen) continue;
      st.hash[r] += mix(fc.kernels[0] + static_cast<int>(nk));
      ++st.size[r];
    }
  }
  // The union-find moves into the state (O(1)); unite() refills the old buffers next time.
  st.parent.swap(parent_);
  st.mains.swap(mains_);
  st.rows.swap(rows_);
  st.attention.swap(attention_);
  st.merged.swap(merged_);
  st.removed.swap(removed_);
  st.copied.swap(copied_);
  st.recomp.swap(recomp_);
  // Each group's members as a circular list through its root, and the copies each reader holds:
  // a group the cache does not know is collected in O(its size), not O(kernels).
  st.next.resize(nk);
  std::iota(st.next.begin(), st.next.end(), 0);
  for (size_t k = 0; k < nk; ++k) {
    if (st.removed[k]) continue;
    int r = static_cast<int>(k);
    while (st.parent[static_cast<size_t>(r)] != r) r = st.parent[static_cast<size_t>(r)];
    if (r == static_cast<int>(k)) continue;
    st.next[k] = st.next[static_cast<size_t>(r)];
    st.next[static_cast<size_t>(r)] = static_cast<int>(k);
  }
  st.copies.clear();
  for (size_t c : st.recomp) {
    for (size_t u = 1; u < cands_[c].kernels.size(); ++u) {
      st.copies[cands_[c].kernels[u]].push_back(cands_[c].kernels[0] + static_cast<int>(nk));
    }
  }
  double t = 0;
  for (size_t r = 0; r < nk; ++r) {
    if (st.parent[r] != static_cast<int>(r) || st.removed[r]) continue;
    st.cost[r] = group_cost(st, static_cast<int>(r));
    t += st.cost[r];
  }
  st.total = t;
  return t;
}

std::vector<double> FusionSpace::score_flips(const Decision& base, const std::vector<size_t>& flips) const {
  trim_cache();
  State& st = flip_state_;
  const double total = fill_state(base, st);
  const size_t nk = eager_.kernels.size();
  auto find = [&](int k) {
    while (st.parent[static_cast<size_t>(k)] != k) {
      st.parent[static_cast<size_t>(k)] = st.parent[static_cast<size_t>(st.parent[static_cast<size_t>(k)])];
      k = st.parent[static_cast<size_t>(k)];
    }
    return k;
  };
  std::vector<int> members;
  // The cost of a new group, its cache key `hash`; `gather` fills `members` only on a miss.
  auto cost_of = [&](uint64_t hash, auto&& gather) -> double {
    if (auto it = cache_.find(hash); it != cache_.end()) return std::max(it->second.us, launch_us_);
    members.clear();
    gather();
    std::sort(members.begin(), members.end());
    return std::max(cached(members).us, launch_us_);
  };
  std::vector<double> out;
  out.reserve(flips.size());
  for (size_t c : flips) {
    if ((out.size() & 255) == 0) check_cancelled();
    if (c >= cands_.size() || (c < base.size() && base[c])) {
      out.push_back(total);
      continue;
    }
    const FusionCandidate& fc = cands_[c];
    double t = total;
    if (!cand_recompute_[c]) {
      // As unite() would apply it after the base's fusions: merge its kernels' groups if legal.
      const Merge mg = merge_of(fc, cand_attention_[c], st.mains, st.rows, st.attention, st.size, find);
      const int* roots = mg.roots;
      const int n = mg.n;
      if (mg.legal() && n > 1) {
        uint64_t hash = 0;
        for (int i = 0; i < n; ++i) {
          t -= st.cost[static_cast<size_t>(roots[i])];
          hash += st.hash[static_cast<size_t>(roots[i])];
        }
        t += cost_of(hash, [&] {
          for (int i = 0; i < n; ++i) members_of(st, roots[i], members);
        });
      }
    } else {
      // A recompute: the producer must be a kernel of its own, its readers still present.
      const int p = fc.kernels[0];
      const auto pu = static_cast<size_t>(p);
      bool ok = find(p) == p && !st.merged[pu] && !st.removed[pu] && !st.copied[pu];
      for (size_t u = 1; ok && u < fc.kernels.size(); ++u) {
        ok = !st.removed[static_cast<size_t>(fc.kernels[u])] && !(st.attention[static_cast<size_t>(find(fc.kernels[u]))] & 2);
      }
      if (ok) {
        t -= st.cost[pu];
        const int copy = p + static_cast<int>(nk);
        int done[16], nd = 0;
        for (size_t u = 1; u < fc.kernels.size(); ++u) {
          const int r = find(fc.kernels[u]);
          if (std::find(done, done + nd, r) != done + nd || nd == 16) continue;
          done[nd++] = r;
          const uint64_t hash = st.hash[static_cast<size_t>(r)] + mix(copy);
          t += cost_of(hash, [&] {
            members_of(st, r, members);
            members.push_back(copy);
          }) - st.cost[static_cast<size_t>(r)];
        }
      }
    }
    out.push_back(t);
  }
  return out;
}

Plan FusionSpace::build(const Decision& d, SchedulerKind scheduler) const {
  Plan p;
  p.model = g_.source_path;
  p.gpu = dev_.profile ? dev_.profile->name : "";
  p.allow_tf32 = dev_.allow_tf32;
  p.scheduler = scheduler;
  const auto grps = groups(d);
  std::vector<int> group_of(eager_.kernels.size(), -1);
  for (size_t i = 0; i < grps.size(); ++i) {
    for (int k : grps[i]) {
      if (k < static_cast<int>(group_of.size())) group_of[static_cast<size_t>(k)] = static_cast<int>(i);
    }
    const Cached& c = cached(grps[i]);
    PlanKernel pk;
    pk.nodes = nodes_of(grps[i]);
    pk.recomputed = recomputed_of(grps[i]);
    pk.anchor = c.anchor;
    pk.tile = c.tile;
    if (c.attention) pk.fusions.push_back("attention");
    classify_kernel(g_, idx_, pk);
    p.kernels.push_back(std::move(pk));
  }
  // Explain each fusion taken: what it merged and what it saved. A fusion is priced against the
  // groups the fusions before it built (marginal), so the savings add up to the eager kernels' time
  // minus the plan's instead of counting an op shared by two fusions twice. Listed by time saved.
  std::vector<std::pair<double, std::string>> why;
  std::vector<int> root(eager_.kernels.size());
  std::iota(root.begin(), root.end(), 0);
  std::vector<std::vector<int>> members(eager_.kernels.size());
  for (size_t k = 0; k < members.size(); ++k) members[k] = {static_cast<int>(k)};
  const auto find_root = [&](int k) {
    while (root[static_cast<size_t>(k)] != k) k = root[static_cast<size_t>(k)] = root[static_cast<size_t>(root[static_cast<size_t>(k)])];
    return k;
  };
  for (size_t ci = 0; ci < cands_.size() && ci < d.size(); ++ci) {
    if (!d[ci]) continue;
    const FusionCandidate& fc = cands_[ci];
    if (cand_recompute_[ci]) {
      if (std::find(recomp_.begin(), recomp_.end(), ci) == recomp_.end()) continue;  // not applicable
      const int nk = static_cast<int>(eager_.kernels.size());
      double before = cached({fc.kernels[0]}).us, after = 0;
      double bytes_before = 0, bytes_after = 0;
      const Cached& prod = cached({fc.kernels[0]});
      bytes_before += static_cast<double>(prod.work.bytes_read + prod.work.bytes_written);
      for (size_t u = 1; u < fc.kernels.size(); ++u) {
        const Cached& alone = cached({fc.kernels[u]});
        std::vector<int> with = {fc.kernels[u], fc.kernels[0] + nk};
        std::sort(with.begin(), with.end());
        const Cached& fused = cached(with);
        before += alone.us;
        after += fused.us;
        bytes_before += static_cast<double>(alone.work.bytes_read + alone.work.bytes_written);
        bytes_after += static_cast<double>(fused.work.bytes_read + fused.work.bytes_written);
      }
      const int pnode = eager_.kernels[static_cast<size_t>(fc.kernels[0])].nodes[0];
      const Node& n = g_.nodes[static_cast<size_t>(pnode)];
      why.emplace_back(before - after,
                       fmt::format("recompute: {} \"{}\" runs again in each of its {} readers instead of being "
                                   "stored; saves {:.2f} MB of traffic and {:.1f} us",
                                   n.op_type, n.name, fc.kernels.size() - 1, (bytes_before - bytes_after) / 1e6,
                                   before - after));
      for (PlanKernel& pk : p.kernels) {
        if (std::find(pk.recomputed.begin(), pk.recomputed.end(), pnode) != pk.recomputed.end() &&
            std::find(pk.fusions.begin(), pk.fusions.end(), "recompute") == pk.fusions.end()) {
          pk.fusions.push_back("recompute");
        }
      }
      continue;
    }
    const int gi = group_of[static_cast<size_t>(fc.kernels[0])];
    bool same = true;
    for (int k : fc.kernels) same = same && group_of[static_cast<size_t>(k)] == gi;
    if (!same) continue;  // skipped: it conflicted with an earlier fusion
    PlanKernel& pk = p.kernels[static_cast<size_t>(gi)];
    if (std::find(pk.fusions.begin(), pk.fusions.end(), fc.pass) == pk.fusions.end()) pk.fusions.push_back(fc.pass);
    std::string names;
    for (int k : fc.kernels) {
      const Node& n = g_.nodes[static_cast<size_t>(eager_.kernels[static_cast<size_t>(k)].nodes[0])];
      names += fmt::format("{}{} \"{}\"", names.empty() ? "" : " + ", n.op_type, n.name);
    }
    // The groups this fusion joins, as built so far, and their union.
    std::vector<int> roots;
    for (int k : fc.kernels) {
      const int r = find_root(k);
      if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
    }
    if (roots.size() < 2) continue;  // already joined by earlier fusions
    double parts_us = 0, parts_bytes = 0;
    std::vector<int> joined;
    for (int r : roots) {
      const Cached& one = cached(members[static_cast<size_t>(r)]);
      parts_us += one.us;
      parts_bytes += static_cast<double>(one.work.bytes_read + one.work.bytes_written);
      joined.insert(joined.end(), members[static_cast<size_t>(r)].begin(), members[static_cast<size_t>(r)].end());
    }
    std::sort(joined.begin(), joined.end());
    const Cached& merged = cached(joined);
    const double saved_bytes = parts_bytes - static_cast<double>(merged.work.bytes_read + merged.work.bytes_written);
    const double saved_us = parts_us - merged.us;
    for (int r : roots) {
      root[static_cast<size_t>(r)] = roots.front();
      if (r != roots.front()) std::vector<int>().swap(members[static_cast<size_t>(r)]);
    }
    members[static_cast<size_t>(roots.front())] = std::move(joined);
    why.emplace_back(saved_us, fmt::format("{}: {}; saves {:.2f} MB of traffic and {:.1f} us ({} kernels -> 1)",
                                           fc.pass, names, saved_bytes / 1e6, saved_us, roots.size()));
  }
  std::stable_sort(why.begin(), why.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [us, text] : why) {
    p.decisions.push_back(std::move(text));
    p.decision_saved_us.push_back(us);
  }
  // Data movement left a kernel of its own (a copy): why it was not folded into its reader.
  const PatternMatcher pm(g_, idx_);
  const auto& folds = folded_data_movement();
  for (size_t gi = 0; gi < grps.size(); ++gi) {
    if (grps[gi].size() != 1 || grps[gi][0] >= static_cast<int>(eager_.kernels.size())) continue;
    const int node = eager_.kernels[static_cast<size_t>(grps[gi][0])].nodes[0];
    const Node& n = g_.nodes[static_cast<size_t>(node)];
    if (op_class(n.domain, n.op_type) != OpClass::kDataMovement) continue;
    std::string reason;
    const int reader = pm.sole_consumer(node);
    if (std::find(folds.begin(), folds.end(), n.op_type) == folds.end()) {
      reason = "codegen folds Transpose, Slice, Pad, Concat, Split and Expand only";
    } else if (fold_source_[static_cast<size_t>(grps[gi][0])]) {
      reason = "its fold into its reader was not taken (it did not pay, or the reader joined a GEMM, row-wise or "
               "attention kernel)";
    } else if (reader < 0) {
      reason = "its output is read by several kernels or returned by the graph";
    } else {
      const Node& r = g_.nodes[static_cast<size_t>(reader)];
      reason = fmt::format("its reader {} \"{}\" is not an element-wise kernel (data movement folds into element-wise "
                           "readers, and a Transpose into a GEMM's operand)",
                           r.op_type, r.name);
    }
    p.decisions.push_back(fmt::format("not folded: {} \"{}\" stays a copy kernel: {}", n.op_type, n.name, reason));
    p.decision_saved_us.push_back(0);
  }
  return p;
}

void FusionSpace::sample_tiles(Plan& p, uint64_t seed) const {
  std::mt19937_64 rng(seed);
  for (PlanKernel& k : p.kernels) {
    const KernelWork w = plan_kernel_work(g_, idx_, k);
    std::vector<TileConfig> legal;
    for (const TileConfig& t : generated_tiles(w, dev_, target_.capability())) {
      if (kernel_cost(w, t, dev_).feasible) legal.push_back(t);
    }
    if (!legal.empty()) k.tile = legal[static_cast<size_t>(rng() % legal.size())];
  }
}

}  // namespace gpusim
