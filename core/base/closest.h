// "Did you mean": the names closest to a misspelt one, by edit distance. Used where a user types a
// name gpusim must match exactly (a GPU profile id, a subcommand, an option) and the error should
// offer the likely intent instead of listing everything.
//
//   auto near = gpusim::closest_names("prdict", {"predict", "plan", "profiles"}, 1);  // {"predict"}
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace gpusim {

// Edit distance with adjacent transpositions (optimal string alignment): insertions, deletions,
// substitutions and swaps of two neighbours, one each ("3600" is one edit from "3060").
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

// The `k` candidates closest to `name` (ties in the candidates' order), at most `max_distance`
// edits away (none: any distance).
inline std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates,
                                              size_t k, size_t max_distance = static_cast<size_t>(-1)) {
  std::vector<std::pair<size_t, size_t>> ranked;  // distance, index
  for (size_t i = 0; i < candidates.size(); ++i) {
    // The distance is at least the difference in length: a name far longer than any candidate (a
    // 60 MiB key) costs nothing instead of a quadratic table.
    const size_t gap = name.size() > candidates[i].size() ? name.size() - candidates[i].size() : candidates[i].size() - name.size();
    if (gap > max_distance) continue;
    const size_t d = edit_distance(name, candidates[i]);
    if (d <= max_distance) ranked.emplace_back(d, i);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && out.size() < k; ++i) out.push_back(candidates[ranked[i].second]);
  return out;
}

}  // namespace gpusim
