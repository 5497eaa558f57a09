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

}  // namespace gpusim::cli
