// The measurement store: one schema for a measured kernel or op, kept in SQLite.
//
// A Measurement says what ran (the op and its dims, or the kernel gpusim generated: its work, fused
// group and tile), where (GPU, driver, clocks, backend, the runtime that launched it), how it was
// timed (timer, repeats, the statistic reported, p50/p95) and what was measured, with its source.
// Published data (the NeuSight CSVs), `gpusim run --json`, calibration's raw data and, later, the
// autotuner and the Dojo all write here; `gpusim validate` reads from here.
//
// A record's identity (`measurement_key`) is a hash of everything in it except when it was
// imported: the same record imported twice is one record, while two runs of the same kernel (two
// different measured times) are two. Imports run in one transaction: a failed import leaves the
// store as it was.
//
// Usage:
//   auto store = gpusim::MeasurementStore::open("truth.db");
//   auto recs = gpusim::read_measurements("../shared/truth");          // CSV(.xz) or JSON or a dir
//   auto added = store->insert(*recs, "gpusim truth import ../shared/truth");  // duplicates skipped
//   auto back = store->query({.gpu = "Tesla T4"});
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/result.h"

namespace gpusim {

struct GPUSIM_API Measurement {
  // --- what ran
  // The op: a framework op as its source names it ("linear", "bmm", "conv", "add", "addu", "ln",
  // "softmax", ...), or the ONNX op type of a gpusim kernel's anchor node ("Conv", "MatMul").
  std::string op;
  std::string op_class;                 // gpusim's class: gemm, conv, elementwise, normalization, ...
  std::map<std::string, int64_t> dims;  // in the source's own names (b, m, n, k; b, h; ...)
  DType dtype = DType::kFloat32;
  // Kernels gpusim generated: their work and tile, so the prediction can be recomputed exactly.
  std::optional<KernelWork> work;
  std::optional<TileConfig> tile;
  std::vector<std::string> fused_ops;  // the fused group's op types, anchor first
  std::string kernel;                  // the kernel that ran ("volta_sgemm_128x64_tn", "gemm_nn_3")
  int kernels_launched = 1;
  std::string grid, block;             // of the main kernel, "42x1x1"
  // --- where
  std::string gpu;        // the device as its driver names it ("Tesla T4", "NVIDIA A100-PCIE-40GB")
  std::string backend;    // "cuda", "hip", "vulkan", "pytorch" ...
  std::string driver;     // driver or framework version ("torch 2.1.0", "CUDA 12.1")
  std::string clocks;     // "" when unknown
  // How it was launched, which sets what besides the kernels the time includes:
  // "pytorch-eager" (framework dispatch per op), "cuda-graph", "gpusim" (device time per kernel).
  std::string runtime;
  // --- how it was timed
  std::string timer;      // "cuda-events around the framework call", "device timestamps"
  std::string statistic;  // "mean of the 5 fastest of 25 back-to-back calls", "median of 15"
  int64_t repeats = 0;
  bool warm_cache = false;  // repeats back to back with no cache flush: small inputs stay in L2
  // --- what was measured, microseconds
  double time_us = 0;
  double p50_us = 0, p95_us = 0;  // 0 when the source does not give them
  // --- provenance
  std::string source;      // "neusight-train", "gpusim run", "gpusim calibrate", "autotune"
  std::string source_ref;  // the file (and row) or the command it came from
  // --- a whole model (op_class "model", op the model's name, dims batch and img): one step of a
  // forward pass, every kernel the runtime launched and the host's dispatch between them.
  // The graph it ran, by the name the source gives it ("timm-e2e/models/resnet50_224.onnx"; empty
  // when the source has no graph of that configuration), and how: "layout" (nchw, nhwc),
  // "precision" (amp-fp16: torch.autocast on fp32 weights; fp16, fp32), "family" (attention, conv),
  // "skip" (comma-separated runtime patterns the model's code does not take), "unpriced" (why no
  // graph prices it).
  std::string graph;
  std::map<std::string, std::string> config;
  // The ONNX graph's bytes (weights stripped), when the reader or the store has them; not part of
  // the record's identity (the graph's name and the config are).
  std::shared_ptr<const std::string> graph_bytes;
};

// The record's identity: a 128-bit hash (hex) of every field above.
GPUSIM_API std::string measurement_key(const Measurement& m);

struct GPUSIM_API MeasurementQuery {
  std::string gpu;       // exact device name; empty: all
  std::string op_class;  // empty: all
  std::string source;    // empty: all
  int64_t limit = 0;     // 0: no limit
};

// The autotuner's cache (`gpusim tune`): the tile measured best for one kernel on one device. The
// key covers the device, its driver, gpusim's version and the kernel's signature (its fused ops,
// attributes, shapes, dtypes and storage: tuning_key), so a new driver or device misses only its
// own entries and leaves every other device's in place.
struct GPUSIM_API TuningEntry {
  std::string key;        // tuning_key(...)
  std::string device, driver, version, signature;
  std::string backend;
  std::string group;      // the fused ops, "Conv+Relu" (for people reading --cache-info)
  TileConfig tile;        // the measured best
  bool split = false;     // the group ran faster unfused: one kernel per node, each with its best generated tile
  double time_us = 0;     // its measured median
  double predicted_us = 0;
  int candidates = 0;     // how many were measured
  std::string tuned_at;   // UTC, set by put_tuned
};
GPUSIM_API std::string tuning_key(const std::string& device, const std::string& driver, const std::string& version,
                       const std::string& signature);

struct GPUSIM_API TuningCacheInfo {
  struct Device {
    std::string device, driver, backend;
    int64_t entries = 0;
    std::string newest;  // the latest tuned_at
  };
  std::vector<Device> devices;
  int64_t entries = 0;
};

// What the compiler built for one generated kernel on one architecture (`gpusim codegen report
// --db`), read without a device: registers a thread, shared memory a block, spills. Keyed by the
// architecture and codegen's kernel key (compiled_figures.h: the work, the tile's schedule, the
// float storage and the matrix path), so compiling the same kernel again replaces its record; the
// kernel, class, tile, GPU and model say where it came from. The kernel cache keeps the same
// figures for the cost model (<kernel cache>/figures/<arch>.json); the store keeps them with the
// measurements, for reports and datasets that outlive a cache.
struct GPUSIM_API CompiledKernelRecord {
  std::string arch;      // "sm_90", "gfx90a"
  std::string key;       // codegen's compiled_figures_key
  std::string compiler;  // "NVRTC 13.0", "hiprtc (ROCm 5.2.21153)"
  std::string kernel, op_class, tile;  // the entry point, codegen's class, the tile's notation
  std::string gpu, model;              // the profile and the graph whose plan asked for it
  int threads = 0, registers = 0, smem_bytes = 0, spill_bytes = 0;
  std::string compiled_at;  // UTC, set by put_compiled
};

struct GPUSIM_API InsertStats {
  int64_t added = 0;
  int64_t duplicates = 0;  // already in the store: skipped
};

// A SQLite file of measurements (schema gpusim.truth/1, core/truth/README.md). Written with
// transactions in WAL mode, so readers (validate, the autotuner) see either all of an import or
// none of it, and a crash never leaves half a record.
// How a store is opened: kCreate makes it when absent; kWrite needs it to exist; kRead opens it
// read-only (a store in a folder the user may not write, or a file they may only read) and never
// changes it.
enum class StoreAccess { kCreate, kWrite, kRead };

class GPUSIM_API MeasurementStore {
 public:
  // Opens (creating when absent, unless `create` is false) the store at `path`; ":memory:" is a
  // private in-memory store. Errors name the file and what SQLite said. A new store's schema is
  // created in one transaction, so processes creating the same store at once all succeed.
  static Result<MeasurementStore> open(const std::string& path, bool create = true);
  static Result<MeasurementStore> open(const std::string& path, StoreAccess access);
  // open(path, StoreAccess::kRead): what every reader (validate, stats, the Dojo) uses.
  static Result<MeasurementStore> open_read(const std::string& path);
  // A store used as a cache (the autotuner's default): one that is damaged is moved aside
  // (set_aside) and a new one started, with `note` saying so; other errors are returned.
  static Result<MeasurementStore> open_cache(const std::string& path, std::string* note);
  // Renames a damaged store (and its -wal/-shm files) to PATH.damaged[-N]; returns the new name.
  static Result<std::string> set_aside(const std::string& path);
  MeasurementStore(MeasurementStore&&) noexcept;
  MeasurementStore& operator=(MeasurementStore&&) noexcept;
  ~MeasurementStore();

