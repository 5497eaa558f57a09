// Shared CLI plumbing: a --dtype value, and the exit code for an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim::cli {

// "fp32" | "fp16" | "bf16" -> DType; anything else is an error naming the allowed values.
Result<DType> parse_dtype(const std::string& s);
// Exit code for an error: 2 for bad arguments, 1 otherwise.
int exit_code(const Error& e);

// `word` as one POSIX shell word: unchanged when it has only safe characters, else single-quoted.
std::string shell_word(const std::string& word);
// A command line a user can paste: "gpusim" then each word shell-quoted, space-separated.
std::string shell_command(const std::vector<std::string>& words);

}  // namespace gpusim::cli
