// The backend registry: which backends this binary has, listing devices and opening one by name.
#include "backend.h"

#include <fmt/format.h>

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
  std::vector<std::string> out;
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
Error not_built(const std::string& name) {
  std::string built;
  for (const auto& b : built_backends()) built += (built.empty() ? "" : ", ") + b;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("backend \"{}\" is not built into this gpusim (built: {}); the known backends are "
                                "cpu, vulkan, cuda and hip, each built when its SDK is installed at configure time "
                                "(tools/install-deps.sh)",
                                name, built.empty() ? "none" : built));
}
}  // namespace

bool is_device_backend(const std::string& name) { return name == "vulkan" || name == "cuda" || name == "hip"; }

Result<std::vector<DeviceInfo>> list_devices(const std::string& name) {
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
