// The on-disk cache of compiled kernels (CUDA cubins, HIP code objects) that the CUDA and HIP
// backends share, so a kernel compiled by one run loads in the next without calling the compiler.
//
// Where: $GPUSIM_KERNEL_CACHE_DIR if set ("off" turns the cache off), else $XDG_CACHE_HOME/gpusim,
// else ~/.cache/gpusim; one folder per backend and target ("cuda/sm_90/", "hip/gfx90a/"). The key
// is the kernel's source hash, the target, the compiler's version and its options, so a new
// compiler or a changed option never reads an old binary. The cache is best effort: an unwritable
// folder, a full disk or a racing writer is silently skipped (writes go to a temporary file that
// is renamed into place, so a reader never sees half a file), and a backend that fails to load a
// cached binary recompiles it. Each file ends in the entry's own name (the folder and file it was
// written as, then its length in 4 bytes) and an 8-byte FNV-1a checksum of all that precedes it:
// a file damaged on disk, or copied or renamed to another entry's name, loads as absent and is
// rebuilt, so no backend hands a driver corrupt or wrong code (Vulkan drivers such as lavapipe do
// not validate SPIR-V: two swapped entries ran and returned NaNs). Only regular files are read,
// never through a symlink, and none over kKernelCacheMaxBytes: an entry that is a FIFO, a device
// or a link to one loads as absent (without blocking on it) and is replaced by the next store.
//
// Usage:
//   std::string key = kernel_cache_key(source_hash(src), "sm_90", "nvrtc-13.0", options);
//   if (auto bin = kernel_cache_load("cuda/sm_90", key + ".cubin")) use(*bin);
//   else kernel_cache_store("cuda/sm_90", key + ".cubin", compiled);
//
// Header-only (inline) so that each backend library can use it without another CMake target.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include "base/hash.h"

namespace gpusim::backend {

// The cache's root folder; empty when the cache is off or no home folder is known.
inline std::filesystem::path kernel_cache_dir() {
  if (const char* d = std::getenv("GPUSIM_KERNEL_CACHE_DIR"); d != nullptr && *d != '\0') {
    if (std::string_view(d) == "off" || std::string_view(d) == "0") return {};
    return std::filesystem::path(d);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x == '/') {
    return std::filesystem::path(x) / "gpusim";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::filesystem::path(h) / ".cache" / "gpusim";
  }
  return {};
}

// A file name (16 hex digits) for a compiled kernel: FNV-1a over the source hash, the target, the
// compiler's version and its options.
inline std::string kernel_cache_key(uint64_t source_hash, std::string_view target, std::string_view compiler,
                                    std::string_view options) {
  base::Fnv1a h;
  for (int k = 0; k < 8; ++k) h.field(std::string(1, static_cast<char>((source_hash >> (8 * k)) & 0xff)));
  h.field(target).field(compiler).field(options);
  return base::hex64(h.h);
}

// FNV-1a of a cached file's contents (its checksum trailer).
inline uint64_t kernel_cache_checksum(std::string_view bytes) { return base::fnv1a(bytes); }

// The largest entry read (a cubin of a big fused kernel is a few MB).
inline constexpr int64_t kKernelCacheMaxBytes = int64_t{256} << 20;

// What an entry records as its own name: "sub/file".
inline std::string kernel_cache_entry_name(std::string_view sub, std::string_view file) {
  return std::string(sub) + "/" + std::string(file);
}

// The payload of an entry's bytes as written by kernel_cache_store for `name`, or nothing when the
// checksum or the recorded name does not match.
inline std::optional<std::string> kernel_cache_unwrap(std::string bytes, std::string_view name) {
  constexpr size_t kSum = sizeof(uint64_t), kLen = sizeof(uint32_t);
  if (bytes.size() < kSum + kLen) return std::nullopt;
  uint64_t sum = 0;
  for (size_t k = 0; k < kSum; ++k) sum |= uint64_t{static_cast<unsigned char>(bytes[bytes.size() - kSum + k])} << (8 * k);
  bytes.resize(bytes.size() - kSum);
  if (sum != kernel_cache_checksum(bytes)) return std::nullopt;
  uint32_t len = 0;
  for (size_t k = 0; k < kLen; ++k) len |= uint32_t{static_cast<unsigned char>(bytes[bytes.size() - kLen + k])} << (8 * k);
  bytes.resize(bytes.size() - kLen);
  if (len != name.size() || bytes.size() <= len) return std::nullopt;
  if (std::string_view(bytes).substr(bytes.size() - len) != name) return std::nullopt;
  bytes.resize(bytes.size() - len);
  return bytes;
}

// The bytes kernel_cache_store writes for `payload` under `name`.
inline std::string kernel_cache_wrap(const std::string& payload, std::string_view name) {
  std::string out = payload;
  out.append(name);
  const auto len = static_cast<uint32_t>(name.size());
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((len >> (8 * k)) & 0xff));
  const uint64_t sum = kernel_cache_checksum(out);
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<char>((sum >> (8 * k)) & 0xff));
  return out;
}

// The cached bytes of `sub`/`file`, or nothing (absent, not a regular file, too large,
// unreadable, damaged, written for another entry, cache off).
inline std::optional<std::string> kernel_cache_load(std::string_view sub, std::string_view file) {
  const std::filesystem::path root = kernel_cache_dir();
  if (root.empty()) return std::nullopt;
  const std::filesystem::path path = root / sub / file;
  // O_NOFOLLOW: a symlink fails to open; O_NONBLOCK: a FIFO opens at once (and is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > kKernelCacheMaxBytes) {
    return std::nullopt;
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return kernel_cache_unwrap(std::move(bytes), kernel_cache_entry_name(sub, file));
}

// Stores `bytes` as `sub`/`file`, its name and checksum appended; failures are ignored (the cache
// is an optimization). The rename replaces whatever the entry was (a damaged file, a link, a FIFO).
inline void kernel_cache_store(std::string_view sub, std::string_view file, const std::string& bytes) {
  const std::filesystem::path root = kernel_cache_dir();
  if (root.empty() || bytes.empty()) return;
  std::error_code ec;
  const std::filesystem::path dir = root / sub;
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  std::random_device rd;
  const std::filesystem::path tmp =
      dir / (std::string(file) + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    const std::string wrapped = kernel_cache_wrap(bytes, kernel_cache_entry_name(sub, file));
    out.write(wrapped.data(), static_cast<std::streamsize>(wrapped.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, dir / file, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace gpusim::backend
