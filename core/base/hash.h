// The base layer's one stable hash: FNV-1a, 64 bits (and two lanes of it for 128-bit keys). Every
// key gpusim writes to disk or compares across runs comes from here: kernel cache file names and
// checksums, compile-cache keys, measurement-store and tuning-cache keys, model ids, Dojo file
// digests, calibration file names. Stable across platforms and versions by construction (it
// hashes bytes, never std::hash); an id, not a security measure.
//
// Usage:
//   uint64_t h = gpusim::base::fnv1a("text");
//   gpusim::base::Fnv1a k;  k.field("cuda").field(name).field(code);  uint64_t key = k.h;
//   std::string id = gpusim::base::fnv1a_128_hex(text);             // 32 hex digits
//   gpusim::base::ContentDigest d;  d.add(bytes);  d.hex();          // a file's or a model's id
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpusim::base {

inline constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;   // FNV-1a's 64-bit offset basis
inline constexpr uint64_t kFnvBasis2 = 0x84222325cbf29ce4ULL;  // the second lane of a 128-bit key
inline constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// FNV-1a over bytes, in order.
struct Fnv1a {
  uint64_t h = kFnvBasis;

  constexpr Fnv1a& byte(unsigned char c) {
    h ^= c;
    h *= kFnvPrime;
    return *this;
  }
  constexpr Fnv1a& bytes(std::string_view s) {
    for (const unsigned char c : s) byte(c);
    return *this;
  }
  // A field: its bytes, then 0xff (a byte no UTF-8 text holds), so ("ab", "c") and ("a", "bc")
  // differ.
  constexpr Fnv1a& field(std::string_view s) { return bytes(s).byte(0xff); }
};

// FNV-1a of `s` from `basis`.
constexpr uint64_t fnv1a(std::string_view s, uint64_t basis = kFnvBasis) { return Fnv1a{basis}.bytes(s).h; }

// 64 bits as 16 lowercase hex digits.
inline std::string hex64(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int k = 0; k < 16; ++k) out[static_cast<size_t>(15 - k)] = kHex[(v >> (4 * k)) & 0xf];
  return out;
}

// A 128-bit key as 32 hex digits: fnv1a from the two bases.
inline std::string fnv1a_128_hex(std::string_view s) { return hex64(fnv1a(s, kFnvBasis)) + hex64(fnv1a(s, kFnvBasis2)); }

// A content digest for ids of whole files and models (128 bits, 32 hex digits), fed in pieces:
// two FNV-1a lanes, the second folded (b ^= b >> 29) after every byte so the lanes do not move
// together.
class ContentDigest {
 public:
  void add(std::string_view bytes) {
    for (const unsigned char c : bytes) {
      a_ = (a_ ^ c) * kFnvPrime;
      b_ = (b_ ^ c) * kFnvPrime;
      b_ ^= b_ >> 29;
    }
  }
  std::string hex() const { return hex64(a_) + hex64(b_); }

 private:
  uint64_t a_ = kFnvBasis, b_ = kFnvBasis2;
};

}  // namespace gpusim::base
