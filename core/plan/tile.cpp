#include "gpusim/tile.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpusim {

std::string tile_notation(const TileConfig& t) {
  if (t.block_m > 0) {
    return fmt::format("{}x{}x{} {}t s{}{}{}", t.block_m, t.block_n, t.block_k, t.threads, t.stages,
                       t.split_k > 1 ? fmt::format(" sk{}", t.split_k) : "",
                       t.vector_width > 1 ? fmt::format(" v{}", t.vector_width) : "");
  }
  return fmt::format("{}t v{} x{}", t.threads, t.vector_width, t.items_per_thread);
}

int generated_vector_lanes(int vector_width, int64_t elements) {
  int w = 1;
  while (w * 2 <= std::min(vector_width, 8)) w *= 2;
  while (w > 1 && elements % w != 0) w /= 2;
  return w;
}

bool has_gemm_view(const KernelWork& w) {
  return (w.cls == OpClass::kGemm || w.cls == OpClass::kConv) && w.m > 0 && w.n > 0 && w.k > 0;
}

bool gemv_shaped(const TileConfig& t) {
  return t.block_m > 0 && t.block_n > 0 && static_cast<int64_t>(t.threads) > static_cast<int64_t>(t.block_m) * t.block_n;
}

int generated_split_k(int asked, int64_t k, int block_k) {
  const int64_t steps = block_k > 0 && k > 0 ? (k + block_k - 1) / block_k : 1;
  const int64_t s = std::clamp<int64_t>(asked, 1, std::min<int64_t>(64, steps));
  const int64_t per = (steps + s - 1) / s;
  return static_cast<int>((steps + per - 1) / per);
}

bool same_schedule(const TileConfig& a, const TileConfig& b) {
  TileConfig x = a, y = b;
  x.smem_bytes = y.smem_bytes = 0;
  x.registers = y.registers = 0;
  x.main_loop = y.main_loop = MainLoop::kAny;
  x.chain = y.chain = KernelChain{};
  return x == y;
}

bool parse_main_loop(std::string_view name, MainLoop* out) {
  for (MainLoop m : {MainLoop::kAny, MainLoop::kVector, MainLoop::kMatrix, MainLoop::kTf32}) {
    if (main_loop_name(m) == name) {
      *out = m;
      return true;
    }
  }
  return false;
}

std::string_view main_loop_name(MainLoop m) {
  switch (m) {
    case MainLoop::kVector: return "vector";
    case MainLoop::kMatrix: return "matrix";
    case MainLoop::kTf32: return "tf32";
    case MainLoop::kAny: break;
  }
  return "any";
}

TileConfig tile_as_generated(TileConfig t, const KernelWork& w) {
  if (w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0) {
    t.split_k = generated_split_k(t.split_k, w.kv_seq, t.block_n);  // key blocks (flash-decoding)
  } else {
    t.split_k = has_gemm_view(w) ? generated_split_k(t.split_k, w.k, t.block_k) : 1;
  }
  if (w.cls == OpClass::kElementwise) {
    t.vector_width = generated_vector_lanes(t.vector_width, w.elements);
  } else if ((w.cls == OpClass::kReduction || w.cls == OpClass::kNormalization) && w.rows > 0) {
    t.vector_width = generated_vector_lanes(t.vector_width, w.row_elements);  // narrowed to 1 where rows are not contiguous
  } else if ((w.cls == OpClass::kGemm || w.cls == OpClass::kConv) && t.vector_width > 1) {
    t.vector_width = generated_vector_lanes(t.vector_width, 8);  // a power of two, at most 8; narrowed per operand
  } else {
    t.vector_width = 1;
  }
  return t;
}

namespace {
class Portable final : public TileCapability {
 public:
  TileConfig generated(const KernelWork& w, const TileConfig& t) const override { return tile_as_generated(t, w); }
  std::string describe() const override { return "portable (no target limits)"; }
};
}  // namespace

const TileCapability& portable_capability() {
  static const Portable p;
  return p;
}

}  // namespace gpusim
