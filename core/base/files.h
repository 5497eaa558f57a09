// Files a user or a model names, read safely.
//
// - Regular files only: a directory, FIFO, device or socket is refused before a byte is read, and
//   the file is opened non-blocking so that a FIFO with no writer cannot stall the open.
// - Never more than a size bound: /dev/zero or a file that grows is not read until memory runs out.
// - A file one file refers to (ONNX external data) must lie in the referring file's folder once
//   every link is resolved: a symlink beside the model does not lead anywhere else.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "gpusim/result.h"

namespace gpusim::base {

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// An open regular file, closed when it goes.
class RegularFile {
 public:
  // `what` names the file's role for messages ("the plan", "the token file"); they begin with the path.
  static Result<RegularFile> open(const std::string& path, std::string_view what) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      return make_error(ErrorCode::kIo, fmt::format("{}: cannot open {} ({}); check the path", path, what,
                                                    std::strerror(errno)));
    }
    RegularFile f(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      return make_error(ErrorCode::kIo, fmt::format("{}: cannot read {} ({})", path, what, std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: is {}, not a regular file; give {} as a file", path, file_kind(st.st_mode), what));
    }
    f.size_ = static_cast<int64_t>(st.st_size);
    return f;
  }
  RegularFile(RegularFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  RegularFile& operator=(RegularFile&&) = delete;
  RegularFile(const RegularFile&) = delete;
  ~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  int64_t size() const { return size_; }
  // Up to `length` bytes from `offset` (fewer at the end of the file).
  std::string read(int64_t offset, int64_t length) const {
    std::string out(static_cast<size_t>(std::max<int64_t>(0, length)), '\0');
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(offset) + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    return out;
  }

 private:
  explicit RegularFile(int fd) : fd_(fd) {}
  int fd_ = -1;
  int64_t size_ = 0;
};

// The whole of a regular file of at most `max_bytes`.
inline Result<std::string> read_regular_file(const std::string& path, int64_t max_bytes, std::string_view what) {
  auto f = RegularFile::open(path, what);
  if (!f) return f.error();
  if (f->size() > max_bytes) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: {} is {} bytes, over the {} such a file may have; is it the "
                                                     "right file?",
                                                     path, what, f->size(), max_bytes));
  }
  // One byte past the size fstat gave: a file that grew past the bound is refused too.
  std::string bytes = f->read(0, std::min(f->size(), max_bytes) + 1);
  if (static_cast<int64_t>(bytes.size()) > max_bytes) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: {} grew past the {} bytes such a file may have while it was "
                                                     "read",
                                                     path, what, max_bytes));
  }
  return bytes;
}

// Whether `file`, every link resolved, lies inside `dir` (also resolved). False when either is
// missing.
inline bool resolves_inside(const std::filesystem::path& dir, const std::filesystem::path& file) {
  std::error_code e1, e2;
  const std::filesystem::path d = std::filesystem::canonical(dir.empty() ? std::filesystem::path(".") : dir, e1);
  const std::filesystem::path f = std::filesystem::canonical(file, e2);
  if (e1 || e2) return false;
  return std::mismatch(d.begin(), d.end(), f.begin(), f.end()).first == d.end();
}

}  // namespace gpusim::base
