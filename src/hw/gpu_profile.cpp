#include "gpusim/gpu_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace gpusim {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp64: return "fp64";
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
    case Precision::kFp4: return "fp4";
    case Precision::kInt32: return "int32";
    case Precision::kInt8: return "int8";
    case Precision::kInt4: return "int4";
  }
  return "fp32";
}

std::optional<Precision> precision_from_name(std::string_view s) {
  for (Precision p : {Precision::kFp64, Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16,
                      Precision::kFp8, Precision::kFp4, Precision::kInt32, Precision::kInt8, Precision::kInt4}) {
    if (precision_name(p) == s) return p;
  }
  return std::nullopt;
}

Precision precision_of(DType t) {
  switch (t) {
    case DType::kFloat64: case DType::kComplex128: return Precision::kFp64;
    case DType::kFloat16: return Precision::kFp16;
    case DType::kBFloat16: return Precision::kBf16;
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2: case DType::kFloat8E5M2FNUZ:
      return Precision::kFp8;
    case DType::kInt8: case DType::kUInt8: return Precision::kInt8;
    case DType::kInt4: case DType::kUInt4: return Precision::kInt4;
    case DType::kInt16: case DType::kUInt16: case DType::kInt32: case DType::kUInt32: case DType::kInt64:
    case DType::kUInt64: case DType::kBool:
      return Precision::kInt32;
    default: return Precision::kFp32;
  }
}

namespace {
// Width order for accumulate types: a wider accumulator is acceptable where a narrower one is asked.
int width(Precision p) {
  switch (p) {
    case Precision::kFp64: return 64;
    case Precision::kFp32: case Precision::kInt32: case Precision::kTf32: return 32;
    case Precision::kFp16: case Precision::kBf16: return 16;
    default: return 8;
  }
}
}  // namespace

std::optional<double> GpuProfile::matrix_tflops(Precision input, Precision min_accumulate) const {
  // The narrowest accumulate that satisfies the request is the rate kernels get; ties: the faster.
  std::optional<double> best;
  int best_width = 0;
  for (const MatrixPeak& m : compute.matrix_tflops) {
    const int w = width(m.accumulate);
    if (m.input != input || w < width(min_accumulate)) continue;
    if (!best || w < best_width || (w == best_width && m.tflops > *best)) {
      best = m.tflops;
      best_width = w;
    }
  }
  return best;
}

double GpuProfile::vector_tflops(Precision p) const {
  auto it = compute.vector_tflops.find(p);
  if (it != compute.vector_tflops.end()) return it->second;
  auto f32 = compute.vector_tflops.find(Precision::kFp32);
  return f32 == compute.vector_tflops.end() ? 0.0 : f32->second;
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

std::vector<ProfileEntry> list_profiles(const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  std::vector<ProfileEntry> out;
  std::set<std::string> seen;
  for (const std::string& d : dirs) {
    if (!fs::is_directory(d)) continue;
    std::vector<ProfileEntry> here;
    for (const auto& e : fs::recursive_directory_iterator(d)) {
      if (e.is_regular_file() && e.path().extension() == ".yaml" && !e.path().stem().string().starts_with("_")) {
        here.push_back({e.path().stem().string(), e.path().string()});
      }
    }
    std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    for (auto& p : here) {
      if (seen.insert(p.name).second) out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<GpuProfile> find_profile(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml")) {
    return load_profile(name_or_path, dirs);
  }
  for (const ProfileEntry& e : list_profiles(dirs)) {
    if (e.name == name_or_path) return load_profile(e.path, dirs);
  }
  std::string known;
  for (const ProfileEntry& e : list_profiles(dirs)) known += (known.empty() ? "" : ", ") + e.name;
  return make_error(ErrorCode::kNotFound,
                    "no GPU profile named \"" + name_or_path + "\"; known profiles: " +
                        (known.empty() ? std::string("(none found)") : known) +
                        " (or pass a path to a .yaml file; `gpusim profiles list` shows them)");
}

}  // namespace gpusim
