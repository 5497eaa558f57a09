// `gpusim validate`: the simulator's report card against measured records.
//
// Each record is predicted in-process with the profile of the GPU it ran on: its work (stored for
// gpusim's own kernels; rebuilt from the op and its dims for framework ops such as NeuSight's),
// the tile the model chooses (or the one that ran), the kernel cost model, and the runtime that
// launched it (framework dispatch for PyTorch eager; see runtime.h). The same rows are also
// predicted by a plain roofline — max(FLOPs / peak, bytes / DRAM peak) plus the same runtime — so
// the report shows what the model adds. Figures per (GPU, op class): n, MAPE, median and p90
// absolute error, signed bias, Kendall tau-b, and the worst rows.
//
// Usage:
//   auto recs = gpusim::read_measurements("../shared/truth");
//   gpusim::ValidateOptions o;  o.profile_dirs = gpusim::default_profile_dirs();
//   auto rep = gpusim::validate(*recs, o);
//   for (const auto& g : rep->groups) fmt::print("{} {} {:.1f}%\n", g.gpu, g.op_class, g.model.mape);
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/measurement.h"
#include "gpusim/result.h"
#include "gpusim/runtime.h"

namespace gpusim {

// Figures fitted on measured records (fit_model): host times of runtimes, and the efficiency
// factors of each GPU vendor family. Applied on top of profiles that carry no calibrated block.
struct GPUSIM_API FittedModel {
  std::map<std::string, RuntimeModel> runtimes;  // by runtime name
  std::map<std::string, Efficiency> efficiency;  // by profile vendor ("nvidia", "amd")
  // The figures the fit set (the rest of `efficiency` is the built-in defaults): vendor -> field
  // ("dram_bandwidth") -> value; what `gpusim validate --write-efficiency` writes.
  std::map<std::string, std::map<std::string, double>> fitted_figures;
  // Figures fitted per architecture family (architecture_family), applied over the vendor's:
  // architecture -> field -> value; `gpusim validate --write-efficiency` writes them too.
  std::map<std::string, std::map<std::string, double>> arch_figures;
  std::vector<std::string> gpus;                 // the GPUs it was fitted on
  std::vector<std::string> log;                  // what was fitted, on how many rows
};

// The work a measured record did, as the simulator sees it: the stored work of a gpusim kernel, or
// a one-node graph of the framework op (NeuSight's linear, bmm, conv, elementwise, ln, softmax)
// through the op catalog. Errors name the record's source, the op and the dim that is missing.
GPUSIM_API Result<KernelWork> measurement_work(const Measurement& m);

// The tile a library's kernel ran with, from what the record says of it: the tile in its name
// (cuBLAS "volta_sgemm_128x64_nn" is 128 output columns by 64 rows) and its block size; for row
// kernels, its threads and the rows each block took (grid against rows: PyTorch's LayerNorm runs a
// block per row). nullopt when the record names no kernel gpusim can read; gpusim's own kernels
// carry their tile in the record instead.
GPUSIM_API std::optional<TileConfig> library_tile(const Measurement& m, const KernelWork& w, const DeviceModel& d);

struct GPUSIM_API ValidateOptions {
  std::vector<std::string> profile_dirs;
  std::vector<std::string> gpus;  // keep these GPUs only (profile names or device names); empty: all
  std::string runtime;            // override every record's runtime ("" = the record's own)
  // Profiles to use for device names no profile's display_name matches: device name -> profile.
  std::map<std::string, std::string> profile_for;
  int threads = 0;          // 0: hardware concurrency
  int worst = 5;            // worst rows kept per group
  bool keep_rows = false;   // keep every row's prediction (for --rows)
  const FittedModel* fitted = nullptr;  // figures fitted on other records (leave-one-GPU-out)
  // Profiles already loaded (the fit validates many times); null: load those in profile_dirs.
  const std::vector<GpuProfile>* profiles = nullptr;
  // Whole models lowered once and kept (the fit prices the same models many times); null: none kept.
  std::shared_ptr<struct ModelCache> model_cache;
};

// Lowered whole-model graphs, by (graph, batch, runtime, layout, autocast, skipped patterns): a
// lowering depends on none of the figures a fit varies. Thread-safe.
struct ModelCache;
GPUSIM_API std::shared_ptr<ModelCache> make_model_cache();
// Every profile in `dirs` that loads (validate's candidates for matching device names).
GPUSIM_API std::vector<GpuProfile> load_all_profiles(const std::vector<std::string>& dirs);

// Error statistics of one predictor over a set of rows. Errors are (predicted - measured) /
// measured; MAPE and the percentiles are of their absolute values, in percent.
struct GPUSIM_API ErrorStats {
  int64_t n = 0;
  double mape = 0;
  double median_ape = 0;
  double p90_ape = 0;
  double bias = 0;       // mean signed error, percent (+: predicts slow)
  double kendall_tau = 0;  // tau-b between predicted and measured times
};

struct GPUSIM_API ValidatedRow {
  size_t record = 0;  // index into the records given
  double measured_us = 0;
  double predicted_us = 0;
  double roofline_us = 0;
  double kernel_us = 0;   // the kernels alone, before the runtime's host time
  std::string bound;      // of the main kernel
  std::string tile;       // "128x64x8 256t" or "256t v4 x4"
};

struct GPUSIM_API ValidationGroup {
  std::string gpu;       // device name as measured
  std::string profile;   // the profile it was predicted with
  std::string op_class;
  ErrorStats model;
  ErrorStats roofline;
  std::vector<ValidatedRow> worst;  // by absolute error of the model, worst first
};

struct GPUSIM_API SkippedRecords {
  std::string reason;  // "no profile for GPU \"X\": ...", "op \"foo\" ..."
  int64_t count = 0;
};

// --- whole models (records of op_class "model": one forward pass of a graph, timed end to end)

// One model record predicted: the graph lowered by the record's runtime (lowering.h) with its
// layout, autocast and skipped patterns, priced on the GPU's profile, inputs already on the device.
struct GPUSIM_API ModelRow {
  size_t record = 0;
  std::string model, gpu, profile, runtime, layout, family;
  int64_t batch = 0;
  double measured_us = 0, predicted_us = 0, roofline_us = 0;
  double kernels_us = 0, host_us = 0;
  int kernels = 0;
  // The kernels that cost most: what made each (the pattern or op) and its time.
  std::vector<std::pair<std::string, double>> top;
};

struct GPUSIM_API ModelGroup {
  // "all" where the group pools over that field.
  std::string gpu, profile, runtime, layout, family;
  ErrorStats model, roofline;
  std::vector<ModelRow> worst;  // by absolute error, worst first
};

// How well the predicted speed-up of one runtime over another ranks models: per GPU, models
// measured under both (per-sample time, each at its own batch).
struct GPUSIM_API SpeedupStats {
  std::string gpu, base, faster;  // "pytorch-eager" (nchw) -> "torch-compile"
  ErrorStats stats;               // of the speed-ups: MAPE, bias, tau
};

struct GPUSIM_API ModelReport {
  std::vector<ModelGroup> groups;
  std::vector<SpeedupStats> speedups;
  std::vector<ModelRow> rows;  // every row
  std::vector<SkippedRecords> skipped;
  double seconds = 0;
};

// --- language models (records of op_class "model" with config family "llm": llama-bench's ppN and
// tgN tests, read_llamacpp_csv): each predicted as a generation (include/gpusim/llm.h) of the
// bundled description it names, on its GPU's profile, under its llama.cpp backend.
struct GPUSIM_API LlmRow {
  size_t record = 0;
  std::string model, gpu, profile, backend, weights, test;
  int64_t tokens = 0;
  double measured_us = 0, predicted_us = 0;  // the test's N tokens
  double kernels_us = 0;                     // of that, the kernels alone
  int64_t kernels = 0;                       // kernels launched
  double gap_us = 0;                         // the per-kernel gap it was predicted with
  std::string bound;                         // of the test's phase
};
struct GPUSIM_API LlmGroup {
  std::string gpu, backend, test;  // test: "pp" or "tg"; "all" where pooled
  ErrorStats stats;
};
// Quantized time over F16 time for the same GPU, backend, model, test and llama.cpp build,
// measured and predicted.
struct GPUSIM_API LlmRatio {
  std::string gpu, backend, model, test, weights;
  double measured = 0, predicted = 0;
  double error_pct = 0;  // (predicted - measured) / measured
};
struct GPUSIM_API LlmReport {
  std::vector<LlmRow> rows;
  std::vector<LlmGroup> groups;   // per GPU x backend x test kind, then per backend x test kind, then all
  std::vector<LlmRatio> ratios;
  // The target set: CUDA and Metal rows in F16, Q8_0 and Q4_0, tests tg128 and pp512.
  ErrorStats target_tg, target_pp;
  // The per-kernel gap of each backend's runtime, fitted on tg rows (every GPU; with leave-one-out,
  // each GPU's own fit is in its rows' gap_us).
  std::map<std::string, double> gaps;
  bool leave_one_gpu_out = false;
  bool leave_one_architecture_out = false;  // each GPU held out with the others of its architecture
  std::vector<SkippedRecords> skipped;
};

struct GPUSIM_API ValidationReport {
  std::vector<ValidationGroup> groups;  // sorted by GPU, then class
  // Each GPU's rows over all its classes, and every row together.
  std::vector<ValidationGroup> per_gpu;
  ValidationGroup overall;
  std::vector<SkippedRecords> skipped;
  std::vector<ValidatedRow> rows;  // every row, when keep_rows
  double seconds = 0;              // wall time of the predictions
  // Whole-model records, when any were given (validate_models).
  ModelReport models;
  // Language-model records, when any were given (validate_llm).
  LlmReport llm;
};

// Per-op records are grouped per (GPU, op class); whole-model records (op_class "model") go to
// `models` (validate_models).
GPUSIM_API Result<ValidationReport> validate(const std::vector<Measurement>& records, const ValidateOptions& opts);

// The whole-model records of `records` predicted and scored (others are ignored).
GPUSIM_API Result<ModelReport> validate_models(const std::vector<Measurement>& records, const ValidateOptions& opts);

// The language-model records of `records` predicted and scored. The one figure fitted is each
// llama.cpp backend's per-kernel gap (the device's time between one kernel and the next), from the
// tg rows: on every GPU, or with `leave_one_gpu_out` for each GPU on the other GPUs of its backend
// only (a backend measured on one GPU alone keeps its runtime file's figure). `held_with` (a GPU's
// name as records give it -> its group, e.g. its architecture) holds out every GPU of the held-out
// one's group together: leave one architecture out.
GPUSIM_API Result<LlmReport> validate_llm(const std::vector<Measurement>& records, const ValidateOptions& opts,
                                          bool leave_one_gpu_out,
                                          const std::map<std::string, std::string>& held_with = {});

// A plain roofline of one kernel: its FLOPs at the datasheet peak it may use, or its compulsory
// bytes at the datasheet DRAM bandwidth, whichever is longer; microseconds.
GPUSIM_API double roofline_us(const KernelWork& w, const DeviceModel& d);

struct GPUSIM_API FitOptions {
  std::vector<std::string> profile_dirs;
  int threads = 0;
  // At most this many rows per (GPU, op) take part in each step of the fit (a fixed stride sample).
  int rows_per_op = 400;
};
// Fits host times per op for each runtime and, per vendor, the efficiency factors the data
// constrains (DRAM bandwidth from elementwise ops, the SIMT GEMM rate from GEMMs and convolutions),
// on every record given. Deterministic.
GPUSIM_API Result<FittedModel> fit_model(const std::vector<Measurement>& records, const FitOptions& opts);

// What a leave-one-out holds out in turn: a GPU, a model (the graph a `gpusim run` record
// measured, the first word of its source_ref: records of no model are always fitted on), or an
// architecture (every GPU whose profile's architecture_family is the same: Ampere, CDNA2, ...; a
// GPU with no profile is held out alone): how the model does on a generation it has not seen.
enum class HoldOut { kGpu, kModel, kArchitecture };
// The model a record measured ("resnet50" from "models/resnet50.onnx fp16 kernel 3"), or "".
GPUSIM_API std::string record_model(const Measurement& m);

// Leave-one-GPU-out: for each GPU, fit on the records of every other GPU and validate on its own.
// The report's groups are the held-out predictions, GPU by GPU (whole models too). With
// HoldOut::kModel, leave-one-model-out: the same, model by model.
GPUSIM_API Result<ValidationReport> validate_leave_one_out(const std::vector<Measurement>& records, const ValidateOptions& vopts,
                                                const FitOptions& fopts, std::vector<FittedModel>* fits = nullptr,
                                                HoldOut by = HoldOut::kGpu);

// Leave-one-family-out for whole models: for each model family (config "family": attention,
// conv), fit on every per-op record and the other families' model records, predict that family's.
GPUSIM_API Result<ModelReport> validate_leave_one_family_out(const std::vector<Measurement>& records, const ValidateOptions& vopts,
                                                  const FitOptions& fopts);

// The groups and speed-ups of predicted model rows (validate_models builds them; the held-out
// folds of a cross-validation are summarized together).
GPUSIM_API ModelReport summarize_models(std::vector<ModelRow> rows, int worst);

// The statistics of one set of (predicted, measured) pairs.
GPUSIM_API ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured);
// Kendall's tau-b in O(n log n) (Knight's algorithm); 0 for fewer than two rows.
GPUSIM_API double kendall_tau(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace gpusim
