// KernelWork and TileConfig as JSON: how a kernel's work and schedule travel in files that keep
// measurements (calibration's raw data, the measurement store, `gpusim run --json`), so that a
// prediction can be recomputed later without the model or the device.
//
// Usage:
//   nlohmann::json j = gpusim::work_to_json(w);
//   gpusim::Result<gpusim::KernelWork> back = gpusim::work_from_json(j, "runs.json: kernel 3");
#pragma once


#include <string_view>

#include <nlohmann/json.hpp>

#include "gpusim/kernel_cost.h"
#include "gpusim/result.h"

namespace gpusim {

nlohmann::json work_to_json(const KernelWork& w);
nlohmann::json tile_to_json(const TileConfig& t);
// `where` prefixes error messages ("raw data", "runs.json: kernel 3").
Result<KernelWork> work_from_json(const nlohmann::json& j, std::string_view where);
Result<TileConfig> tile_from_json(const nlohmann::json& j, std::string_view where);

}  // namespace gpusim
