#include "common.h"

#include <cctype>

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

std::optional<GpuProfile> profile_for_device(const std::string& device_name, const std::vector<std::string>& dirs,
                                             bool datasheet_only) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string dev = lower(device_name);
  std::optional<GpuProfile> best;
  size_t best_len = 0;
  for (const auto& e : list_profiles(dirs)) {
    auto p = load_profile(e.path, dirs);
    if (!p) continue;
    const bool calibrated = p->calibrated.has_value();
    if (datasheet_only && calibrated) continue;
    const std::string disp = lower(p->display_name);
    if (disp.empty() || dev.find(disp) == std::string::npos) continue;
    const bool better = disp.size() > best_len || (disp.size() == best_len && calibrated && !best->calibrated);
    if (better) {
      best = *p;
      best_len = disp.size();
    }
  }
  return best;
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
