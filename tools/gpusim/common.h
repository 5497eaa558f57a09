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
// The profile whose display name occurs in a device's name ("NVIDIA H200" -> nvidia-h200); the
// longest display name wins, and on a tie a calibrated profile beats a datasheet one, unless
// `datasheet_only` (calibration wants the datasheet profile to extend).
std::optional<GpuProfile> profile_for_device(const std::string& device_name, const std::vector<std::string>& dirs,
                                             bool datasheet_only = false);
// Exit code for an error: 2 for bad arguments, 1 otherwise.
int exit_code(const Error& e);

}  // namespace gpusim::cli
