// Shared CLI plumbing: loading a model with --dim overrides, a GPU profile by name, a --dtype value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim::cli {

// Imports MODEL with the --dim texts applied. Bad --dim text is ErrorCode::kInvalidArgument.
Result<Graph> load_model(const std::string& path, const std::vector<std::string>& dims);
// A profile by name or path, searching --profiles dirs first, then the defaults.
Result<GpuProfile> load_gpu(const std::string& name_or_path, const std::vector<std::string>& extra_dirs);
// "fp32" | "fp16" | "bf16" -> DType; anything else is an error naming the allowed values.
Result<DType> parse_dtype(const std::string& s);
// Exit code for an error: 2 for bad arguments, 1 otherwise.
int exit_code(const Error& e);

}  // namespace gpusim::cli
