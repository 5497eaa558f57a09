// See core/hw/atomic_file.h.
#include "hw/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpusim {
namespace {

constexpr std::string_view kTag = ".gpusim-tmp-";

std::atomic<uint64_t> g_serial{0};

Status io_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kIo, fmt::format("{}: {}: {}; the previous file, if any, is unchanged", path, what,
                                                std::strerror(errno)));
}

bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void sync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

int sweep_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(kTag);
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    // .NAME.gpusim-tmp-PID-N: the writer's PID, then a serial.
    const std::string rest = name.substr(at + kTag.size());
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) continue;
    pid_t pid = 0;
    bool digits = true;
    for (size_t k = 0; k < dash; ++k) {
      if (rest[k] < '0' || rest[k] > '9' || pid > 1000000000) {
        digits = false;
        break;
      }
      pid = pid * 10 + (rest[k] - '0');
    }
    if (!digits || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still be at it
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  sweep_stale_temporaries(dir.string());
  const std::filesystem::path tmp =
      dir / fmt::format(".{}{}{}-{}", target.filename().string(), kTag, ::getpid(), g_serial.fetch_add(1));
  // Unnamed until complete where the filesystem allows it; named from the start where not.
  bool unnamed = true;
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    unnamed = false;
    fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return io_error(path, fmt::format("cannot create a file in {}", dir.string()));
  }
  auto fail = [&](const std::string& what) {
    Status s = io_error(path, what);
    ::close(fd);
    if (!unnamed) ::unlink(tmp.c_str());
    return s;
  };
  if (!write_all(fd, bytes)) return fail("writing failed");
  if (::fsync(fd) != 0) return fail("flushing to disk failed");
  if (unnamed) {
    const std::string proc = fmt::format("/proc/self/fd/{}", fd);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return fail("giving the new file a name failed");
    }
    unnamed = false;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    Status s = io_error(path, "moving the new file into place failed");
    ::unlink(tmp.c_str());
    return s;
  }
  sync_dir(dir);
  return Ok{};
}

}  // namespace gpusim
