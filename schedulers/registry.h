// Internal: the constructors of the schedulers in schedulers/<name>/.
#pragma once

#include <memory>

#include "gpusim/scheduler.h"

namespace gpusim::schedulers {

std::unique_ptr<Scheduler> make_eager(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_greedy(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_beam(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_random(const FusionSpace& s, const SearchOptions& o);
std::unique_ptr<Scheduler> make_split(const FusionSpace& s, const SearchOptions& o);

}  // namespace gpusim::schedulers
