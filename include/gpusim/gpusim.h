// gpusim's library entry point: one Session for the whole pipeline an inference engine or a service
// links — open a model, choose a GPU, predict, search plans, compile and run a plan on a backend
// with the caller's own buffers, time it, and record the measurements in the store. The gpusim
// command line, the Python package and `gpusim serve` are thin layers over this header, and every
// JSON document they print comes from gpusim/documents.h, so all three answer alike.
//
// Errors: every call returns a Result (gpusim/result.h) whose message is the one the CLI prints
// ("model.onnx: node "conv_7" (Conv): ..."). No exception escapes a public call: an unexpected
// one becomes ErrorCode::kInternal with the call's name in the message.
//
// Thread safety:
//   - Session: every method is const and safe to call from many threads at once on one Session.
//   - Model, GpuProfile, Plan, Prediction: immutable values; share them freely between threads.
//   - Program: one compiled plan on one device; use it from one thread at a time (calls on one
//     Program are serialized by a mutex, so misuse is slow, not wrong).
//
// Usage:
//   #include <gpusim/gpusim.h>
//   gpusim::Session s;
//   auto model = s.open_model("resnet50.onnx", {.dims = {"batch=8"}});
//   auto gpu = s.gpu("nvidia-rtx-3060");
//   if (!model || !gpu) { ... model.error().message ... }
//   auto p = s.predict(*model, *gpu, {.dtype = gpusim::DType::kFloat16});
//   std::printf("%.3f ms\n", p->total_us / 1e3);
//   std::string doc = gpusim::prediction_document(*p, *gpu);  // schema gpusim.predict/1
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/documents.h"
#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/host.h"
#include "gpusim/llm.h"
#include "gpusim/measurement.h"
#include "gpusim/plan.h"
#include "gpusim/target.h"
#include "gpusim/predict.h"
#include "gpusim/result.h"
#include "gpusim/scheduler.h"
#include "gpusim/tensor_data.h"
#include "gpusim/tuning.h"
#include "gpusim/validate.h"
#include "gpusim/wording.h"

namespace gpusim {

// The library's version ("0.1.0").
GPUSIM_API const char* version();

// The id of a model's bytes (hex, 32 digits): Model::content_hash, the service's model_id.
GPUSIM_API std::string content_hash(std::string_view bytes);

// A file a user names, read whole: a regular file only (a directory, FIFO or device is refused,
// without blocking on a FIFO) of at most `max_bytes`. `what` names its role in the message ("the
// plan", "the token file"), which begins with the path.
GPUSIM_API Result<std::string> read_user_file(const std::string& path, int64_t max_bytes, const std::string& what) noexcept;

struct GPUSIM_API SessionOptions {
  // Directories of GPU profiles searched first (the CLI's --profiles), before $GPUSIM_PROFILE_PATH,
  // the user's config directory and the installed profiles (gpusim/data_dirs.h).
  std::vector<std::string> profile_dirs;
  // Directories of runtime models (runtimes/*.yaml) searched first.
  std::vector<std::string> runtime_dirs;
};

struct GPUSIM_API ModelOptions {
  // Symbolic input dims, as --dim takes them: "NAME=VALUE" or "INPUT:AXIS=VALUE".
  std::vector<std::string> dims;
  // Refuse a graph of more nodes than this (0: no limit), as ImportOptions::max_nodes.
  int64_t max_nodes = 0;
  // Called with the node count before the graph is parsed, as ImportOptions::admit.
  std::function<Status(int64_t nodes)> admit = nullptr;
  // Every input's leading axis at this size, symbolic or fixed (ImportOptions::batch): the batch a
  // comparison of runtimes runs at. Unset: the sizes `dims` and the model give.
  std::optional<int64_t> batch = std::nullopt;
};

// An imported graph (shapes inferred, weights not kept). Immutable and cheap to copy: copies share
// one graph. `source` is the path, or the name given with the bytes.
class GPUSIM_API Model {
 public:
  Model() = default;
  bool valid() const { return state_ != nullptr; }
  const Graph& graph() const;
  const std::string& source() const;
  // Hex digest of the model's bytes: the same file or upload gives the same id. A file is read
  // for it on the first call (not when opened).
  const std::string& content_hash() const;
  int64_t size_bytes() const;

