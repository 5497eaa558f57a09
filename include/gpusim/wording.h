// How library messages name the API's options, and how each front end words them.
//
// The library speaks the API's own terms: a message names an option in backquotes as the C++ API
// and the JSON documents spell it (`dtype`, `beam_width`), and a setting as the option, a space
// and the value (`dims batch=N`, `dtype fp16`). It never writes a command-line flag or an HTTP
// field. A front end rewords what it prints, with its own spelling of each option:
//   gpusim run: give smaller --dim values                      (the CLI)
//   "dims": {"batch": N}                                       (the service)
//   dims={"batch": N}                                          (Python)
// Which front end gets which exit code or HTTP status follows Error::code, never the text.
//
// Usage:
//   return make_error(ErrorCode::kShape, fmt::format("{}: set it with {}", path, option_ref("dims", name + "=N")));
//   fmt::print(stderr, "{}\n", reword_options(e.message, my_spelling));
#pragma once

#include "gpusim/export.h"

#include <string>
#include <string_view>

namespace gpusim {

// "`name`", or "`name value`" with a value.
inline std::string option_ref(std::string_view name, std::string_view value = {}) {
  std::string s = "`";
  s += name;
  if (!value.empty()) {
    s += ' ';
    s += value;
  }
  s += '`';
  return s;
}

// Whether `name` is an option of the API that messages may name (the list in wording.cpp).
GPUSIM_API bool is_api_option(std::string_view name);
// Whether it is a switch (check, clear, force, quick): `force` means "set it", which the CLI
// spells --force, the service "force": true and Python force=True.
GPUSIM_API bool is_api_switch(std::string_view name);

// A front end's spelling of an option, and of a setting when `value` is not empty ("--dim" and
// "--dim batch=N" for the CLI). Return an empty string to keep the API's wording.
using OptionSpelling = std::string (*)(std::string_view name, std::string_view value);

// The spelling the service and Python share, in their two syntaxes: a keyword and its value
// (`dims batch=N` -> "dims": {"batch": N} or dims={"batch": N}; `dtype fp16` -> "dtype": "fp16" or
// dtype="fp16"; a switch -> "force": true or force=True; an option alone -> "gpu" or gpu).
enum class KeywordSyntax { kJson, kPython };
GPUSIM_API std::string keyword_spelling(std::string_view name, std::string_view value, KeywordSyntax syntax);

// `message` with every backquoted option (`name` or `name value`, name an API option) spelled
// by `spell`; other backquoted text (a command such as `gpusim profiles list`) is left as it is.
GPUSIM_API std::string reword_options(std::string_view message, OptionSpelling spell);

}  // namespace gpusim
