// What calibration measures, as plain data: figures (a bandwidth, a latency, a rate, each with its
// statistics and the datasheet figure it compares to) and observations (one kernel's work and tile
// with its measured time — what the simulator is fitted to and judged on).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusim/kernel_cost.h"
#include "sim/work_json.h"
#include "measure.h"

namespace gpusim::calibrate {

struct Figure {
  std::string key;    // "dram.copy", "l2.size", "latency.dram", "fma.fp32", "launch.overhead", ...
  std::string label;  // "DRAM copy bandwidth"
  std::string unit;   // "GB/s", "ns", "us", "MB", "GFLOP/s"
  Stats stats;        // of the figure over the kept samples (p50 is the value)
  double peak = 0;    // the datasheet figure it compares to (0: none)
  std::string note;   // how it was found, or why it was not ("no knee in the sweep: ...")
  bool measured = true;  // false: skipped (note says why)
};

// One timed kernel, priced by the simulator from `work` and `tile`.
struct Observation {
  std::string cls;       // "dram", "fma", "launch", "occupancy", "gemm", "conv", "reduction", "elementwise"
  std::string name;      // "copy 64 MiB", "MatMul 256x256x256"
  bool held_out = false; // never used by the fit; judged before and after it
  KernelWork work;
  TileConfig tile;
  Stats stats;           // measured device time, microseconds
};

// A sweep kept for the raw data (x, y pairs), e.g. bandwidth against footprint.
struct Curve {
  std::string key;   // "l2.sweep", "occupancy", "host.upload", "latency.chase"
  std::string x_unit, y_unit;
  std::vector<double> x, y;
};

// KernelWork and TileConfig to and from JSON (the raw data file keeps them so predictions can be
// recomputed without the device); errors begin "raw data: ". The shared codec: gpusim/work_json.h.
nlohmann::json to_json(const KernelWork& w);
nlohmann::json to_json(const TileConfig& t);
Result<KernelWork> work_from_json(const nlohmann::json& j);
Result<TileConfig> tile_from_json(const nlohmann::json& j);

}  // namespace gpusim::calibrate
