// Library messages speak the API's terms (wording.h): options in backquotes as the API spells
// them, never a command-line flag; each front end rewords them its own way.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "gpusim/onnx_import.h"
#include "gpusim/wording.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {
std::string flags(std::string_view name, std::string_view value) {
  std::string f = name == "dims" ? "--dim" : "--" + std::string(name);
  return value.empty() ? f : f + " " + std::string(value);
}
std::string fields(std::string_view name, std::string_view value) {
  return value.empty() ? "\"" + std::string(name) + "\"" : "\"" + std::string(name) + "\": " + std::string(value);
}
}  // namespace

TEST_CASE("reword_options spells the options a message names, and nothing else", "[wording]") {
  const std::string m = "set it with `dims batch=N`; give smaller `dims` values, or `dtype fp16`; `gpusim profiles "
                        "list` lists profiles; `not_an_option x` stays";
  CHECK(reword_options(m, flags) ==
        "set it with --dim batch=N; give smaller --dim values, or --dtype fp16; `gpusim profiles list` lists profiles; "
        "`not_an_option x` stays");
  CHECK(reword_options(m, fields) ==
        "set it with \"dims\": batch=N; give smaller \"dims\" values, or \"dtype\": fp16; `gpusim profiles list` lists "
        "profiles; `not_an_option x` stays");
  // A spelling that keeps the API's wording, an unclosed quote, and an empty message.
  CHECK(reword_options(m, [](std::string_view, std::string_view) { return std::string(); }) == m);
  CHECK(reword_options("half `dims", flags) == "half `dims");
  CHECK(reword_options("", flags).empty());
  CHECK(option_ref("dims", "batch=N") == "`dims batch=N`");
  CHECK(is_api_option("beam_width"));
  CHECK(is_api_switch("force"));
  CHECK_FALSE(is_api_switch("dims"));
  CHECK_FALSE(is_api_option("beam-width"));
  // The service's and Python's shared spelling.
  const auto json = [](std::string_view n, std::string_view v) { return keyword_spelling(n, v, KeywordSyntax::kJson); };
  const auto py = [](std::string_view n, std::string_view v) { return keyword_spelling(n, v, KeywordSyntax::kPython); };
  CHECK(json("dims", "batch=N") == "\"dims\": {\"batch\": N}");
  CHECK(py("dims", "batch=N") == "dims={\"batch\": N}");
  CHECK(json("dtype", "fp16") == "\"dtype\": \"fp16\"");
  CHECK(py("dtype", "fp16") == "dtype=\"fp16\"");
  CHECK(json("top_k", "0") == "\"top_k\": 0");
  CHECK(py("top_k", "0") == "top_k=0");
  CHECK(json("force", "") == "\"force\": true");
  CHECK(py("force", "") == "force=True");
  CHECK(json("gpu", "") == "\"gpu\"");
  CHECK(py("gpu", "") == "gpu");
}

TEST_CASE("the library's messages name options as the API spells them, never as CLI flags", "[wording]") {
  // A message built in the core, the API facade or a backend names no --flag (the front ends in
  // apps/ add their own). Compiler command lines and the CLI commands a message suggests, in
  // backquotes or after "gpusim ", are not flags of the caller's.
  const std::string root = test::source_dir();
  const std::regex literal(R"re("((?:[^"\\]|\\.)*)")re");
  const std::regex flag(R"(--[a-z][a-z-]*[a-z])");
  std::vector<std::string> found;
  for (const char* tier : {"core", "api", "backends"}) {
    for (const auto& e : fs::recursive_directory_iterator(root + "/" + tier)) {
      if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const std::string code = line.substr(0, line.find("//"));
        if (code.find("options = {") != std::string::npos) continue;  // a compiler's command line
        for (auto it = std::sregex_iterator(code.begin(), code.end(), literal); it != std::sregex_iterator(); ++it) {
          std::string text = (*it)[1].str();
          // Drop the commands a message suggests: `gpusim ...` in backquotes, or "gpusim plan MODEL ...".
          text = std::regex_replace(text, std::regex(R"(`gpusim [^`]*`?)"), "");
          text = std::regex_replace(text, std::regex(R"(gpusim [a-z]+ (MODEL|[a-z]+)[^;)]*)"), "");
          if (std::regex_search(text, flag)) {
            found.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n) + ": " + (*it)[0].str());
          }
        }
      }
    }
  }
  std::ostringstream list;
  for (const auto& f : found) list << "\n  " << f;
  INFO("name the option as the API spells it, in backquotes (wording.h: option_ref):" << list.str());
  CHECK(found.empty());
}

TEST_CASE("an unresolved dim names the option as the API spells it", "[wording]") {
  test::OnnxBuilder b;
  b.input("x", 1, {test::Dim{std::string("batch")}, test::Dim{int64_t{4}}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = import_onnx(b.write("wording_dims.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Catch::Contains("set it with `dims batch=N`"));
  CHECK_THAT(reword_options(g.error().message, flags), Catch::Contains("set it with --dim batch=N"));
}
