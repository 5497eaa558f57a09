// ARCHITECTURE.md stays in step with the tree: every top-level folder, and every folder of the core
// and execution tiers, is named in it; every source path it names exists.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "support/fixtures.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;

namespace {
// Folders of the checkout, not of a build or a tool's cache.
bool tree_folder(const fs::directory_entry& e) {
  const std::string n = e.path().filename().string();
  return e.is_directory() && !n.starts_with(".") && !n.starts_with("build") && n != "__pycache__" && n != "shared";
}
}  // namespace

TEST_CASE("ARCHITECTURE.md names every top-level folder and every folder of the tiers", "[docs]") {
  const std::string root = gpusim::test::source_dir();
  const std::string doc = gpusim::test::file_bytes(root + "/ARCHITECTURE.md");
  REQUIRE_FALSE(doc.empty());
  std::set<std::string> missing;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!tree_folder(e)) continue;
    const std::string n = e.path().filename().string();
    if (doc.find("`" + n + "/") == std::string::npos) missing.insert(n + "/");
  }
  for (const char* tier : {"core", "backends", "apps"}) {
    for (const auto& e : fs::directory_iterator(root + "/" + tier)) {
      if (!tree_folder(e)) continue;
      const std::string n = std::string(tier) + "/" + e.path().filename().string();
      // Named as `core/graph`, or as a sub-folder of its tier in a list (`cpu/` under backends/).
      if (doc.find("`" + n) == std::string::npos && doc.find("`" + e.path().filename().string() + "/`") == std::string::npos) {
        missing.insert(n + "/");
      }
    }
  }
  std::string names;
  for (const auto& m : missing) names += " " + m;
  INFO("ARCHITECTURE.md does not name these folders; say what each holds and which tier it is in:" << names);
  CHECK(missing.empty());
}

TEST_CASE("every source path ARCHITECTURE.md names exists", "[docs]") {
  const std::string root = gpusim::test::source_dir();
  const std::string doc = gpusim::test::file_bytes(root + "/ARCHITECTURE.md");
  // `dir/file.ext` in backticks: a path into the tree (../shared/ is outside it).
  const std::regex path(R"(`((?:core|backends|api|apps|include|tests|tools|examples|bench|fuzz|cmake|gpu_profiles|runtimes|models)/[A-Za-z0-9_./-]*)`)");
  int seen = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), path); it != std::sregex_iterator(); ++it) {
    const std::string p = (*it)[1].str();
    INFO(p);
    CHECK(fs::exists(root + "/" + p));
    ++seen;
  }
  CHECK(seen > 20);
}
