#include "gpusim/gpu_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "base/closest.h"

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
  // Rank: 2 = a device name listed whole, 1 = the display name inside the device's; then the
  // longer display name; then calibrated over datasheet.
  std::optional<GpuProfile> best;
  int best_rank = 0;
  size_t best_len = 0;
  for (const auto& e : list_profiles(dirs)) {
    auto p = load_profile(e.path, dirs);
    if (!p) continue;
    const bool calibrated = p->calibrated.has_value();
    if (datasheet_only && calibrated) continue;
    const std::string disp = lower(p->display_name);
    int rank = 0;
    for (const std::string& n : p->device_names) {
      if (!n.empty() && lower(n) == dev) rank = 2;
    }
    if (rank == 0 && !disp.empty() && dev.find(disp) != std::string::npos) rank = 1;
    if (rank == 0) continue;
    // On a tie: the calibrated profile, then the chip's full configuration ("Apple M3 Max" names the
    // 30- and the 40-core GPU; Metal does not say which).
    const bool longer = disp.size() > best_len ||
                        (disp.size() == best_len && ((calibrated && !best->calibrated) ||
                                                     (calibrated == best->calibrated.has_value() && p->compute.units > best->compute.units)));
    const bool better = rank > best_rank || (rank == best_rank && longer);
    if (better) {
      best = *p;
      best_rank = rank;
      best_len = disp.size();
    }
  }
  return best;
}