 private:
  friend class Session;
  struct State;
  std::shared_ptr<const State> state_;
};

struct GPUSIM_API PredictRequest {
  // Re-type the graph's float tensors first (fp32, fp16, bf16); unset: the model's own types.
  std::optional<DType> dtype;
  // The runtime that launches the kernels: "" or "gpusim" (gpusim's executor), "cuda-graph",
  // "pytorch-eager", or a runtime YAML file (include/gpusim/runtime.h).
  std::string runtime;
  // The host that drives the GPU (host.h): a host profile's name (runtimes/hosts/), a path to one,
  // or a description ("os=windows,single_thread=2200"). The runtime's per-call host time is scaled
  // to it; "": the reference hosts the runtime's figures were fitted on (Linux).
  std::string host;
  // Score this plan instead of the eager one (Session::load_plan). Its own dtype applies unless
  // `dtype` is given.
  std::optional<Plan> plan;
  // A runtime with lowering rules (pytorch-eager, torch-compile): the layout of 4-D activations
  // ("nchw", "nhwc"), torch.autocast's type (fp16, bf16), and its patterns the model's code does not
  // take (lowering.h, LoweringOptions).
  LoweringOptions lowering;
  // Copy inputs to the device and outputs back (false: they stay on the device, as a benchmark's).
  bool host_copies = true;
};

// One GPU's prediction in a comparison.
struct GPUSIM_API ComparedGpu {
  GpuProfile gpu;
  Prediction prediction;
};

// One runtime's prediction in a comparison of runtimes on one GPU (Session::compare_runtimes).
struct GPUSIM_API ComparedRuntime {
  // A runtime's name (or YAML path), or "gpusim-plan": gpusim's best plan (a greedy search in the
  // generated tile space) on its own executor.
  std::string runtime;
  TileSpace tiles = TileSpace::kLibrary;
  Prediction prediction;
  int64_t batch = 1;         // the graph's batch: its first input's leading size
  double items_per_s = 0;    // batch / latency
  // "host" when the GPU waits on launches for more than half the time, else "device".
  std::string bound;
  std::string why;           // what sets its time, in a sentence
};

struct GPUSIM_API RuntimeComparisonOptions {
  // Runtime names or YAML paths, and "gpusim-plan"; empty or {"all"}: every runtime found that runs
  // ONNX graphs, then gpusim-plan. A runtime named that cannot run the model is an error; with
  // "all" it is skipped and said.
  std::vector<std::string> runtimes;
};

struct GPUSIM_API RuntimeComparison {
  std::string model;
  std::string gpu;
  std::vector<ComparedRuntime> rows;  // fastest first
  // Runtimes "all" found that do not run this model, each with the reason.
  std::vector<std::pair<std::string, std::string>> skipped;
  // Which runtime wins and why, against the runner-up ("" with one row).
  std::string verdict;
};

// Backends that run plans for real.
struct GPUSIM_API CompileOptions {
  std::string backend = "cpu";  // cpu (the reference), vulkan, cuda or hip
  int device = 0;               // index within the backend
  // The plan to run; unset: the eager plan, with each kernel's tile chosen for `gpu` (or for the
  // profile whose name matches the device) among those codegen generates.
  std::optional<Plan> plan;
  // The profile predictions and tiles use; unset: the profile matching the device's name, if any.
  std::optional<GpuProfile> gpu;
  DType dtype = DType::kFloat32;  // fp32 or fp16: the float type the kernels store
  uint64_t seed = 1;              // weights a shape-only model lacks, and inputs not given
  // fp32 GEMMs and convolutions on the matrix units as TF32 where the device's matrix path has
  // them (wmma on CUDA sm_80 and newer; the portable path rounds to TF32 the same way); predictions
  // price them so (TargetOptions::allow_tf32).
  bool allow_tf32 = false;
  // The matrix path GEMM-like kernels use: "" (the device's own: wmma on CUDA, MFMA on CDNA, none
  // elsewhere), "none" (the SIMT loop), or "portable" (the matrix kernels' tiles, fragments and
  // epilogue with each product computed by the warp's threads: it runs on any device, so the
  // matrix-unit kernels are checked against the reference on lavapipe).
  std::string matrix_path;
};

// Whether compile() accepts the options' backend and dtype: the check compile() itself makes first,
// so a caller can tell a bad choice (ErrorCode::kInvalidArgument, naming the option, the value and
// what is allowed) from a failure to compile or run. Thread-safe.
GPUSIM_API Status check_compile_options(const CompileOptions& opts) noexcept;

// A serialized ONNX TensorProto (.pb, as the ONNX test data keeps inputs) as a buffer.
GPUSIM_API Result<HostBuffer> read_tensor_buffer(const std::string& path) noexcept;

// A graph input or output as a Program sees it.
struct GPUSIM_API TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  size_t size_bytes = 0;
};

