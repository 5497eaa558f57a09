#include "measure.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpusim::calibrate {

Stats summarize(std::vector<double> v) {
  Stats s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {  // nearest rank
    const size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(r, 1, v.size()) - 1];
  };
  s.p50 = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p95 = rank(0.95);
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  var /= static_cast<double>(std::max<size_t>(1, v.size() - 1));
  s.cv = s.mean != 0 ? std::sqrt(var) / std::fabs(s.mean) : 0;
  return s;
}

Result<Stats> measure(const std::function<Result<double>()>& sample, const Discipline& d, std::vector<double>* out) {
  for (int w = 0; w < d.warmup; ++w) {
    if (auto r = sample(); !r) return r.error();
  }
  Stats best;
  std::vector<double> best_samples;
  const int rounds = std::max(1, d.max_rounds);
  for (int round = 1; round <= rounds; ++round) {
    std::vector<double> v;
    v.reserve(static_cast<size_t>(std::max(1, d.repeats)));
    for (int r = 0; r < std::max(1, d.repeats); ++r) {
      auto x = sample();
      if (!x) return x.error();
      v.push_back(*x);
    }
    Stats s = summarize(v);
    if (round == 1 || s.cv < best.cv) {
      best = s;
      best_samples = std::move(v);
    }
    best.rounds = round;
    if (best.cv <= d.max_cv) break;
  }
  best.noisy = best.cv > d.max_cv;
  if (out) *out = std::move(best_samples);
  return best;
}

}  // namespace gpusim::calibrate
