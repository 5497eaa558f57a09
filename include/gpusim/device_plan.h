// Plans on a device: the eager plan, the tile space as priced there, and a plan's validity there.
// These join the plan IR (plan.h, tile.h) and the cost model (kernel_cost.h), so they live in the
// simulator's layer; the plan IR itself depends only on the graph.
//
// Usage:
//   gpusim::Target t = gpusim::library_target(profile);         // or Session::target(profile, kGenerated)
//   gpusim::Plan p = gpusim::eager_plan(graph, t);
//   if (auto ok = gpusim::validate_plan(p, graph, t.device); !ok) fmt::print("{}\n", ok.error().message);
//   auto tiles = gpusim::generated_tiles(work, t.device, *t.tiles);   // what the tuner measures
#pragma once

#include "gpusim/export.h"

#include <functional>
#include <vector>

#include "gpusim/kernel_cost.h"
#include "gpusim/plan.h"
#include "gpusim/result.h"
#include "gpusim/target.h"
#include "gpusim/tile.h"

namespace gpusim {

// One kernel per run-time op, each with the cost model's fastest tile of the target's tile space
// (best_generated_tile over target.capability()): the baseline every plan is compared with.
GPUSIM_API Plan eager_plan(const Graph& g, const Target& target);
// The same with the graph's index built once by the caller (kernel_work.h: the fusion space has one).
GPUSIM_API Plan eager_plan(const Graph& g, const Target& target, const GraphIndex& idx);

// The tile space of a code generator on a target (tile.h: TileCapability), so that the planner,
// the autotuner and codegen share one and a plan ranked with it holds only tiles that run exactly
// as priced:
//   generated_tiles:     the cost model's menu for `w`, each tile as `cap` generates it,
//                        duplicates removed, in menu order;
//   best_generated_tile: the cost model's fastest feasible one of those.
GPUSIM_API std::vector<TileConfig> generated_tiles(const KernelWork& w, const DeviceModel& d, const TileCapability& cap);
GPUSIM_API TileConfig best_generated_tile(const KernelWork& w, const DeviceModel& d, const TileCapability& cap);

// Every run-time node in exactly one kernel (or listed as recomputed), producers before consumers,
// at most one anchor class per kernel, each kernel's kind and operands those of its ops, every
// tile within the device's limits and (kFull) feasible in the cost model. The message lists every
// problem found, each with the kernel index and the reason. A caller that predicts the plan next
// checks kStructure: predict_plan prices each kernel once and says when one cannot run.
enum class PlanCheck { kFull, kStructure };
GPUSIM_API Status validate_plan(const Plan& p, const Graph& g, const DeviceModel& d, PlanCheck check = PlanCheck::kFull);

}  // namespace gpusim
