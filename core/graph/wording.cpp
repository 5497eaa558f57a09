#include "gpusim/wording.h"

#include <algorithm>
#include <array>

namespace gpusim {
namespace {

// Every option a library message names, as the API spells it (the fields of ImportOptions,
// PredictOptions, SearchOptions, RunOptions, TuneOptions, the calibration and Dojo configs).
constexpr std::array<std::string_view, 40> kOptions = {
    "allow_tf32", "arch",   "autocast", "backend",  "base",           "beam_width",     "budget_s", "check",   "clear",
    "dims",     "dtype",    "force",          "format",         "gpu",      "layout",  "memory_budget_gb",
    "memory_fraction",      "objective",      "out",            "plan",     "plans",   "power_fraction",
    "profile_for",          "profiles",       "quick",          "runtime",  "samples", "scheduler",
    "seed",     "shard",    "skip_patterns",  "store",          "subgraphs", "tiles",  "top",
    "top_k",    "virtual_gpus", "matrix", "matrix_path", "host"};

}  // namespace

bool is_api_switch(std::string_view name) {
  return name == "check" || name == "clear" || name == "force" || name == "quick" || name == "allow_tf32";
}

bool is_api_option(std::string_view name) {
  return std::find(kOptions.begin(), kOptions.end(), name) != kOptions.end();
}

std::string keyword_spelling(std::string_view name, std::string_view value, KeywordSyntax syntax) {
  const bool json = syntax == KeywordSyntax::kJson;
  const auto quoted = [](std::string_view v) { return "\"" + std::string(v) + "\""; };
  std::string key = json ? quoted(name) : std::string(name);
  const std::string assign = json ? ": " : "=";
  if (value.empty()) return is_api_switch(name) ? key + assign + (json ? "true" : "True") : key;
  const size_t eq = value.find('=');
  if (name == "dims" && eq != std::string_view::npos) {  // a map of one dim
    return key + assign + "{" + quoted(value.substr(0, eq)) + ": " + std::string(value.substr(eq + 1)) + "}";
  }
  const bool number = value.find_first_not_of("0123456789.-e") == std::string_view::npos;
  return key + assign + (number ? std::string(value) : quoted(value));
}

std::string reword_options(std::string_view message, OptionSpelling spell) {
  std::string out;
  out.reserve(message.size());
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('`', i);
    if (open == std::string_view::npos) break;
    const size_t close = message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view inner = message.substr(open + 1, close - open - 1);
    const size_t space = inner.find(' ');
    const std::string_view name = inner.substr(0, space);
    const std::string_view value = space == std::string_view::npos ? std::string_view{} : inner.substr(space + 1);
    std::string spelled = is_api_option(name) && spell ? spell(name, value) : std::string{};
    out.append(message.substr(i, open - i));
    if (spelled.empty()) {
      out.append(message.substr(open, close - open + 1));
    } else {
      out.append(spelled);
    }
    i = close + 1;
  }
  out.append(message.substr(i));
  return out;
}

}  // namespace gpusim
