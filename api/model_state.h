// Internal: what a Model holds (include/gpusim/gpusim.h), shared by session.cpp and program.cpp.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpusim/gpusim.h"

namespace gpusim {

struct Model::State {
  Graph graph;
  std::string source;
  // The digest of the bytes: set at once for bytes; for a file, read on the first content_hash()
  // call, so opening a model (every CLI command) never reads its weights only to hash them.
  mutable std::once_flag hash_once;
  mutable std::string hash;
  int64_t size_bytes = 0;
  std::string bytes;  // kept for models opened from memory: the executor reads their weights
  bool from_bytes = false;
  // What it was opened with (Session::at_batch opens it again at another batch).
  std::vector<std::string> dims;
  int64_t max_nodes = 0;
};

}  // namespace gpusim
