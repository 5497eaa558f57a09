// The regression corpus: every input under tests/data/bad/<edge>/ (each one a crash, hang or wrong
// answer the fuzzers found, or a hostile input named in an issue) runs through its edge exactly as
// the fuzz target does (fuzz/edges.h) and must answer what its .expected file says: a line
// "error: TEXT" (the message contains TEXT) or "ok" (the input goes through).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "edges.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

TEST_CASE("regression inputs answer their expected messages", "[fuzz][bad]") {
  const fs::path root = fs::path(GPUSIM_SOURCE_DIR) / "tests" / "data" / "bad";
  const std::vector<std::pair<std::string, std::function<std::string(std::string_view)>>> edges = {
      {"onnx", gpusim::edges::onnx},
      {"profile", gpusim::edges::profile_yaml},
      {"plan", gpusim::edges::plan_json},
      {"serve", gpusim::edges::serve_request}};
  int cases = 0;
  for (const auto& [edge, run] : edges) {
    std::vector<fs::path> inputs;
    for (const auto& e : fs::directory_iterator(root / edge)) {
      if (e.path().extension() != ".expected") inputs.push_back(e.path());
    }
    std::sort(inputs.begin(), inputs.end());
    for (const fs::path& in : inputs) {
      const fs::path exp_path = fs::path(in.string() + ".expected");
      INFO(in.string());
      REQUIRE(fs::exists(exp_path));
      const std::string expected = trim(gpusim::test::file_bytes(exp_path.string()));
      const std::string got = run(gpusim::test::file_bytes(in.string()));
      if (expected == "ok") {
        CHECK(got == "");
      } else {
        REQUIRE(expected.rfind("error: ", 0) == 0);
        CHECK_THAT(got, Catch::Contains(expected.substr(7)));
      }
      ++cases;
    }
  }
  CHECK(cases >= 8);
}
