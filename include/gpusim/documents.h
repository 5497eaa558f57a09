// The JSON documents gpusim answers with — one function per schema, used by the CLI's --json, the
// Python package and `gpusim serve`, so the three give the same document for the same question.
// Schemas are documented in README.md ("JSON output"); each document carries its "schema" field.
//
// Usage:
//   auto p = session.predict(model, gpu);
//   std::string doc = gpusim::prediction_document(*p, gpu);   // {"schema": "gpusim.predict/1", ...}
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/measurement.h"
#include "gpusim/tuning.h"
#include "gpusim/predict.h"
#include "gpusim/result.h"
#include "gpusim/scheduler.h"
#include "gpusim/validate.h"

namespace gpusim {

struct ComparedGpu;
struct RuntimeComparison;
struct RunReport;

// gpusim.predict/1: totals, every kernel (time, bound, tile, achieved rates), transfers, notes.
GPUSIM_API std::string prediction_document(const Prediction& p, const GpuProfile& gpu);
// gpusim.compare/1: one row per GPU (latency, speed-up over the first, time share by bound).
GPUSIM_API std::string compare_document(const std::string& model, const std::vector<ComparedGpu>& rows);
// gpusim.compare-runtimes/1: the runtimes that run a model on one GPU, ranked at each batch size
// (Session::compare_runtimes, one comparison a batch).
GPUSIM_API std::string runtime_comparison_document(const std::string& model,
                                                   const std::vector<RuntimeComparison>& batches);

// What `gpusim report` draws: one prediction on one GPU, and what it is compared with.
struct GPUSIM_API ReportData {
  std::string model;
  GpuProfile gpu;
  Prediction prediction;
  // The runtimes on this GPU (Session::compare_runtimes), when asked.
  const RuntimeComparison* runtimes = nullptr;
  // The same model on other GPUs (Session::compare), when asked.
  const std::vector<ComparedGpu>* gpus = nullptr;
};
// A run's kernels as Chrome trace-event JSON (Perfetto, chrome://tracing): each kernel's measured
// median laid end to end on one track (each was timed on its own, so this is their sum, not one
// captured run), and its prediction on a second track when a profile priced it.
GPUSIM_API std::string run_trace(const RunReport& r);
// One self-contained HTML page (inline CSS and SVG; no script, nothing fetched): the headline
// figures, the biggest costs, the roofline of every kernel, the timeline with its host track, the
// comparison, the notes. Every text from the model is escaped.
GPUSIM_API std::string report_html(const ReportData& d);
// gpusim.plan-search/1: the ranked plans, each with its plan document (gpusim.plan/1) inside.
GPUSIM_API std::string plan_search_document(const std::string& model, const Graph& g, const GpuProfile& gpu,
                                 const SearchOptions& o, const SearchResult& r);
// gpusim.profile/1: every figure of one profile, efficiency origins, sources, assumptions.
GPUSIM_API std::string profile_document(const GpuProfile& p);
// {"profiles": [...]}: one entry per profile found, loaded or with its error.
GPUSIM_API std::string profile_list_document(const std::vector<std::pair<ProfileEntry, Result<GpuProfile>>>& all);
// gpusim.profiles-validate/1: {"profiles": [{name, path, valid, problems: [...], derived: [...]}],
// "valid", "invalid"}. `problems` holds every problem found (a loader error has one per line);
// `derived`, for a valid profile, the figures computed rather than read (rescaled peaks, ...).
GPUSIM_API std::string profile_validation_document(const std::vector<std::pair<std::string, Result<GpuProfile>>>& results);
// The problems a failed profile load reports, one per line of its message.
GPUSIM_API std::vector<std::string> profile_problems(const Error& e);
// gpusim.validate/1: the report card per GPU and class; `mode` is datasheet, fit or
// leave-one-gpu-out; `records` are the measurements the report indexes.
GPUSIM_API std::string validation_document(const ValidationReport& rep, const std::vector<Measurement>& records,
                                const std::string& mode, const std::string& truth, const std::string& runtime);
// gpusim.run/1: a timed run, measured beside predicted per kernel.
GPUSIM_API std::string run_document(const RunReport& r);
// gpusim.tune/1: an autotuning run: per kernel the candidates (predicted, measured), the tile
// chosen and the simulator's report card; `end_to_end` (may be null) is the tuned plan timed whole.
GPUSIM_API std::string tune_document(const TuneReport& t, const RunReport* end_to_end);
// gpusim.tuning-cache/1: what the tuning cache at `path` holds, per device and driver.
GPUSIM_API std::string tuning_cache_document(const std::string& path, const TuningCacheInfo& info);
// gpusim.error/1: {"schema", "error": {"code", "message"}} — how the service reports a failure.
GPUSIM_API std::string error_document(const Error& e);
GPUSIM_API std::string_view error_code_name(ErrorCode c);

// Where an efficiency factor of a profile comes from: "calibrated" (measured by gpusim calibrate),
// "profile" (set in its YAML or the vendor's fitted defaults) or "default".
GPUSIM_API std::string efficiency_origin(const GpuProfile& p, const std::string& key, double value);
// The best fp16-input matrix-unit peak (any accumulate); nullopt when the GPU has none.
GPUSIM_API std::optional<double> best_fp16_matrix_tflops(const GpuProfile& p);

}  // namespace gpusim
