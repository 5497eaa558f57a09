// The on-disk cache of compiled kernels (CUDA cubins, HIP code objects) that the CUDA and HIP
// backends share, so a kernel compiled by one run loads in the next without calling the compiler.
//
// Where: $GPUSIM_KERNEL_CACHE_DIR if set ("off" turns the cache off), else $XDG_CACHE_HOME/gpusim,
// else ~/.cache/gpusim; one folder per backend and target ("cuda/sm_90/", "hip/gfx90a/"). The key
// is the kernel's source hash, the target, the compiler's version and its options, so a new
// compiler or a changed option never reads an old binary. The cache is best effort: an unwritable
// folder, a full disk or a racing writer is silently skipped (writes go to a temporary file that
// is renamed into place, so a reader never sees half a file), and a backend that fails to load a
// cached binary recompiles it. Each file ends in an 8-byte FNV-1a checksum of what precedes it:
// a file damaged on disk loads as absent, so no backend hands a driver corrupt code (Vulkan drivers
// such as lavapipe do not validate SPIR-V).
//
// Usage:
//   std::string key = kernel_cache_key(source_hash(src), "sm_90", "nvrtc-13.0", options);
//   if (auto bin = kernel_cache_load("cuda/sm_90", key + ".cubin")) use(*bin);
//   else kernel_cache_store("cuda/sm_90", key + ".cubin", compiled);
//
// Header-only (inline) so that each backend library can use it without another CMake target.
#pragma once

#include <unistd.h>

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
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  for (int k = 0; k < 8; ++k) mix(std::string(1, static_cast<char>((source_hash >> (8 * k)) & 0xff)));
  mix(target);
  mix(compiler);
  mix(options);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int k = 0; k < 16; ++k) out[static_cast<size_t>(15 - k)] = kHex[(h >> (4 * k)) & 0xf];
  return out;
}

// FNV-1a of a cached file's contents (its checksum trailer).
inline uint64_t kernel_cache_checksum(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The cached bytes of `sub`/`file`, or nothing (absent, unreadable, empty, damaged, cache off).
inline std::optional<std::string> kernel_cache_load(std::string_view sub, std::string_view file) {
  const std::filesystem::path root = kernel_cache_dir();
  if (root.empty()) return std::nullopt;
  std::ifstream in(root / sub / file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return std::nullopt;
  constexpr size_t kTrailer = sizeof(uint64_t);
  if (bytes.size() <= kTrailer) return std::nullopt;
  uint64_t sum = 0;
  for (size_t k = 0; k < kTrailer; ++k) {
    sum |= uint64_t{static_cast<unsigned char>(bytes[bytes.size() - kTrailer + k])} << (8 * k);
  }
  bytes.resize(bytes.size() - kTrailer);
  if (sum != kernel_cache_checksum(bytes)) return std::nullopt;
  return bytes;
}

// Stores `bytes` as `sub`/`file`, checksum appended; failures are ignored (the cache is an
// optimization).
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
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const uint64_t sum = kernel_cache_checksum(bytes);
    for (int k = 0; k < 8; ++k) out.put(static_cast<char>((sum >> (8 * k)) & 0xff));
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
