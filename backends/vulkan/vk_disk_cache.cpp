// The persisted VkPipelineCache (see vk_disk_cache.h).
#include "vk_disk_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpusim::backend::vulkan {
namespace {

// Keeps file names portable: letters, digits, '.', '-', '_'; everything else becomes '_'.
std::string sanitize(const std::string& s, size_t max_len) {
  std::string out;
  for (char ch : s) {
    if (out.size() >= max_len) break;
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      ch == '.' || ch == '-' || ch == '_';
    out += keep ? ch : '_';
  }
  return out;
}

}  // namespace

std::string disk_cache_path(const DeviceCaps& caps) {
  std::filesystem::path dir;
  // XDG says a relative $XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    dir = std::filesystem::path(xdg) / "gpusim";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    dir = std::filesystem::path(home) / ".cache" / "gpusim";
  } else {
    return "";
  }
  std::string uuid;
  for (uint8_t b : caps.props.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
  const std::string name = fmt::format("vulkan-{}-{}-{}.bin", sanitize(caps.info.name, 64),
                                       sanitize(caps.info.driver, 96), uuid);
  return (dir / name).string();
}

std::vector<char> read_disk_cache(const std::string& path, const VkPhysicalDeviceProperties& props) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // VkPipelineCacheHeaderVersionOne: length, version, vendor, device, UUID (32 bytes in all).
  VkPipelineCacheHeaderVersionOne h{};
  if (data.size() < sizeof(h)) return {};
  std::memcpy(&h, data.data(), sizeof(h));
  if (h.headerSize < sizeof(h) || h.headerSize > data.size() || h.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
      h.vendorID != props.vendorID || h.deviceID != props.deviceID ||
      std::memcmp(h.pipelineCacheUUID, props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
    return {};
  }
  return data;
}

void write_disk_cache(const std::string& path, const std::vector<char>& data) {
  if (path.empty() || data.empty()) return;
  std::error_code ec;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return;
  // A name unique to this process and object: concurrent writers each rename a whole file.
  const std::filesystem::path tmp =
      target.string() + fmt::format(".tmp{}-{}", static_cast<long>(getpid()), static_cast<const void*>(&data));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace gpusim::backend::vulkan
