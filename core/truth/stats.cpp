// Error statistics for validation (include/gpusim/validate.h): MAPE, percentiles, bias, and
// Kendall's tau-b in O(n log n).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpusim/validate.h"

namespace gpusim {
namespace {

// Pairs tied in the sorted sequence `v` (runs of equal values): sum of run * (run - 1) / 2.
int64_t tied_pairs(const std::vector<double>& v) {
  int64_t ties = 0, run = 1;
  for (size_t i = 1; i <= v.size(); ++i) {
    if (i < v.size() && v[i] == v[i - 1]) {
      ++run;
    } else {
      ties += run * (run - 1) / 2;
      run = 1;
    }
  }
  return ties;
}

// Sorts `v` by merge sort and returns the number of inversions (discordant swaps).
int64_t merge_count(std::vector<double>& v, std::vector<double>& tmp, size_t lo, size_t hi) {
  if (hi - lo < 2) return 0;
  const size_t mid = lo + (hi - lo) / 2;
  int64_t swaps = merge_count(v, tmp, lo, mid) + merge_count(v, tmp, mid, hi);
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (v[j] < v[i]) {
      swaps += static_cast<int64_t>(mid - i);
      tmp[k++] = v[j++];
    } else {
      tmp[k++] = v[i++];
    }
  }
  while (i < mid) tmp[k++] = v[i++];
  while (j < hi) tmp[k++] = v[j++];
  std::copy(tmp.begin() + static_cast<long>(lo), tmp.begin() + static_cast<long>(hi), v.begin() + static_cast<long>(lo));
  return swaps;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

}  // namespace

double kendall_tau(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0;
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b] || (x[a] == x[b] && y[a] < y[b]); });
  std::vector<double> xs(n), ys(n);
  for (size_t i = 0; i < n; ++i) {
    xs[i] = x[idx[i]];
    ys[i] = y[idx[i]];
  }
  const int64_t n0 = static_cast<int64_t>(n) * static_cast<int64_t>(n - 1) / 2;
  const int64_t n1 = tied_pairs(xs);
  // Pairs tied in both x and y.
  int64_t n3 = 0, run = 1;
  for (size_t i = 1; i <= n; ++i) {
    if (i < n && xs[i] == xs[i - 1] && ys[i] == ys[i - 1]) {
      ++run;
    } else {
      n3 += run * (run - 1) / 2;
      run = 1;
    }
  }
  std::vector<double> tmp(n);
  const int64_t swaps = merge_count(ys, tmp, 0, n);  // ys is now sorted
  const int64_t n2 = tied_pairs(ys);
  const double num = static_cast<double>(n0 - n1 - n2 + n3 - 2 * swaps);
  const double den = std::sqrt(static_cast<double>(n0 - n1)) * std::sqrt(static_cast<double>(n0 - n2));
  return den > 0 ? num / den : 0;
}

ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ErrorStats s;
  const size_t n = std::min(predicted.size(), measured.size());
  s.n = static_cast<int64_t>(n);
  if (n == 0) return s;
  std::vector<double> ape(n);
  double sum_abs = 0, sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = (predicted[i] - measured[i]) / measured[i] * 100;
    ape[i] = std::abs(e);
    sum_abs += ape[i];
    sum += e;
  }
  s.mape = sum_abs / static_cast<double>(n);
  s.bias = sum / static_cast<double>(n);
  s.median_ape = percentile(ape, 0.5);
  s.p90_ape = percentile(std::move(ape), 0.9);
  s.kendall_tau = kendall_tau(predicted, measured);
  return s;
}

}  // namespace gpusim
