// gpusim calibrate: measures the user's own device through the backend interface and writes a
// profile that extends the datasheet profile with a `calibrated` block.
//
//   1. Microbenchmarks (microbench.cpp): DRAM read/write/copy bandwidth, the cache sweep (L2
//      bandwidth and size), shared-memory bandwidth, pointer-chase latency per level, FMA
//      throughput per dtype, matrix units where codegen has them, launch overhead a + b x groups,
//      host <-> device bandwidth and latency, bandwidth against occupancy.
//   2. Codegen kernels (kernels.cpp): GEMMs, convolutions, reductions and elementwise chains of
//      several sizes, every other one held out of the fit.
//   3. The fit (fit.h): efficiency factors and launch figures by least squares over the
//      microbenchmarks and the kernels not held out; errors per class before and after.
//   4. Output: the profile YAML (written atomically), the raw measurements as JSON, a report.
//
// Usage:
//   auto dev = gpusim::backend::open("vulkan", 0);
//   auto base = gpusim::find_profile("lavapipe", gpusim::default_profile_dirs());
//   gpusim::calibrate::Options o;  o.quick = true;
//   auto out = gpusim::calibrate::run(**dev, *base, o);
//   fmt::print("{}", gpusim::calibrate::report(*out));
//   gpusim::calibrate::write_profile(*out, "lavapipe-calibrated.yaml", dirs);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend.h"
#include "fit.h"
#include "gpusim/gpu_profile.h"
#include "observation.h"

namespace gpusim::calibrate {

struct Options {
  bool quick = false;     // about 30-60 s: fewer sizes and repeats
  std::string command;    // the command line, recorded in the profile
  std::string date;       // YYYY-MM-DD (default: today, UTC)
  // Progress: fraction done (0..1) and what runs now; called between measurements.
  std::function<void(double, const std::string&)> progress;
};

struct Outcome {
  backend::DeviceInfo device;
  GpuProfile base;
  std::string base_name;  // read_raw: the base profile the raw data names (base is left to the caller)
  GpuProfile calibrated;  // base with the fitted and measured figures applied
  bool quick = false;
  std::string command, date;
  double elapsed_s = 0;
  std::vector<Figure> figures;
  std::vector<Observation> observations;
  std::vector<Curve> curves;
  std::vector<std::string> notes;
  FitResult fit;
};

Result<Outcome> run(backend::Backend& dev, const GpuProfile& base, const Options& opts);

// The raw data a calibration wrote (raw_json, schema gpusim.calibration/1) read back: the device,
// date, command, figures, curves, observations and notes as measured; base, calibrated and fit
// are left for fit_outcome. Errors name the file and the field.
Result<Outcome> read_raw(const std::string& path);
// The fit of `o`'s measurements against o.base (the step run() ends with): fit, calibrated. With
// read_raw, `gpusim calibrate --refit` fits a calibration again without its device, after a
// change to the cost model or the fit.
void fit_outcome(Outcome& o);
// Today's date, UTC, as YYYY-MM-DD.
std::string today();

// The calibrated profile's YAML: `extends: <base>` and a `calibrated` block (schema in
// gpu_profiles/README.md). `name` must be the file name without .yaml.
std::string profile_yaml(const Outcome& o, const std::string& name, const std::string& measurements_file = "");
// Everything measured, for the record and for CI checks without the device (schema
// gpusim.calibration/1, documented in backends/calibrate/README.md).
nlohmann::json raw_json(const Outcome& o, const std::string& profile_name);
// The human report: each figure against its datasheet figure, the fit, errors before and after.
std::string report(const Outcome& o);

// Writes the profile to `path` and the raw data beside it as <stem>.<id>.measurements.json (id:
// a hash of its content), as one step: the profile is built and loaded back (resolving
// `extends:` in `dirs`) before anything is written; the measurements go to their new file; the
// profile, which names that file in `calibrated.measurements`, replaces the old one in one
// rename (the commit); then measurements no profile names are removed. Killed or failed at any
// point, the old profile and its own measurements stay as they were.
Status write_profile(const Outcome& o, const std::string& path, const std::vector<std::string>& dirs);

}  // namespace gpusim::calibrate
