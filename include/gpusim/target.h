// The target every planner entry is given: which GPU (its device model, from a profile) and which
// tiles its kernels can have there (a TileCapability: what the generator or library that builds
// the kernels makes of each tile the cost model's menu asks for). predict, search, FusionSpace,
// the Dojo and the tuner all price tiles through one, so two entries given the same Target price
// the same kernels: `gpusim predict` of the eager plan and `gpusim plan`'s eager baseline are one
// number.
//
// Two tile spaces:
//   generated — the kernels gpusim's code generator builds for the GPU (what gpusim's executor
//               runs). The execution tier answers for it: Session::target(profile,
//               TileSpace::kGenerated), or a backend's device.
//   library   — the cost model's whole menu (split-K, any vector width), picked by its heuristic,
//               as a vendor library (cuBLAS, cuDNN, MIOpen) runs a kernel: library_target(), here
//               in the core, for a planner that links no executor and for comparisons against
//               frameworks that call those libraries.
//
// Usage:
//   gpusim::Target t = gpusim::library_target(profile);
//   auto p = gpusim::predict(graph, t, {gpusim::DType::kFloat16});
//   auto plans = gpusim::search(graph, t, opts);
#pragma once

#include "gpusim/export.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpusim/kernel_cost.h"
#include "gpusim/result.h"
#include "gpusim/runtime.h"
#include "gpusim/tile.h"

namespace gpusim {

enum class TileSpace { kGenerated, kLibrary };

// "generated" / "library", as the CLI's --tiles, the service's and Python's `tiles` spell them.
GPUSIM_API std::string_view tile_space_name(TileSpace s);
// The tile space named `name`; an error naming `field`, the value and the allowed names otherwise.
GPUSIM_API Result<TileSpace> parse_tile_space(std::string_view name, std::string_view field = "tiles");

// How a target may compute, beside its tiles.
struct GPUSIM_API TargetOptions {
  // fp32 GEMMs and convolutions on the matrix units as TF32 where the GPU has a TF32 rate
  // (PyTorch's torch.backends.cuda.matmul.allow_tf32; off by default there and here). Generated
  // targets build them as TF32 kernels where codegen can (wmma on NVIDIA sm_80 and newer).
  bool allow_tf32 = false;
};

struct GPUSIM_API Target {
  DeviceModel device;                           // make_device(profile): never dangles
  std::shared_ptr<const TileCapability> tiles;  // null: the library menu (set by the functions below)
  TileSpace space = TileSpace::kLibrary;        // which of the two `tiles` is

  const GpuProfile& gpu() const { return *device.profile; }
  // What builds each tile: `tiles`, or the library menu where it is unset (a default Target).
  GPUSIM_API const TileCapability& capability() const;
  // "generated (codegen: 1024 threads, 48 KiB shared, wmma)" or "library (the cost model's whole menu)".
  std::string describe() const;
};

// A target from its parts (an engine with kernels of its own passes its own capability).
GPUSIM_API Target make_target(const GpuProfile& gpu, std::shared_ptr<const TileCapability> tiles, TileSpace space);
// The library tile space on `gpu`: every tile of the menu as asked.
GPUSIM_API Target library_target(const GpuProfile& gpu);
GPUSIM_API Target library_target(const GpuProfile& gpu, const TargetOptions& o);
// The capability of the library tile space: generated(w, t) == t.
GPUSIM_API const TileCapability& library_capability();

// Makes the target for a profile in a tile space (the Dojo makes one per virtual or power-capped
// GPU). The API's is Session::target; library_target answers kLibrary without an executor.
using TargetMaker = std::function<Target(const GpuProfile&, TileSpace)>;

// The tile space of the kernels a runtime launches: gpusim's own executor (no runtime, "gpusim",
// or its CUDA-graph replay) runs generated kernels; every other runtime (PyTorch, torch.compile,
// ONNX Runtime) calls vendor libraries. What the front ends use when the user names no --tiles.
GPUSIM_API TileSpace runtime_tile_space(const std::optional<RuntimeModel>& rt);

}  // namespace gpusim
