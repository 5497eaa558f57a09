// Test support: the fixtures several test files share — a GPU profile by name, a bundled model
// (imported once per test process, with `batch` set to 1 where the model has it), and a graph
// built with OnnxBuilder. They FAIL the current test on error.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "gpusim/gpu_profile.h"
#include "gpusim/onnx_import.h"
#include "gpusim/target.h"
#include "support/onnx_builder.h"

namespace gpusim::test {

inline GpuProfile gpu(const std::string& name) {
  auto p = find_profile(name, default_profile_dirs());
  if (!p) FAIL(p.error().message);
  return std::move(*p);
}

// models/<file>, imported once; a copy is returned so callers may keep or change it.
// Targets for tests (target.h): the library tile space, and the portable rules (tile_as_generated,
// no target limits) the planner tests were written against.
inline Target library(const GpuProfile& p) { return library_target(p); }
inline Target portable(const GpuProfile& p) {
  return make_target(p, std::shared_ptr<const TileCapability>(std::shared_ptr<void>(), &portable_capability()),
                     TileSpace::kGenerated);
}

inline const Graph& bundled_model(const std::string& file) {
  static std::map<std::string, Graph> cache;
  if (auto it = cache.find(file); it != cache.end()) return it->second;
  const std::string path = source_dir() + "/models/" + file;
  auto g = import_onnx(path);
  if (!g) {
    ImportOptions opts;
    opts.dims["batch"] = 1;
    g = import_onnx(path, opts);
  }
  if (!g) FAIL(g.error().message);
  return cache.emplace(file, std::move(*g)).first->second;
}

inline Graph build_graph(const OnnxBuilder& b, const std::string& file) {
  auto g = import_onnx(b.write(file));
  if (!g) FAIL(g.error().message);
  return std::move(*g);
}

// Sets an environment variable for a scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace gpusim::test