// Where a long Program::time or Program::tune call is, for a progress line. `phase` is "compile"
// (kernels generated and compiled), "warm-up" (run 0), "timed run" (runs 1..runs), "check" (the
// CPU reference computing nodes for --check), or "tune" (plan kernels tuned, with `run` the
// candidates measured so far); `done` of `total` steps of that phase, counted in `unit`
// ("kernels", "launches" or "nodes"). The string views live for the call only.
struct GPUSIM_API Progress {
  std::string_view phase, unit;
  int run = 0, runs = 0;
  int done = 0, total = 0;
};

struct GPUSIM_API TimingOptions {
  static constexpr int kMaxRepeat = 10000;  // each run's per-kernel times are kept for the medians
  int repeat = 3;     // timed runs after one warm-up (1 to kMaxRepeat); per-kernel times are medians
  bool check = false; // compare every output with the CPU reference (relative L2 error)
  // Called on the calling thread between steps (often: thousands of times for a large model);
  // keep it cheap and do not call back into the Program. An exception it throws ends the call
  // with an error.
  std::function<void(const Progress&)> progress;
};

struct GPUSIM_API KernelReport {
  int plan_kernel = 0;
  std::string name, op_type, cls;
  std::vector<std::string> fused_ops;  // anchor first
  bool device = true;                  // false: ran on the host reference
  bool fused_as_planned = true;
  int launches = 0;
  double measured_us = 0, min_us = 0, max_us = 0;
  std::optional<double> predicted_us;  // when a profile was used
  TileConfig tile;
  std::optional<KernelWork> work;  // what it computes, when predicted (the store re-predicts it)
};

struct GPUSIM_API OutputCheck {
  std::string output;
  double relative_l2 = 0;  // NaN: shapes differ, or a NaN the reference does not have
  double tolerance = 0;
  bool pass = false;
};

struct GPUSIM_API OutputSummary {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  double min = 0, max = 0, mean = 0;
};

// One timed run of a Program: the gpusim.run/1 document's content.
struct GPUSIM_API RunReport {
  std::string model, backend, dtype;
  std::string device_name, device_vendor, device_driver, device_arch;
  bool device_is_cpu = false;
  std::optional<std::string> gpu;  // the profile predictions used
  int repeat = 0;
  double total_us = 0;  // sum of the kernels' medians
  std::optional<double> predicted_us;
  std::vector<KernelReport> kernels;  // in plan order; for the cpu backend, one per node
  std::vector<OutputSummary> outputs;
  std::vector<OutputCheck> checks;    // when TimingOptions::check
  int compiled = 0, cache_hits = 0;
  double compile_ms = 0;
  std::string plan_source;  // "eager" or where the plan came from
  int plan_kernels = 0;
  std::vector<std::string> notes;
  bool check_passed() const;
};

// Just-in-time autotuning of a compiled plan (Program::tune).
struct GPUSIM_API TuneOptions {
  static constexpr int kMaxTopK = kMaxTuneTopK;
  int top_k = 8;        // candidates measured per kernel, the simulator's best first: 1..kMaxTopK
  double budget_s = 0;  // stop measuring after this many seconds (0: no limit); the rest keep the simulator's pick
  // The measurement store holding the tuning cache and the measurements: a path, "" for
  // default_tuning_store(), or "off" for neither (everything measured, nothing kept).
  std::string store;
  bool use_cache = true;  // false: measure even kernels the cache holds (their entries are replaced)
  std::string command;    // recorded with the measurements
  // Called between candidates: phase "tune", unit "kernels", done of total plan kernels.
  std::function<void(const Progress&)> progress;
};