  // SQLite's quick_check (the whole file): an error naming what is damaged (code kParse), or Ok,
  // which this connection remembers.
  Status check_integrity() const;
  // Adds records in one transaction; a record already present (same key) is skipped. The store's
  // integrity is checked first (once per connection): a damaged store takes nothing.
  Result<InsertStats> insert(const std::vector<Measurement>& records, const std::string& import_command);
  Result<std::vector<Measurement>> query(const MeasurementQuery& q = {}) const;
  Result<int64_t> count() const;
  const std::string& path() const;

  // The tuning cache (see TuningEntry). put_tuned replaces an entry with the same key, in its own
  // transaction: two processes tuning at once each keep a whole entry (the last one written wins).
  Result<std::optional<TuningEntry>> tuned(const std::string& key) const;
  Status put_tuned(const TuningEntry& e);
  Result<TuningCacheInfo> tuning_info() const;
  // Removes the entries of `device` (every device when empty); returns how many went.
  Result<int64_t> clear_tuned(const std::string& device = "");

  // Compiled figures (see CompiledKernelRecord), in one transaction; a record with the same
  // architecture and key replaces the one there. kInvalidArgument naming the record where one has
  // no architecture or key, or figures out of range (registers 1 to 1024, shared memory and spills
  // not negative); nothing is written then.
  Status put_compiled(const std::vector<CompiledKernelRecord>& records);
  // The records of `arch` (every architecture when empty), by architecture and key.
  Result<std::vector<CompiledKernelRecord>> compiled(const std::string& arch = "") const;

