// The fit: the profile's free figures (efficiency factors, the per-block start cost, the shortest
// kernel) chosen by least squares so the simulator's predictions match measured kernel times.
//
// The residual of a kernel is log(predicted / measured): relative errors, so a 10 us kernel counts
// as much as a 10 ms one, and every class of kernel (DRAM streams, FMA, launches, occupancy, GEMMs,
// convolutions, ...) carries the same total weight however many kernels it has. The parameters
// live in log space within their schema bounds; Levenberg-Marquardt steps solve the damped normal
// equations with Eigen, the Jacobian taken by central differences (the model is piecewise: max of
// compute, DRAM and L2 times). Held-out observations never enter the fit.
#pragma once

#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "observation.h"

namespace gpusim::calibrate {

struct Param {
  std::string key;  // "efficiency.dram_bandwidth", "launch.block_us", "launch.latency_floor_us", ...
  double value = 0;
  double lo = 0, hi = 0;  // bounds (the profile schema's range, kept away from zero)
};

// The parameters calibration fits for this profile, starting from the profile's own values.
std::vector<Param> fit_parameters(const GpuProfile& p, const std::vector<Observation>& obs);
// The profile with these parameter values.
GpuProfile with_parameters(const GpuProfile& p, const std::vector<Param>& params);

// One observation's prediction on a device (microseconds).
double predict_us(const Observation& o, const DeviceModel& d);

// The fit's objective for a profile: weighted mean squared log(predicted / measured) over the
// observations the fit uses (not held out).
double fit_cost(const GpuProfile& p, const std::vector<Observation>& obs);

struct ClassError {
  std::string cls;
  bool held_out = false;
  int kernels = 0;
  double mean_abs_pct = 0;   // mean |predicted - measured| / measured, percent
  double max_abs_pct = 0;
};
// Error per class (fit and held-out kept apart), sorted by class.
std::vector<ClassError> class_errors(const GpuProfile& p, const std::vector<Observation>& obs);

struct FitResult {
  std::vector<Param> before, after;
  std::vector<ClassError> errors_before, errors_after;
  double cost_before = 0, cost_after = 0;  // weighted mean squared log error over the fitted kernels
  int iterations = 0;
  int fitted = 0;  // observations in the fit
};

FitResult fit(const GpuProfile& p, const std::vector<Observation>& obs, std::vector<Param> start);

}  // namespace gpusim::calibrate
