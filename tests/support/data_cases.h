// Data-driven tests: one registered Catch2 test case per data file, so one bad file fails its own
// case (and ctest test) and never hides the others. Called at namespace scope, at static
// initialisation, before Catch2 lists or runs anything:
//
//   static const int golden = gpusim::test::file_cases(
//       "tests/data/golden", ".json", "golden prediction", "[predict][golden]",
//       [](const std::filesystem::path& file) { ... CHECKs ... });
//
// registers "golden prediction: resnet50-t4-fp32.json" and so on, in file-name order. A directory
// with no such file registers one failing case that says so.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace gpusim::test {

// Files under SOURCE_DIR/`dir` (one level) whose name ends with `suffix` and that `select` (when
// given) accepts, each a test case named "`prefix`: <file name>" with `tags`, running `body(file)`.
// Returns how many were registered.
int file_cases(const std::string& dir, const std::string& suffix, const std::string& prefix, const std::string& tags,
               std::function<void(const std::filesystem::path&)> body,
               std::function<bool(const std::filesystem::path&)> select = {});

}  // namespace gpusim::test
