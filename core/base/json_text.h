// How gpusim writes and reads JSON text.
//
// Writing: documents carry strings from input files (node and tensor names, messages that quote
// them), and an ONNX file's names need not be UTF-8: dumped with this handler, a byte that is not
// UTF-8 becomes U+FFFD instead of nlohmann throwing type_error 316. Every JSON text gpusim writes
// passes it: j.dump(2, ' ', false, gpusim::kInvalidUtf8).
//
// Reading: every reader of a file or column parses through parse_json(), which refuses nesting
// deeper than kMaxJsonDepth before nlohmann (and the recursive readers after it) see the text. No
// gpusim document nests more than a handful of levels; a plan nested 100,000 deep overflowed the
// stack.
#pragma once


#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpusim/result.h"

namespace gpusim {

inline constexpr auto kInvalidUtf8 = nlohmann::json::error_handler_t::replace;

inline constexpr int kMaxJsonDepth = 64;

// One pass over the structure of `text` (brackets and commas outside strings, escapes skipped):
// the byte at which it first nests arrays and objects deeper than `max_depth` (npos if never), and
// whether it holds more than `max_values` values (commas + 1). It stops at the first excess.
struct JsonScan {
  size_t too_deep_at = std::string_view::npos;
  bool too_many_values = false;
};
inline JsonScan scan_json(std::string_view text, int max_depth, int64_t max_values = INT64_MAX) {
  JsonScan r;
  int depth = 0;
  int64_t values = 1;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        r.too_deep_at = i;
        return r;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && ++values > max_values) {
      r.too_many_values = true;
      return r;
    }
  }
  return r;
}

// The byte offset at which `text` nests deeper than `limit`, or std::string_view::npos.
inline size_t json_depth_excess(std::string_view text, int limit = kMaxJsonDepth) {
  return scan_json(text, limit).too_deep_at;
}

// Parses `text` (a file, a column, a request) named `where` in messages: a depth over kMaxJsonDepth
// or malformed text is a kParse error naming the byte.
inline Result<nlohmann::json> parse_json(std::string_view text, const std::string& where) {
  if (const size_t at = json_depth_excess(text); at != std::string_view::npos) {
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: JSON nested deeper than {} levels at byte {}; gpusim's documents nest a few "
                                  "levels: is this the right file?",
                                  where, kMaxJsonDepth, at));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    return make_error(ErrorCode::kParse, fmt::format("{}: not valid JSON at byte {}: {}", where, e.byte,
                                                     colon == std::string::npos ? what : what.substr(colon + 2)));
  } catch (const nlohmann::json::exception& e) {  // a number past double's range (out_of_range 406), ...
    const std::string what = e.what();
    const size_t br = what.find("] ");
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: not valid JSON: {}", where, br == std::string::npos ? what : what.substr(br + 2)));
  }
}

}  // namespace gpusim