// A plan compiled for one device. Not copyable; see the thread-safety note above.
class GPUSIM_API Program {
 public:
  struct Impl;  // opaque
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  const Plan& plan() const;
  // The plan as a document (schema gpusim.plan/1, as `gpusim plan --out` writes it): a tuned plan
  // saved for `gpusim run --plan` and `predict --plan`.
  std::string plan_document() const;
  // Runs once: `inputs` in graph-input order (fewer: the rest from the seed); each output is
  // written to the caller's buffer of the same index, whose dtype and shape must match outputs().
  Status run(const std::vector<ConstTensorView>& inputs, const std::vector<TensorView>& outputs) noexcept;
  // The timing harness: one warm-up, then `repeat` timed runs, every kernel timed with the
  // device's timers; predictions beside measurements when a profile is known.
  Result<RunReport> time(const std::vector<ConstTensorView>& inputs, const TimingOptions& opts = {}) noexcept;
  // Autotunes the plan on the device: per kernel, the simulator's top K tiles (among those codegen
  // generates) are compiled and timed alone, and the measured best replaces the plan's tile (a
  // kernel the cache knows for this device, driver and gpusim version is not measured). plan()
  // and later time() calls use the tuned plan; predictions follow it. Needs a device backend and
  // a profile (the device's own or CompileOptions::gpu) to rank with.
  Result<TuneReport> tune(const TuneOptions& opts = {}) noexcept;

 private:
  friend class Session;
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A report card and the measurements it indexes (validation_document needs both).
struct GPUSIM_API Validation {
  std::vector<Measurement> records;
  ValidationReport report;
};

class GPUSIM_API Session {
 public:
  explicit Session(SessionOptions opts = {});

  // The directories profiles are searched in, in order.
  const std::vector<std::string>& profile_dirs() const { return profile_dirs_; }
  const std::vector<std::string>& runtime_dirs() const { return runtime_dirs_; }

  // ---- models
  Result<Model> open_model(const std::string& path, const ModelOptions& opts = {}) const noexcept;
  // A serialized ONNX ModelProto in memory; `name` stands for the file in messages.
  Result<Model> open_model_bytes(std::string bytes, const std::string& name = "model.onnx",
                                 const ModelOptions& opts = {}) const noexcept;

  // The same model with every input's leading axis at `batch` (ModelOptions::batch), opened again
  // from its file or bytes with the dims it was opened with.
  Result<Model> at_batch(const Model& m, int64_t batch) const noexcept;

  // ---- GPUs
  // A profile id (`gpusim profiles list`), or a path to a .yaml profile (a calibrated one too).
  Result<GpuProfile> gpu(const std::string& id_or_path) const noexcept;
  // A profile from YAML text; `extends:` resolves against the session's profile directories.
  // `source` names the text in messages; a file name (NAME.yaml) also asks that the profile's
  // name be NAME, as a file's must. The default names no file, so any real profile's text loads.
  Result<GpuProfile> gpu_from_yaml(const std::string& yaml_text, const std::string& source = "profile") const noexcept;
  // Every profile found, each loaded or with the reason it does not load.
  std::vector<std::pair<ProfileEntry, Result<GpuProfile>>> profiles() const noexcept;

  // ---- targets (target.h): a GPU and the tile space its kernels come from
  // kGenerated: the tiles gpusim's code generator builds within the profile's threads, shared
  // memory and matrix units (what `gpusim run` executes); kLibrary: the cost model's whole menu,
  // as vendor libraries run kernels.
  Target target(const GpuProfile& gpu, TileSpace tiles) const noexcept;
  // With options (TargetOptions::allow_tf32: fp32 GEMMs and convolutions as TF32).
  Target target(const GpuProfile& gpu, TileSpace tiles, const TargetOptions& opts) const noexcept;
  // The same, for the Dojo's virtual and power-capped GPUs; it reads no compiled figures (a
  // dataset does not depend on the machine's kernel cache).
  static TargetMaker target_maker();
  // The tile space of the kernels a runtime launches (runtime_tile_space): generated for "" or
  // "gpusim" and "cuda-graph", library for a framework's. What the front ends use when the user
  // names none.
  Result<TileSpace> runtime_tiles(const std::string& runtime) const noexcept;

