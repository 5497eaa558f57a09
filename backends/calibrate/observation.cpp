#include "observation.h"

namespace gpusim::calibrate {

nlohmann::json to_json(const KernelWork& w) { return work_to_json(w); }
nlohmann::json to_json(const TileConfig& t) { return tile_to_json(t); }
Result<KernelWork> work_from_json(const nlohmann::json& j) { return gpusim::work_from_json(j, "raw data"); }
Result<TileConfig> tile_from_json(const nlohmann::json& j) { return gpusim::tile_from_json(j, "raw data"); }

}  // namespace gpusim::calibrate
