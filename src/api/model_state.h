// Internal: what a Model holds (include/gpusim/gpusim.h), shared by session.cpp and program.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "gpusim/gpusim.h"

namespace gpusim {

struct Model::State {
  Graph graph;
  std::string source;
  std::string hash;
  int64_t size_bytes = 0;
  std::string bytes;  // kept for models opened from memory: the executor reads their weights
  bool from_bytes = false;
};

}  // namespace gpusim