  // ---- prediction and search (the same target: predict's eager plan is plan()'s eager baseline)
  Result<Prediction> predict(const Model& m, const Target& target, const PredictRequest& req = {}) const noexcept;
  Result<std::vector<ComparedGpu>> compare(const Model& m, const std::vector<std::string>& gpus, TileSpace tiles,
                                           const PredictRequest& req = {}, const TargetOptions& target_opts = {}) const noexcept;
  // The runtimes that can run `m` on one GPU, ranked: each priced in its own tile space
  // (runtime_tiles) with `req`'s dtype, host and copies; `req`'s lowering options (layout,
  // autocast, skip) apply to the runtimes that have lowering rules. `req.runtime` and `req.plan`
  // are not used (the runtimes are the comparison's).
  Result<RuntimeComparison> compare_runtimes(const Model& m, const GpuProfile& gpu, const RuntimeComparisonOptions& opts,
                                             const PredictRequest& req = {},
                                             const TargetOptions& target_opts = {}) const noexcept;
  Result<SearchResult> plan(const Model& m, const Target& target, const SearchOptions& opts = {}) const noexcept;
  // A plan document (schema gpusim.plan/1, from plan_to_json or `gpusim plan --out`) for `m`.
  Result<Plan> load_plan(const Model& m, const std::string& json_text, const std::string& source = "plan.json") const noexcept;
  // The same from a plan file (a regular file of at most 256 MiB).
  Result<Plan> load_plan_file(const Model& m, const std::string& path) const noexcept;

  // ---- execution
  Result<Program> compile(const Model& m, const CompileOptions& opts = {}) const noexcept;

  // ---- ground truth
  // Measurements of a timed run, ready for the store (source "gpusim run").
  std::vector<Measurement> measurements(const RunReport& r) const noexcept;
  // Adds records to the SQLite store at `store_path` (created when absent).
  Result<InsertStats> record(const std::string& store_path, const std::vector<Measurement>& records,
                             const std::string& command = "gpusim library") const noexcept;
  // The simulator's report card against measurements (a NeuSight CSV, run JSON, a store or a
  // directory of them; read_measurements).
  Result<Validation> validate(const std::string& truth_path, ValidateOptions opts = {}) const noexcept;

  // ---- language models (llm.h)
  // A model description by name (models/llm: "llama-2-7b", in default_llm_dirs()) or path (a
  // gpusim.llm/1 YAML or a config.json).
  Result<LlmSpec> llm(const std::string& name_or_path) const noexcept;
  // One from its text (an upload); `source` names it in messages.
  Result<LlmSpec> llm_from_text(const std::string& text, const std::string& source = "model.yaml") const noexcept;
  // A generation predicted on the target: time to first token, per-token latency, tokens/s and
  // memory. Without opts.runtime, the backend's llama.cpp runtime from this session's runtime
  // directories.
  Result<GenerationPrediction> generate(const LlmSpec& spec, const Target& target, GenerationOptions opts = {}) const noexcept;
  // The generation of an ONNX decoder with a KV cache (past_key_values inputs; llm.h,
  // predict_decoder_generation): each pass predicted as predict() predicts the graph under `req`'s
  // dtype, runtime and lowering, with no host copies (the cache stays on the device between steps,
  // as a runtime binds it); a plan is refused (the passes differ in shape). Of opts, prompt,
  // generate and batch apply.
  Result<GenerationPrediction> generate_decoder(const std::string& onnx_path, const Target& target,
                                                const GenerationOptions& opts, const PredictRequest& req = {}) const noexcept;
  // The same for a decoder's bytes (an upload, as open_model_bytes takes one); `name` stands for it
  // in messages.
  // The same generation on each of several GPUs (profile names or paths; every profile is loaded
  // before any prediction, so a bad name fails first): a description's as generate() predicts it on
  // each GPU's library target, an ONNX decoder's as generate_decoder() in `tiles`.
  Result<std::vector<GenerationPrediction>> compare_generation(const LlmSpec& spec, const std::vector<std::string>& gpus,
                                                               const GenerationOptions& opts = {}) const noexcept;
  Result<std::vector<GenerationPrediction>> compare_decoder_generation(const std::string& onnx_path,
                                                                       const std::vector<std::string>& gpus, TileSpace tiles,
                                                                       const GenerationOptions& opts,
                                                                       const PredictRequest& req = {},
                                                                       const TargetOptions& target_opts = {}) const noexcept;
  Result<GenerationPrediction> generate_decoder_bytes(std::string_view bytes, const std::string& name, const Target& target,
                                                      const GenerationOptions& opts, const PredictRequest& req = {}) const noexcept;

 private:
  std::vector<std::string> profile_dirs_;
  std::vector<std::string> runtime_dirs_;
};

}  // namespace gpusim
