#include "gpusim/cancel.h"
#include "gpusim/device_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gpusim/kernel_work.h"

namespace gpusim {

std::vector<TileConfig> generated_tiles(const KernelWork& w, const DeviceModel& d, const TileCapability& cap) {
  std::vector<TileConfig> out;
  for (const TileConfig& m : tile_menu(w, d)) {
    const TileConfig t = cap.generated(w, m);
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

TileConfig best_generated_tile(const KernelWork& w, const DeviceModel& d, const TileCapability& cap) {
  TileConfig best;
  double best_us = -1;
  for (const TileConfig& t : generated_tiles(w, d, cap)) {
    const KernelCost c = kernel_cost(w, t, d);
    if (c.feasible && (best_us < 0 || c.total_us < best_us)) {
      best = t;
      best_us = c.total_us;
    }
  }
  return best_us < 0 ? cap.generated(w, choose_tile(w, d)) : best;
}

Plan eager_plan(const Graph& g, const Target& target) { return eager_plan(g, target, index_graph(g)); }

Plan eager_plan(const Graph& g, const Target& target, const GraphIndex& idx) {
  const DeviceModel& d = target.device;
  const TileCapability& cap = target.capability();
  Plan p;
  p.model = g.source_path;
  p.gpu = d.profile ? d.profile->name : "";
  p.allow_tf32 = d.allow_tf32;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if ((i & 63) == 0) check_cancelled();
    auto w = node_work(g, g.nodes[i]);
    if (!w) continue;
    PlanKernel k;
    k.nodes = {static_cast<int>(i)};
    k.tile = best_generated_tile(*w, d, cap);
    classify_kernel(g, idx, k);
    p.kernels.push_back(std::move(k));
  }
  return p;
}

Status validate_plan(const Plan& p, const Graph& g, const DeviceModel& d, PlanCheck check) {
  std::vector<std::string> problems;
  auto problem = [&](std::string s) {
    if (problems.size() < 20) problems.push_back(std::move(s));
  };
  const GraphIndex idx = index_graph(g);
  std::vector<int> owner(g.nodes.size(), -1);  // kernel that computes each node (not recomputed)
  std::vector<int> copy_in(g.nodes.size(), -1);  // a kernel that recomputes it
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const PlanKernel& kern = p.kernels[k];
    if (kern.nodes.empty()) {
      problem(fmt::format("kernel {} has no ops", k));
      continue;
    }
    if (kern.anchor < 0 || kern.anchor >= static_cast<int>(kern.nodes.size())) {
      problem(fmt::format("kernel {}: anchor {} is not one of its {} ops", k, kern.anchor, kern.nodes.size()));
      continue;
    }
    int anchors = 0;
    for (int ni : kern.nodes) {
      if (ni < 0 || ni >= static_cast<int>(g.nodes.size())) {
        problem(fmt::format("kernel {}: node index {} is outside the graph's {} nodes", k, ni, g.nodes.size()));
        continue;
      }
      const Node& n = g.nodes[static_cast<size_t>(ni)];
      const bool recomputed = std::find(kern.recomputed.begin(), kern.recomputed.end(), ni) != kern.recomputed.end();
      if (recomputed && copy_in[static_cast<size_t>(ni)] < 0) copy_in[static_cast<size_t>(ni)] = static_cast<int>(k);
      if (!recomputed) {
        if (owner[static_cast<size_t>(ni)] >= 0) {
          problem(fmt::format("node \"{}\" runs in kernels {} and {} without being marked recomputed", n.name,
                              owner[static_cast<size_t>(ni)], k));
        }
        owner[static_cast<size_t>(ni)] = static_cast<int>(k);
      }
      const auto cls = op_class(n.domain, n.op_type);
      if (cls == OpClass::kGemm || cls == OpClass::kConv || cls == OpClass::kAttention) ++anchors;
    }
    const bool attention = kern.kind == KernelKind::kAttention;
    if (anchors > (attention ? 2 : 1)) {
      problem(fmt::format("kernel {} fuses {} matmul/conv ops; a kernel has one main loop", k, anchors));
    }
    {
      // The kind and operands were set once where the kernel was built; a kernel made by hand, or
      // edited since, says so here rather than running as another kind.
      PlanKernel fresh = kern;
      classify_kernel(g, idx, fresh);
      if (fresh.kind != kern.kind) {
        problem(fmt::format("kernel {} is marked {} but its ops make a {} kernel (set kind and operands with "
                            "classify_kernel after building or editing a kernel)",
                            k, kernel_kind_name(kern.kind), kernel_kind_name(fresh.kind)));
      } else if (fresh.operands != kern.operands) {
        problem(fmt::format("kernel {}: its operands are not those of its ops (set kind and operands with "
                            "classify_kernel after building or editing a kernel)", k));
      }
    }
    const KernelWork w = plan_kernel_work(g, idx, kern);
    const std::string why = tile_feasibility(w, kern.tile, d);
    if (!why.empty()) problem(fmt::format("kernel {} (\"{}\"): {}", k, g.nodes[static_cast<size_t>(kern.nodes[0])].name, why));
    if (why.empty() && check == PlanCheck::kFull) {
      const KernelCost c = kernel_cost(w, kern.tile, d);
      if (!c.feasible) {
        problem(fmt::format("kernel {} (\"{}\"): {}", k, g.nodes[static_cast<size_t>(kern.nodes[0])].name,
                            c.infeasible_reason));
      }
    }
  }
  // Coverage and order: every run-time node once; every input produced by an earlier kernel.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!runs_on_device(g, n)) continue;
    if (owner[i] < 0) {
      if (copy_in[i] < 0) problem(fmt::format("node \"{}\" ({}) is in no kernel", n.name, n.op_type));
      continue;  // recomputed where it is used: its inputs come before each of those kernels
    }
    for (TensorId t : n.inputs) {
      if (t == kNoTensor) continue;
      int prod = idx.producer[static_cast<size_t>(t)];
      // Views launch nothing: follow them to the node that really produces the data.
      while (prod >= 0 && !runs_on_device(g, g.nodes[static_cast<size_t>(prod)])) {
        const Node& v = g.nodes[static_cast<size_t>(prod)];
        prod = v.inputs.empty() || v.inputs[0] == kNoTensor ? -1 : idx.producer[static_cast<size_t>(v.inputs[0])];
      }
      if (prod < 0 || owner[static_cast<size_t>(prod)] < 0) continue;
      if (owner[static_cast<size_t>(prod)] > owner[i]) {
        problem(fmt::format("node \"{}\" in kernel {} reads \"{}\", which kernel {} produces later", n.name, owner[i],
                            g.tensor(t).name, owner[static_cast<size_t>(prod)]));
      }
    }
  }
  for (TensorId t : p.offloaded) {
    if (t < 0 || t >= static_cast<TensorId>(g.tensors.size()) || g.tensor(t).role != TensorRole::kWeight) {
      problem(fmt::format("offloaded tensor {} is not a weight", t));
    }
  }
  if (problems.empty()) return Ok{};
  constexpr size_t kListed = 8;  // enough to see the pattern; a plan for another GPU fails every big kernel
  const size_t listed = std::min(problems.size(), kListed);
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("invalid plan for {}: {}{}", g.source_path,
                                fmt::join(problems.begin(), problems.begin() + static_cast<long>(listed), "; "),
                                problems.size() > listed ? fmt::format("; and {} more", problems.size() - listed) : ""));
}


}  // namespace gpusim
