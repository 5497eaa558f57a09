// How gpusim writes JSON text. Documents carry strings from input files (node and tensor names,
// messages that quote them), and an ONNX file's names need not be UTF-8: dumped with this handler,
// a byte that is not UTF-8 becomes U+FFFD instead of nlohmann throwing type_error 316. Every JSON
// text gpusim writes passes it: j.dump(2, ' ', false, gpusim::kInvalidUtf8).
#pragma once

#include <nlohmann/json.hpp>

namespace gpusim {

inline constexpr auto kInvalidUtf8 = nlohmann::json::error_handler_t::replace;

}  // namespace gpusim
