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
#include "support/data_cases.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// One test case per input: "bad input onnx: <file>" and so on.
void check_bad_input(const std::function<std::string(std::string_view)>& run, const fs::path& in) {
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
}

bool not_expected(const fs::path& p) { return p.extension() != ".expected"; }

const int onnx_cases = gpusim::test::file_cases(
    "tests/data/bad/onnx", "", "bad input onnx", "[fuzz][bad]",
    [](const fs::path& f) { check_bad_input(gpusim::edges::onnx, f); }, not_expected);
const int profile_cases = gpusim::test::file_cases(
    "tests/data/bad/profile", "", "bad input profile", "[fuzz][bad]",
    [](const fs::path& f) { check_bad_input(gpusim::edges::profile_yaml, f); }, not_expected);
const int plan_cases = gpusim::test::file_cases(
    "tests/data/bad/plan", "", "bad input plan", "[fuzz][bad]",
    [](const fs::path& f) { check_bad_input(gpusim::edges::plan_json, f); }, not_expected);
const int serve_cases = gpusim::test::file_cases(
    "tests/data/bad/serve", "", "bad input serve", "[fuzz][bad]",
    [](const fs::path& f) { check_bad_input(gpusim::edges::serve_request, f); }, not_expected);

}  // namespace

TEST_CASE("every regression input has its expected answer, and each edge has inputs", "[fuzz][bad]") {
  CHECK(onnx_cases >= 8);
  CHECK(profile_cases >= 4);
  CHECK(plan_cases >= 8);
  CHECK(serve_cases >= 2);
  // An .expected file with no input beside it is a case that never runs.
  for (const char* edge : {"onnx", "profile", "plan", "serve"}) {
    for (const auto& e : fs::directory_iterator(fs::path(GPUSIM_SOURCE_DIR) / "tests" / "data" / "bad" / edge)) {
      if (e.path().extension() != ".expected") continue;
      INFO(e.path().string());
      CHECK(fs::exists(e.path().parent_path() / e.path().stem()));
    }
  }
}
