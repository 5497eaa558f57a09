// Compiled figures: what the compiler built for a generated kernel on one architecture (registers
// a thread, shared memory, spills), kept beside the compiled kernels in the kernel cache so the
// cost model prices a kernel with them the next time a plan asks for it (issue 33: "the cost
// model uses the compiled figures when they exist").
//
// A table per architecture, <kernel cache>/figures/<arch>.json (kernel_disk_cache.h says where the
// cache is), written by `gpusim codegen report` after it compiles a plan's kernels and read by a
// generated Target for that architecture (Session::target). An entry is keyed by what decides the
// kernel's text: the work (its class, shapes, dtype, fused epilogue), the tile's schedule, the
// float storage and the matrix path. TargetCapability::generated then sets the tile's `registers`
// from the entry, and kernel_cost prices the blocks a unit keeps with the compiler's figure
// instead of its estimate (kernel_cost.h: assumed_residency). A missing, unreadable or damaged
// table is no table: the model's estimates stand, as before any compile.
//
// Usage:
//   auto table = gpusim::codegen::load_compiled_figures("sm_90");        // empty when none is stored
//   gpusim::codegen::TargetCapability cap(opts, table);
//   table.put(gpusim::codegen::compiled_figures_key(w, tile, opts), {64, 41472, 0, "NVRTC 13.0"});
//   gpusim::codegen::store_compiled_figures("sm_90", table);              // best effort
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpusim/result.h"
#include "gpusim/tile.h"

namespace gpusim::codegen {

struct Options;

struct CompiledFigures {
  int registers = 0;     // a thread's, as occupancy counts them (NVIDIA: ptxas; AMD: VGPRs incl. AGPRs)
  int smem_bytes = 0;    // static shared memory (LDS) a block
  int spill_bytes = 0;   // a thread's spill stores and loads (AMD: spilled registers x 4)
  std::string compiler;  // "NVRTC 13.0", "hiprtc (ROCm 5.2.21153)"
};

class CompiledFigureTable {
 public:
  CompiledFigureTable() = default;
  explicit CompiledFigureTable(std::string arch) : arch_(std::move(arch)) {}
  const std::string& arch() const { return arch_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const CompiledFigures* find(const std::string& key) const;
  void put(const std::string& key, CompiledFigures f) { entries_[key] = std::move(f); }
  // Adds every entry of `other` (its own win where both hold a key).
  void merge(const CompiledFigureTable& other);

  // The table as JSON ({"schema": "gpusim.compiled_figures/1", "arch", "kernels": {key: {...}}}).
  std::string to_json() const;
  // The table in `text`; an error naming `where`, the field and the value where it is not one.
  static Result<CompiledFigureTable> from_json(std::string_view text, std::string_view where);

 private:
  std::string arch_;
  std::map<std::string, CompiledFigures> entries_;
};

// The key of a generated kernel: 16 hex digits over the work, the tile's schedule (its derived
// smem_bytes, registers and main_loop left out), the float storage, and the matrix path and operands
// its main loop has under `opts` (or none: the SIMT loop).
std::string compiled_figures_key(const KernelWork& w, const TileConfig& t, const Options& opts);

// <kernel cache>/figures/<arch>.json; empty when the cache is off or has no folder.
std::filesystem::path compiled_figures_path(std::string_view arch);

// The stored table for `arch`, or an empty one (none stored, the cache off, a damaged file).
std::shared_ptr<const CompiledFigureTable> load_compiled_figures(std::string_view arch);

// Adds `table` to the stored one for its architecture (replaced whole, write_file_atomic). Returns
// the file written; an error naming the file where it cannot be written, or kUnavailable when the
// cache is off.
Result<std::filesystem::path> store_compiled_figures(const CompiledFigureTable& table);

}  // namespace gpusim::codegen
