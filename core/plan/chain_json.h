// A generated kernel's chain (gpusim/tile.h: KernelChain) as JSON, in plan files and in the files
// that keep measurements (sim/work_json.h): {"load_rounds", "loads_ahead", "epilogue_rounds",
// "epilogue_barriers"}, written only where the chain is known.
//
// Usage:
//   if (t.chain.known()) j["chain"] = gpusim::chain_to_json(t.chain);
//   auto c = gpusim::chain_from_json(j["chain"], "plan.json", "kernels[3].tile.chain");
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "gpusim/result.h"
#include "gpusim/tile.h"

namespace gpusim {

nlohmann::json chain_to_json(const KernelChain& c);
// An error "WHERE: FIELD.KEY: why" naming the value where a key is unknown or not a count.
Result<KernelChain> chain_from_json(const nlohmann::json& j, std::string_view where, std::string_view field);

}  // namespace gpusim
