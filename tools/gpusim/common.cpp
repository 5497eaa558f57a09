#include "common.h"

#include "gpusim/onnx_import.h"

namespace gpusim::cli {

Result<Graph> load_model(const std::string& path, const std::vector<std::string>& dims) {
  ImportOptions opts;
  for (const std::string& d : dims) {
    auto kv = parse_dim_override(d);
    if (!kv) return kv.error();
    opts.dims[kv->first] = kv->second;
  }
  return import_onnx(path, opts);
}

Result<GpuProfile> load_gpu(const std::string& name_or_path, const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs = extra_dirs;
  for (const std::string& d : default_profile_dirs()) dirs.push_back(d);
  return find_profile(name_or_path, dirs);
}

Result<DType> parse_dtype(const std::string& s) {
  if (s == "fp32") return DType::kFloat32;
  if (s == "fp16") return DType::kFloat16;
  if (s == "bf16") return DType::kBFloat16;
  return make_error(ErrorCode::kInvalidArgument,
                    "--dtype \"" + s + "\" is not supported; expected fp32, fp16 or bf16");
}

int exit_code(const Error& e) { return e.code == ErrorCode::kInvalidArgument ? 2 : 1; }

}  // namespace gpusim::cli
