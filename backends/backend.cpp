// The backend registry: which backends this binary has, listing devices and opening one by name.
#include "backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "null/null_backend.h"
#ifdef GPUSIM_HAVE_VULKAN
#include "vulkan/vulkan_backend.h"
#endif
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/hip_backend.h"
#endif

namespace gpusim::backend {

std::vector<std::string> built_backends() {
  std::vector<std::string> out;  // real devices only: "null" (no device, always built) is not listed
#ifdef GPUSIM_HAVE_VULKAN
  out.push_back("vulkan");
#endif
#ifdef GPUSIM_HAVE_CUDA
  out.push_back("cuda");
#endif
#ifdef GPUSIM_HAVE_HIP
  out.push_back("hip");
#endif
  return out;
}

namespace {
// The plugins registered in this process (register_backend), by name.
struct Registry {
  std::mutex mu;
  std::map<std::string, BackendPlugin> plugins;
};
Registry& registry() {
  static Registry r;
  return r;
}
const char* const kBuiltIn[] = {"cpu", "null", "vulkan", "cuda", "hip"};

// A copy of the plugin named `name`, if one is registered (called without holding the lock after).
std::optional<BackendPlugin> plugin(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto it = r.plugins.find(name);
  if (it == r.plugins.end()) return std::nullopt;
  return it->second;
}

Error not_built(const std::string& name) {
  std::string built;
  for (const auto& b : built_backends()) built += (built.empty() ? "" : ", ") + b;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("backend \"{}\" is not built into this gpusim (built: {}); the known backends are "
                                "cpu, null, vulkan, cuda and hip, the last three built when their SDK is installed at configure time "
                                "(tools/install-deps.sh)",
                                name, built.empty() ? "none" : built));
}
}  // namespace

bool is_device_backend(const std::string& name) {
  return name == "null" || name == "vulkan" || name == "cuda" || name == "hip" || plugin(name).has_value();
}

Status register_backend(BackendPlugin p) {
  if (p.api_version != GPUSIM_BACKEND_API_VERSION) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend plugin \"{}\": built against backend API version {}, this gpusim has {}; "
                                  "rebuild the plugin against this gpusim's include/gpusim/backend_plugin.h",
                                  p.name, p.api_version, GPUSIM_BACKEND_API_VERSION));
  }
  const bool well_formed = !p.name.empty() && p.name.size() <= 64 && std::all_of(p.name.begin(), p.name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!well_formed) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend plugin name \"{}\": give 1 to 64 of a-z, 0-9, _ and - (it is what "
                                  "CompileOptions::backend names)",
                                  p.name.substr(0, 80)));
  }
  if (std::find(std::begin(kBuiltIn), std::end(kBuiltIn), p.name) != std::end(kBuiltIn)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend plugin name \"{}\" is one of gpusim's own backends (cpu, null, vulkan, "
                                  "cuda, hip); choose another name",
                                  p.name));
  }
  if (!p.list_devices || !p.open) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend plugin \"{}\": {} is not set; a plugin lists its devices and opens one",
                                  p.name, !p.list_devices ? "list_devices" : "open"));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.plugins.count(p.name) > 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend plugin \"{}\" is registered already; unregister_backend it first", p.name));
  }
  std::string name = p.name;
  r.plugins.emplace(std::move(name), std::move(p));
  return Ok{};
}

Status unregister_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.plugins.erase(name) == 0) {
    return make_error(ErrorCode::kNotFound, fmt::format("no backend plugin named \"{}\" is registered", name));
  }
  return Ok{};
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [name, p] : r.plugins) out.push_back(name);
  return out;
}

Result<std::vector<DeviceInfo>> list_devices(const std::string& name) {
  if (auto p = plugin(name)) return p->list_devices();
  if (name == "null") return null::list_devices();
#ifdef GPUSIM_HAVE_VULKAN
  if (name == "vulkan") return vulkan::list_devices();
#endif
#ifdef GPUSIM_HAVE_CUDA
  if (name == "cuda") return cuda::list_devices();
#endif
#ifdef GPUSIM_HAVE_HIP
  if (name == "hip") return hip::list_devices();
#endif
  return not_built(name);
}

Result<std::unique_ptr<Backend>> open(const std::string& name, [[maybe_unused]] int index) {
  if (auto p = plugin(name)) {
    auto dev = p->open(index);
    if (dev && !*dev) {
      return make_error(ErrorCode::kInternal, fmt::format("backend plugin \"{}\" opened device {} as null", name, index));
    }
    return dev;
  }
  if (name == "null") return null::open(index);
#ifdef GPUSIM_HAVE_VULKAN
  if (name == "vulkan") return vulkan::open(index);
#endif
#ifdef GPUSIM_HAVE_CUDA
  if (name == "cuda") return cuda::open(index);
#endif
#ifdef GPUSIM_HAVE_HIP
  if (name == "hip") return hip::open(index);
#endif
  return not_built(name);
}

}  // namespace gpusim::backend
