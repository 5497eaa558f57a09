// library_tile (include/gpusim/validate.h): the launch of a library's kernel, read from the
// record, as the tile gpusim prices it with.
#include <cctype>
#include <regex>
#include <vector>

#include "gpusim/validate.h"

namespace gpusim {
namespace {

// "256x1x1" -> {256, 1, 1}; empty when it does not parse.
std::vector<int64_t> launch_dims(const std::string& s) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('x', pos);
    if (end == std::string::npos) end = s.size();
    const std::string part = s.substr(pos, end - pos);
    if (part.empty() || part.size() > 9) return {};
    for (char c : part) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return {};
    }
    out.push_back(std::stoll(part));
    pos = end + 1;
  }
  return out;
}

int64_t launch_size(const std::string& s) {
  const std::vector<int64_t> d = launch_dims(s);
  if (d.empty()) return 0;
  int64_t total = 1;
  for (int64_t x : d) total *= x;
  return total;
}

}  // namespace

std::optional<TileConfig> library_tile(const Measurement& m, const KernelWork& w, const DeviceModel& d) {
  if (m.kernel.empty() || m.tile) return std::nullopt;
  const int64_t threads = launch_size(m.block);
  if (threads > d.max_threads_per_block) return std::nullopt;  // not this device's launch: ignore it
  if (w.cls == OpClass::kGemm && w.m > 0 && w.n > 0 && w.k > 0) {
    // cuBLAS SIMT kernels name their tile in column-major terms: the first figure runs along the
    // output's columns (a row-major caller's n), the second along its rows (m).
    static const std::regex kGemmTile("sgemm_([0-9]{1,3})x([0-9]{1,3})_");
    std::smatch mt;
    if (!std::regex_search(m.kernel, mt, kGemmTile)) return std::nullopt;
    TileConfig t = choose_tile(w, d);
    if (t.block_m == 0) return std::nullopt;  // not priced as a GEMM here
    t.block_n = std::stoi(mt[1].str());
    t.block_m = std::stoi(mt[2].str());
    t.block_k = 8;
    t.stages = 2;
    t.split_k = 1;
    if (threads > 0) t.threads = static_cast<int>(threads);
    // "sliced1xS": the block's warps split each k-step S ways, so one step covers S x 8 of k.
    static const std::regex kSliced("sliced1x([0-9])");
    std::smatch ms;
    if (std::regex_search(m.kernel, ms, kSliced)) t.block_k *= std::max(1, std::stoi(ms[1].str()));
    // The grid's third dimension is the batch times the split-K factor.
    const std::vector<int64_t> grid = launch_dims(m.grid);
    if (grid.size() == 3 && w.batch > 0 && grid[2] > w.batch && grid[2] % w.batch == 0) {
      t.split_k = static_cast<int>(std::min<int64_t>(64, grid[2] / w.batch));
    }
    return t;
  }
  if ((w.cls == OpClass::kNormalization || w.cls == OpClass::kReduction) && w.rows > 0 && threads > 0) {
    const int64_t blocks = launch_size(m.grid);
    if (blocks <= 0) return std::nullopt;
    TileConfig t = choose_tile(w, d);
    t.threads = static_cast<int>(threads);
    t.rows_per_block = static_cast<int>(std::max<int64_t>(1, (w.rows + blocks - 1) / blocks));
    return t;
  }
  return std::nullopt;
}

}  // namespace gpusim