std::vector<ProfileEntry> list_profiles(const std::vector<std::string>& dirs, std::vector<std::string>* warnings) {
  namespace fs = std::filesystem;
  std::vector<ProfileEntry> out;
  std::set<std::string> seen;
  for (const std::string& d : dirs) {
    // A folder that cannot be read (permissions, a symlink loop, a name too long) is skipped with a
    // warning: one bad entry on the search path must not take every profile with it.
    std::error_code ec;
    const bool dir = fs::is_directory(d, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
      if (warnings) warnings->push_back(fmt::format("profile folder {}: cannot be read ({}); skipped", d, ec.message()));
      continue;
    }
    if (!dir) continue;
    std::vector<ProfileEntry> here;
    fs::recursive_directory_iterator it(d, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code fe;
      const fs::directory_entry& e = *it;
      if (it.depth() == 0 && e.path().filename() == "families" && e.is_directory(fe)) {
        it.disable_recursion_pending();  // architecture families, not profiles (list_families)
        continue;
      }
      if (e.is_regular_file(fe) && e.path().extension() == ".yaml" && !e.path().stem().string().starts_with("_")) {
        here.push_back({e.path().stem().string(), e.path().string()});
      }
    }
    if (ec && warnings) {
      warnings->push_back(fmt::format("profile folder {}: cannot be read ({}); {}", d, ec.message(),
                                      here.empty() ? "skipped" : "the profiles found before it are used"));
    }
    std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    for (auto& p : here) {
      if (seen.insert(p.name).second) out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> list_families(const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  std::set<std::string> names;
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(fs::path(d) / "families", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code fe;
      if (it->is_regular_file(fe) && it->path().extension() == ".yaml") names.insert(it->path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> profile_dir_warnings(const std::vector<std::string>& dirs) {
  std::vector<std::string> w;
  (void)list_profiles(dirs, &w);
  return w;
}

namespace {

// A name's tokens: lower-cased words split at spaces, '-', '_' and '/' ("RTX 3060" -> rtx, 3060).
std::vector<std::string> name_tokens(const std::string& s) {
  std::vector<std::string> out(1);
  for (const char ch : s) {
    if (ch == ' ' || ch == '-' || ch == '_' || ch == '/' || ch == '\t' || ch == '(' || ch == ')' || ch == ',' ||
        ch == '[' || ch == ']' || ch == ':' || ch == ';') {
      if (!out.back().empty()) out.emplace_back();
    } else {
      out.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// Whether `needle` occurs as a run of whole tokens in `hay` ("h100 sxm" in nvidia-h100-sxm).
bool has_token_run(const std::vector<std::string>& hay, const std::vector<std::string>& needle) {
  if (needle.empty() || needle.size() > hay.size()) return false;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Result<GpuProfile> find_profile(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml")) {
    return load_profile(name_or_path, dirs);
  }
  const std::vector<ProfileEntry> entries = list_profiles(dirs);
  for (const ProfileEntry& e : entries) {
    if (e.name == name_or_path) return load_profile(e.path, dirs);
  }
  if (entries.empty()) {
    return make_error(ErrorCode::kNotFound, "no GPU profile named \"" + name_or_path +
                                                "\"; known profiles: (none found) (or pass a path to a .yaml file; "
                                                "`gpusim profiles list` shows them)");
  }
  // Not an id as written: the same id in other case or spacing ("NVIDIA_T4"), a display name
  // ("NVIDIA GeForce RTX 3060 12GB"), or a run of their words that only one profile has ("3060",
  // "RTX 3060", "h100-sxm"). Display names are read only on this path.
  const std::vector<std::string> want = name_tokens(name_or_path);
  // Tiers, best first: the whole id or display name; the id without its vendor word ("v100" is
  // nvidia-v100, not also nvidia-v100-pcie-32gb); a run of words.
  std::vector<const ProfileEntry*> exact, vendorless, partial, inside, device;
  std::map<const ProfileEntry*, int> units;  // of the profiles a device name names
  size_t inside_len = 0;  // the longest name found inside the query wins that tier
  for (const ProfileEntry& e : entries) {
    const std::vector<std::string> id = name_tokens(e.name);
    std::vector<std::string> disp;
    std::vector<std::vector<std::string>> devices;
    if (auto p = load_profile(e.path, dirs)) {
      disp = name_tokens(p->display_name);
      for (const std::string& d : p->device_names) devices.push_back(name_tokens(d));
      units[&e] = p->compute.units;
    }
    // The name a driver reports ("Apple M1 Max"; Metal does not say how many GPU cores).
    if (!want.empty() && std::find(devices.begin(), devices.end(), want) != devices.end()) device.push_back(&e);
    // A name as a tool prints it, with more around it ("AMD Radeon RX 7900 XTX (RADV NAVI31)",
    // "NVIDIA GeForce RTX 4090, 550.54"): the longest display or device name inside it.
    devices.push_back(disp);
    for (const auto& n : devices) {
      if (n.size() < 2 || n.size() < inside_len || !has_token_run(want, n)) continue;
      if (n.size() > inside_len) inside.clear();
      if (inside.empty() || inside.back() != &e) inside.push_back(&e);
      inside_len = n.size();
    }
    if (!want.empty() && (want == id || want == disp)) {
      exact.push_back(&e);
    } else if (!want.empty() && id.size() == want.size() + 1 && std::equal(want.begin(), want.end(), id.begin() + 1)) {
      vendorless.push_back(&e);
    } else if (has_token_run(id, want) || has_token_run(disp, want)) {
      partial.push_back(&e);
    }
  }
  // A device name several profiles list is one chip in several configurations: the full one (the
  // most units) is taken, and the profile says so among its assumptions.
  if (exact.empty() && device.size() > 1) {
    const ProfileEntry* full = device.front();
    bool tie = false;
    for (const ProfileEntry* e : device) {
      if (units[e] > units[full]) {
        full = e;
        tie = false;
      } else if (e != full && units[e] == units[full]) {
        tie = true;
      }
    }
    if (!tie) {
      auto p = load_profile(full->path, dirs);
      if (p) {
        std::vector<std::string> others;
        for (const ProfileEntry* e : device) {
          if (e != full) others.push_back(e->name);
        }
        p->assumptions.push_back("\"" + name_or_path + "\" is the device name of " + std::to_string(device.size()) +
                                 " profiles: the full configuration, " + full->name + " (" + std::to_string(units[full]) +
                                 " units), was taken; name " + joined(others) + " for the other" +
                                 (others.size() > 1 ? "s" : ""));
      }
      return p;
    }
  }
  if (exact.empty() && device.size() == 1) return load_profile(device.front()->path, dirs);
  std::vector<const ProfileEntry*> hits = !exact.empty()      ? exact
                                          : !vendorless.empty() ? vendorless
                                          : !partial.empty()    ? partial
                                                                : inside;
  // Words of the id beyond the query's: "3060" is the RTX 3060 (one word more, rtx) rather than the
  // RTX 3060 Ti (two); a tie stays ambiguous ("a100": the 40 and 80 GB cards).
  if (hits.size() > 1 && hits == partial) {
    const auto extra = [&](const ProfileEntry* e) {
      return static_cast<long>(name_tokens(e->name).size()) - static_cast<long>(want.size());
    };
    long fewest = extra(hits.front());
    for (const ProfileEntry* e : hits) fewest = std::min(fewest, extra(e));
    std::vector<const ProfileEntry*> best;
    for (const ProfileEntry* e : hits) {
      if (extra(e) == fewest) best.push_back(e);
    }
    if (best.size() == 1) hits = best;
  }
  if (hits.size() == 1) return load_profile(hits.front()->path, dirs);
  const std::string tail = " (or pass a path to a .yaml file; `gpusim profiles list` shows all " +
                           std::to_string(entries.size()) + ")";
  if (hits.size() > 1) {
    std::vector<std::string> names;
    for (const ProfileEntry* e : hits) names.push_back(e->name);
    return make_error(ErrorCode::kNotFound, "no GPU profile named \"" + name_or_path + "\", and it matches " +
                                                std::to_string(hits.size()) + " profiles: " + joined(names) +
                                                "; name one of them" + tail);
  }
  // The closest ids by edit distance over the joined tokens, at most three.
  std::string flat;
  for (const std::string& t : want) flat += (flat.empty() ? "" : "-") + t;
  std::vector<std::string> ids;
  for (const ProfileEntry& e : entries) ids.push_back(e.name);
  const std::vector<std::string> close = closest_names(flat, ids, 3);
  return make_error(ErrorCode::kNotFound,
                    "no GPU profile named \"" + name_or_path + "\"; closest: " + joined(close) + tail +
                        "; for a card without a profile, `gpusim profiles new` writes one from its spec sheet's "
                        "numbers and an architecture family (`gpusim profiles families` lists them)");
}

}  // namespace gpusim