 private:
  struct Impl;
  explicit MeasurementStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads measurements from a file or a directory, by what it holds:
//   *.csv, *.csv.xz   NeuSight per-op CSVs (op, device, torch, latency_ms, kernel, ..., dims)
//   *.json            `gpusim run --json` output (schema gpusim.run/1) or calibration raw data
//                     (gpusim.calibration/1, the *.measurements.json beside a profile)
//   *.db, *.sqlite    a measurement store
//   a directory       every such file under it (recursively), in name order
// Errors name the file, the line or field, the value and what was expected.
//   timm-*.csv        timm's published whole-model benchmark rows, with the graphs in models/ beside
//                     it (models/manifest.json names each model's graph and image size)
// In a directory, files of another format (a manifest) are skipped, each
// with a line in `notes` saying why.
GPUSIM_API Result<std::vector<Measurement>> read_measurements(const std::string& path, std::vector<std::string>* notes = nullptr);

// The individual readers, for callers that know the format.
GPUSIM_API Result<std::vector<Measurement>> read_neusight_csv(const std::string& path);
GPUSIM_API Result<std::vector<Measurement>> read_run_json(const std::string& path);
// A gpusim.run/1 document in memory; `source` names it in messages.
GPUSIM_API Result<std::vector<Measurement>> parse_run_json(const std::string& text, const std::string& source);
GPUSIM_API Result<std::vector<Measurement>> read_calibration_json(const std::string& path);
GPUSIM_API Result<std::vector<Measurement>> read_timm_csv(const std::string& path);
// llama-bench rows (../shared/truth/llamacpp: gpu, backend, model, quant, test ppN/tgN, tokens_per_s):
// one whole-model record a row, op_class "model", op the bundled description it ran
// ("llama-2-7b"), dims {prompt: N} or {generate: N}, config family "llm", weights, test and
// flash_attn; time_us is the test's N tokens at its tokens/s.
GPUSIM_API Result<std::vector<Measurement>> read_llamacpp_csv(const std::string& path);

}  // namespace gpusim
