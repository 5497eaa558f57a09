// Internal: the constructors of the schedulers in core/schedulers/<name>/.
#pragma once

#include <cstdint>
#include <memory>

#include "gpusim/scheduler.h"

namespace gpusim::schedulers {

// A well-mixed 64-bit value per index (splitmix64's finalizer). Sums of them are order-free
// hashes of sets: of a kernel group (FusionSpace's cost cache key) and of a decision's candidates
// taken (the search driver's shortlist), so a set plus one member hashes as its hash plus one mix.
inline uint64_t mix(uint64_t k) {
  uint64_t x = k + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::unique_ptr<Scheduler> make_eager(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_greedy(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_beam(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_random(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_split(const FusionSpace& s, const SearchOptions& o);

}  // namespace gpusim::schedulers
