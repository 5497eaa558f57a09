// Targets: a device model and the tile space its kernels come from (include/gpusim/target.h).
#include "gpusim/target.h"

#include <fmt/format.h>

namespace gpusim {

namespace {
class LibraryMenu final : public TileCapability {
 public:
  TileConfig generated(const KernelWork&, const TileConfig& t) const override { return t; }
  std::string describe() const override { return "the cost model's whole menu"; }
};
}  // namespace

std::string_view tile_space_name(TileSpace s) { return s == TileSpace::kGenerated ? "generated" : "library"; }

Result<TileSpace> parse_tile_space(std::string_view name, std::string_view field) {
  if (name == "generated") return TileSpace::kGenerated;
  if (name == "library") return TileSpace::kLibrary;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: \"{}\" is not a tile space; use generated (the kernels gpusim's code generator "
                                "builds, what its executor runs) or library (the cost model's whole menu, as vendor "
                                "libraries run kernels)",
                                field, name));
}

const TileCapability& Target::capability() const { return tiles ? *tiles : library_capability(); }

std::string Target::describe() const {
  return fmt::format("{} ({}{})", tile_space_name(space), capability().describe(), device.allow_tf32 ? "; TF32 allowed" : "");
}

const TileCapability& library_capability() {
  static const LibraryMenu m;
  return m;
}

Target make_target(const GpuProfile& gpu, std::shared_ptr<const TileCapability> tiles, TileSpace space) {
  Target t;
  t.device = make_device(gpu);
  t.tiles = std::move(tiles);
  t.space = space;
  return t;
}

Target library_target(const GpuProfile& gpu) {
  // The menu is stateless: share the one instance without owning it.
  return make_target(gpu, std::shared_ptr<const TileCapability>(std::shared_ptr<void>(), &library_capability()),
                     TileSpace::kLibrary);
}

Target library_target(const GpuProfile& gpu, const TargetOptions& o) {
  Target t = library_target(gpu);
  t.device.allow_tf32 = o.allow_tf32;
  return t;
}

TileSpace runtime_tile_space(const std::optional<RuntimeModel>& rt) {
  if (!rt || rt->name == "gpusim" || rt->name == "cuda-graph") return TileSpace::kGenerated;
  return TileSpace::kLibrary;
}

}  // namespace gpusim
