// Measurement discipline for calibration: warm-up runs that are thrown away, many timed repeats,
// the median with the 95th percentile and the coefficient of variation, and a re-measure of any
// round that is too noisy — a figure that stays noisy is flagged, never silently accepted.
//
// Usage:
//   gpusim::calibrate::Discipline d;            // 2 warm-ups, 15 repeats, CV <= 5 %, 3 rounds
//   auto s = gpusim::calibrate::measure([&]() -> Result<double> { return time_kernel(); }, d);
//   if (s && s->noisy) fmt::print("noisy: CV {:.1f} %\n", 100 * s->cv);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gpusim/result.h"

namespace gpusim::calibrate {

struct Stats {
  double p50 = 0, p95 = 0;  // nearest-rank percentiles of the kept samples
  double mean = 0, min = 0, max = 0;
  double cv = 0;            // standard deviation / mean
  int64_t n = 0;            // samples kept (one round)
  int rounds = 1;           // rounds taken (more than one: re-measured because of noise)
  bool noisy = false;       // still above the CV limit after every round
};

// Statistics of one set of samples (empty: all zero).
Stats summarize(std::vector<double> samples);

struct Discipline {
  int warmup = 2;
  int repeats = 15;
  double max_cv = 0.05;  // a round above this is re-measured
  int max_rounds = 3;
};

// Takes `warmup` discarded samples, then `repeats` kept ones; a round whose CV exceeds max_cv is
// measured again (up to max_rounds), and the quietest round is kept. `samples` (optional) receives
// the kept round's samples in the order they were taken.
Result<Stats> measure(const std::function<Result<double>()>& sample, const Discipline& d,
                      std::vector<double>* samples = nullptr);

}  // namespace gpusim::calibrate
