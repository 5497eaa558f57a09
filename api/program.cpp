// Program (include/gpusim/gpusim.h): a plan made ready for one backend, run with the caller's
// buffers or timed with the harness. The cpu backend is the reference (fp64 accumulation) and
// times nodes; a device backend runs the plan through codegen and times kernels with device timers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "compiled_figures.h"
#include "executor.h"
#include "tune.h"
#include "gpusim/data_dirs.h"
#include "gpusim/gpusim.h"
#include "gpusim/tensor_data.h"
#include "guard.h"
#include "model_state.h"
#include "raw_decode.h"
#include "reference.h"

namespace gpusim {

using api::guarded;

bool RunReport::check_passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const OutputCheck& c) { return c.pass; });
}

struct Program::Impl {
  std::mutex mu;  // one call at a time: a device has one queue
  std::string model;
  CompileOptions opts;
  Graph g;  // as imported, re-typed to the plan's dtype
  Plan plan;
  std::string plan_source;
  std::optional<GpuProfile> gpu;
  std::optional<Prediction> pred;
  std::map<std::string, TensorData> weights;
  // What runs it: a device backend or the CPU reference, behind one interface (executor.h).
  std::unique_ptr<exec::Executor> exec;
  std::vector<std::string> notes;
  // What `gpusim predict` prices instead of the plan that runs (its kernel time and why), said
  // against the current prediction when a run is reported (tune changes it).
  std::optional<double> predict_kernels_us;
  std::string predict_differs;
  std::vector<TensorSpec> inputs, outputs;

  // The matrix path the options name (unset: the device's own).
  std::optional<codegen::MatrixPath> matrix() const {
    if (opts.matrix_path == "none") return codegen::MatrixPath::kNone;
    if (opts.matrix_path == "portable") return codegen::MatrixPath::kPortable;
    return std::nullopt;
  }
  // The executor's options for this program's kernels: storage, matrix path and TF32 as compiled.
  exec::RunOptions run_options() const {
    exec::RunOptions eo;
    eo.weights = &weights;
    eo.seed = opts.seed;
    eo.fp16_storage = opts.dtype == DType::kFloat16;
    eo.matrix = matrix();
    eo.allow_tf32 = opts.allow_tf32;
    return eo;
  }
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

const std::vector<TensorSpec>& Program::inputs() const { return impl_->inputs; }
const std::vector<TensorSpec>& Program::outputs() const { return impl_->outputs; }
const Plan& Program::plan() const { return impl_->plan; }
std::string Program::plan_document() const {
  std::lock_guard<std::mutex> lock(impl_->mu);  // tune() replaces the plan under the same lock
  return plan_to_json(impl_->plan, impl_->g);
}

namespace {

int64_t element_bytes(DType t) { return std::max(1, dtype_bits(t) / 8); }

TensorSpec info_of(const Graph& g, TensorId id) {
  const Tensor& t = g.tensor(id);
  TensorSpec i;
  i.name = t.name;
  i.dtype = t.dtype;
  i.shape = t.shape;
  i.size_bytes = static_cast<size_t>(shape_elements(t.shape).value_or(0) * element_bytes(t.dtype));
  return i;
}

// The caller's input buffers, each checked against the graph's input. They go to the executor as
// they are: a device run uploads their bytes, only the reference decodes them.
Status check_inputs(const std::vector<TensorSpec>& want, const std::vector<ConstTensorView>& views) {
  if (views.size() > want.size()) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("run: {} inputs given; the model takes {}", views.size(),
                                                               want.size()));
  }
  for (size_t k = 0; k < views.size(); ++k) {
    if (auto s = cpu::check_view(views[k], want[k].dtype, want[k].shape, fmt::format("run: input {} \"{}\"", k, want[k].name));
        !s) {
      return s;
    }
  }
  return Ok{};
}

// The inputs as the reference takes them (fp64 / int64 values), for `check`.
Result<std::vector<cpu::HostTensor>> decoded_inputs(const std::vector<TensorSpec>& want,
                                                   const std::vector<ConstTensorView>& views) {
  std::vector<cpu::HostTensor> out;
  for (size_t k = 0; k < views.size(); ++k) {
    auto t = cpu::from_view(views[k], want[k].dtype, fmt::format("run: input {} \"{}\"", k, want[k].name));
    if (!t) return t.error();
    out.push_back(std::move(*t));
  }
  return out;
}

// Output k into the caller's buffer: a device's bytes as they are, the reference's values encoded.
Status write_output(const exec::Output& o, const TensorSpec& want, const TensorView& v, size_t k) {
  const std::string where = fmt::format("run: output {} \"{}\"", k, want.name);
  const bool sequence = !o.buffer && o.host.is_sequence;
  if (sequence || !buffer_dtype(o.dtype())) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: a {} output cannot be returned in a buffer", where,
                                                           sequence ? "sequence" : std::string(dtype_name(o.dtype()))));
  }
  const size_t need = static_cast<size_t>(shape_elements(o.shape()).value_or(0) * element_bytes(o.dtype()));
  if (v.dtype != o.dtype() || v.shape != o.shape() || v.size_bytes != need || (v.data == nullptr && need > 0)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: the buffer is {} {} of {} bytes; the output is {} {} ({} bytes)", where,
                                  dtype_name(v.dtype), shape_str(v.shape), v.size_bytes, dtype_name(o.dtype()),
                                  shape_str(o.shape()), need));
  }
  if (o.buffer) {
    if (need > 0) std::memcpy(v.data, o.buffer->bytes.data(), need);
    return Ok{};
  }
  const HostBuffer b = cpu::to_buffer(o.host);
  if (!b.bytes.empty()) std::memcpy(v.data, b.bytes.data(), b.bytes.size());
  return Ok{};
}

std::vector<OutputSummary> summarize(const Graph& g, const std::vector<exec::Output>& outputs) {
  std::vector<OutputSummary> out;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const exec::Output& o = outputs[k];
    OutputSummary s;
    s.name = g.tensor(g.outputs[k]).name;
    s.shape = o.shape();
    s.dtype = o.dtype();
    // Element e as a double, read where it is (a buffer is not decoded whole).
    const auto value = [&o](int64_t e) {
      return o.buffer ? detail::load_real(o.buffer->bytes.data(), o.buffer->dtype, e) : o.host.real(e);
    };
    const bool numbers = o.buffer || !(o.host.is_sequence || o.host.is_string());
    const int64_t n = numbers ? shape_elements(o.shape()).value_or(0) : 0;
    double sum = 0;
    for (int64_t e = 0; e < n; ++e) {
      const double v = value(e);
      s.min = e == 0 ? v : std::min(s.min, v);
      s.max = e == 0 ? v : std::max(s.max, v);
      sum += v;
    }
    s.mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
    out.push_back(std::move(s));
  }
  return out;
}

// `progress` (may be empty) hears each node as `phase`, in run `run` of `runs`.
Result<cpu::RunResult> reference(const Program::Impl& p, const std::vector<cpu::HostTensor>& inputs,
                                 const std::function<void(const Progress&)>& progress = {},
                                 std::string_view phase = "check", int run = 0, int runs = 0) {
  cpu::RunOptions o;
  o.weights = &p.weights;
  o.seed = p.opts.seed;
  if (progress) {
    o.progress = [&](int done, int total) { progress(Progress{phase, "nodes", run, runs, done, total}); };
  }
  return cpu::run_reference(p.g, inputs, o);
}

}  // namespace

Result<HostBuffer> read_tensor_buffer(const std::string& path) noexcept {
  return guarded("read_tensor_buffer", [&]() -> Result<HostBuffer> {
    auto t = read_tensor_file(path);
    if (!t) return t.error();
    if (!buffer_dtype(t->dtype)) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: a {} tensor cannot be passed as a buffer", path, dtype_name(t->dtype)));
    }
    return cpu::to_buffer(cpu::from_data(*t));
  });
}

Status Program::run(const std::vector<ConstTensorView>& inputs, const std::vector<TensorView>& outputs) noexcept {
  return guarded("run", [&]() -> Status {
    Impl& p = *impl_;
    std::lock_guard<std::mutex> lock(p.mu);
    if (outputs.size() != p.outputs.size()) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("run: {} output buffers given; the model has {} "
                                                                 "outputs (Program::outputs() lists them)",
                                                                 outputs.size(), p.outputs.size()));
    }
    if (auto s = check_inputs(p.inputs, inputs); !s) return s;
    exec::RunOptions eo = p.run_options();
    eo.repeat = 0;  // one run, for its outputs
    eo.poison = false;
    auto r = p.exec->run(p.g, p.plan, inputs, eo);
    if (!r) return r.error();
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (auto s = write_output(r->outputs.at(k), p.outputs[k], outputs[k], k); !s) return s;
    }
    return Ok{};
  });
}

Result<RunReport> Program::time(const std::vector<ConstTensorView>& inputs, const TimingOptions& opts) noexcept {
  return guarded("time", [&]() -> Result<RunReport> {
    Impl& p = *impl_;
    std::lock_guard<std::mutex> lock(p.mu);
    if (opts.repeat < 1 || opts.repeat > TimingOptions::kMaxRepeat) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("repeat {} is not a count of timed runs; give 1 to {}", opts.repeat,
                                    TimingOptions::kMaxRepeat));
    }
    if (auto s = check_inputs(p.inputs, inputs); !s) return s.error();
    RunReport rep;
    rep.model = p.model;
    rep.backend = p.opts.backend;
    rep.dtype = std::string(dtype_name(p.opts.dtype));
    rep.repeat = opts.repeat;
    rep.plan_source = p.plan_source;
    rep.plan_kernels = static_cast<int>(p.plan.kernels.size());
    exec::Executor& ex = *p.exec;
    const backend::DeviceInfo& info = ex.info();
    rep.device_name = info.name;
    rep.device_vendor = info.vendor;
    rep.device_driver = info.driver;
    rep.device_arch = info.arch;
    rep.device_is_cpu = info.is_cpu;
    exec::RunOptions eo = p.run_options();
    eo.repeat = opts.repeat;
    if (opts.progress) {
      eo.progress = [&](std::string_view phase, int run, int done, int total) {
        opts.progress(Progress{phase, ex.progress_units(phase), run, opts.repeat, done, total});
      };
    }
    auto r = ex.run(p.g, p.plan, inputs, eo);
    if (!r) return r.error();
    rep.notes = r->notes;
    for (const auto& n : p.notes) rep.notes.push_back(n);
    if (p.predict_kernels_us && p.pred &&
        std::abs(*p.predict_kernels_us - p.pred->kernels_us) > 1e-6 * p.pred->kernels_us) {
      const bool tuned = p.plan_source.ends_with(", tuned");
      rep.notes.push_back(fmt::format("{}{}: {:.3f} ms of kernel time on {}, against {:.3f} ms predicted for the kernels "
                                      "that run (the figure above)",
                                      p.predict_differs, tuned ? ", tuned on this device" : "",
                                      *p.predict_kernels_us / 1e3, p.gpu->name, p.pred->kernels_us / 1e3));
    }
    if (opts.check && ex.is_reference()) {
      rep.notes.push_back("`check`: the cpu backend is the reference itself; nothing to compare");
    } else if (opts.check) {
      auto in = decoded_inputs(p.inputs, inputs);
      if (!in) return in.error();
      auto ref = reference(p, *in, opts.progress, "check", 0, opts.repeat);
      if (!ref) return make_error(ref.error().code, "`check`: the CPU reference failed: " + ref.error().message);
      // fp16 storage, or fp32 products of operands rounded to TF32's 10-bit mantissas.
      const double tol = p.opts.dtype == DType::kFloat16 ? 2e-2 : p.opts.allow_tf32 ? 1e-2 : 1e-3;
      for (size_t k = 0; k < r->outputs.size(); ++k) {
        const double err = exec::relative_l2(r->outputs[k], ref->outputs[k]);
        rep.checks.push_back({p.g.tensor(p.g.outputs[k]).name, err, tol, err <= tol});  // NaN fails
      }
    }
    rep.outputs = summarize(p.g, r->outputs);
    rep.total_us = r->total_us;
    rep.compiled = r->compile.compiled;
    rep.cache_hits = r->compile.cache_hits;
    rep.compile_ms = r->compile.compile_ms;
    if (p.gpu) rep.gpu = p.gpu->name;
    double predicted_total = 0;
    for (const auto& k : r->kernels) {
      KernelReport kr;
      kr.plan_kernel = k.plan_kernel;
      kr.name = k.name;
      kr.op_type = k.op_type;
      kr.cls = k.cls;
      kr.device = k.device;
      kr.fused_as_planned = k.fused_as_planned;
      kr.launches = k.launches;
      kr.measured_us = k.measured_us;
      kr.min_us = k.min_us;
      kr.max_us = k.max_us;
      if (k.plan_kernel < 0) {  // a node the reference timed: no plan kernel, nothing predicted
        kr.plan_kernel = k.node;
        rep.kernels.push_back(std::move(kr));
        continue;
      }
      const PlanKernel& pk = p.plan.kernels.at(static_cast<size_t>(k.plan_kernel));
      kr.tile = pk.tile;  // the tile it ran with, as codegen generates it (and as it was priced)
      const int anchor = pk.nodes.empty() ? -1 : pk.nodes.at(static_cast<size_t>(pk.anchor));
      if (anchor >= 0) kr.fused_ops.push_back(p.g.nodes.at(static_cast<size_t>(anchor)).op_type);
      for (int n : pk.nodes) {
        if (n != anchor) kr.fused_ops.push_back(p.g.nodes.at(static_cast<size_t>(n)).op_type);
      }
      if (p.pred) {
        const PlannedKernel& pk2 = p.pred->kernels.at(static_cast<size_t>(k.plan_kernel));
        kr.predicted_us = pk2.cost.total_us;
        kr.work = pk2.work;
        predicted_total += pk2.cost.total_us;
      }
      rep.kernels.push_back(std::move(kr));
    }
    if (p.pred) rep.predicted_us = predicted_total;
    return rep;
  });
}

Status check_compile_options(const CompileOptions& opts) noexcept {
  return guarded("compile", [&]() -> Status {
    if (opts.backend != "cpu" && !backend::is_device_backend(opts.backend)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`backend` \"{}\" is not a backend; choose cpu, null, vulkan, cuda or hip{}",
                                    opts.backend, backend::registered_backends().empty() ? "" : " or a registered plugin"));
    }
    if (opts.dtype != DType::kFloat32 && opts.dtype != DType::kFloat16) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`dtype {}` is not supported by the backends yet; use fp32 or fp16",
                                    dtype_name(opts.dtype)));
    }
    if (!opts.matrix_path.empty() && opts.matrix_path != "none" && opts.matrix_path != "portable") {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`matrix_path` \"{}\" is not a path to choose; use none (the SIMT loop) or portable "
                                    "(the matrix kernels computed by each warp's threads, on any device), or leave it "
                                    "unset for the device's own",
                                    opts.matrix_path));
    }
    return Ok{};
  });
}

Result<Program> Session::compile(const Model& m, const CompileOptions& opts) const noexcept {
  return guarded("compile", [&]() -> Result<Program> {
    if (!m.valid()) {
      return make_error(ErrorCode::kInvalidArgument, "compile: the Model is empty; open one with Session::open_model first");
    }
    if (auto ok = check_compile_options(opts); !ok) return ok.error();
    const std::string& b = opts.backend;
    auto impl = std::make_unique<Program::Impl>();
    Program::Impl& p = *impl;
    p.model = m.source();
    p.opts = opts;
    const Graph& g0 = m.graph();
    auto weights = m.state_->from_bytes ? read_model_tensors_bytes(m.state_->bytes, m.source())
                                        : read_model_tensors(m.source());
    if (!weights) return weights.error();
    p.weights = std::move(*weights);
    const DType dtype = opts.dtype;
    if (b == "cpu") {
      p.g = g0;
      p.plan_source = "reference";
      p.exec = exec::reference_executor();
    } else {
      auto dev = backend::open(b, opts.device);
      if (!dev) return dev.error();
      p.exec = exec::device_executor(std::move(*dev));
      const backend::DeviceInfo& info = p.exec->info();
      // What this device's generators build of a tile (the capability query the plan is fitted by),
      // with the compiled figures `gpusim codegen report` stored for its architecture (CUDA's sm_XY,
      // HIP's gfxNNN), as Session::target prices a profile's.
      std::shared_ptr<const codegen::CompiledFigureTable> figures;
      if (info.backend == "cuda" || info.backend == "hip") figures = codegen::load_compiled_figures(info.arch);
      auto cap = std::make_shared<codegen::TargetCapability>(
          codegen::target_options(info, dtype == DType::kFloat16, p.matrix(), opts.allow_tf32), std::move(figures));
      if (opts.gpu) {
        p.gpu = *opts.gpu;
      } else {
        p.gpu = profile_for_device(info.name, profile_dirs_);
        if (p.gpu) {
          p.notes.push_back(fmt::format("predictions use profile {} (matched the device name; `gpu` picks another)",
                                        p.gpu->name));
        } else {
          p.notes.push_back(fmt::format("no profile matches device \"{}\": kernels use default tiles and nothing is "
                                        "predicted (`gpu NAME` picks a profile; gpusim calibrate makes one for this "
                                        "device)",
                                        info.name));
        }
      }
      // The plan: the caller's, or eager (one kernel per op; tiles from the profile's cost model
      // when there is one, else each generator's default).
      if (opts.plan) {
        p.plan = *opts.plan;
        p.plan.allow_tf32 = p.plan.allow_tf32 || opts.allow_tf32;
        p.plan_source = "given";
        if (dtype != DType::kFloat32 || !p.plan.dtype) p.plan.dtype = dtype;
      } else if (p.gpu) {
        // Each kernel gets the cost model's best tile among those codegen builds on this device as
        // asked (the capability query), so the prediction prices the kernel that runs.
        Target target = make_target(*p.gpu, cap, TileSpace::kGenerated);
        target.device.allow_tf32 = opts.allow_tf32;
        p.plan = eager_plan(dtype == DType::kFloat32 ? g0 : retype(g0, dtype), target);
        p.plan.dtype = dtype;
        p.plan_source = "eager";
      } else {
        for (size_t i = 0; i < g0.nodes.size(); ++i) {
          if (!runs_on_device(g0, g0.nodes[i])) continue;
          PlanKernel k;
          k.nodes = {static_cast<int>(i)};
          p.plan.kernels.push_back(k);
        }
        classify_kernels(g0, p.plan);
        p.plan.dtype = dtype;
        p.plan_source = "eager";
      }
      p.g = p.plan.dtype && *p.plan.dtype != DType::kFloat32 ? retype(g0, *p.plan.dtype) : g0;
      // Vector widths outside fused elementwise kernels (or ones that do not divide the kernel's
      // elements) are not generated, a split-K is fitted to the k-steps, and codegen fits blocks,
      // threads and stages to this device: price each tile as it runs.
      const Plan as_given = p.plan;
      int regenerated = 0;
      const GraphIndex idx = index_graph(p.g);
      for (PlanKernel& k : p.plan.kernels) {
        if (k.nodes.empty() || k.anchor < 0 || k.anchor >= static_cast<int>(k.nodes.size())) continue;  // validate_plan says why
        const TileConfig t = cap->generated(plan_kernel_work(p.g, idx, k), k.tile);
        regenerated += !same_schedule(t, k.tile);  // plan files carry no smem_bytes or registers
        k.tile = t;
      }
      if (regenerated > 0) {
        std::string note = fmt::format("{} kernel(s) of the plan ask for a tile that codegen does not build as asked on "
                                       "{} (a K split past its k-steps, a vector width its class and size do not take, or a "
                                       "block, threads or stages it fits to the device): they run, and are predicted, with the tile "
                                       "that runs",
                                       regenerated, info.name);
        if (p.plan_source == "given" && p.gpu && !p.plan.gpu.empty() && p.plan.gpu != p.gpu->name) {
          note += fmt::format(". The plan was made for {}; this run tiles for {}: a plan made for it ranks the tiles "
                              "this device builds (gpusim plan MODEL --gpu {} --out plan.json)",
                              p.plan.gpu, p.gpu->name, p.gpu->name);
        }
        p.notes.push_back(std::move(note));
      }
      if (p.gpu) {
        if (auto v = validate_plan(p.plan, p.g, make_device(*p.gpu)); !v) {
          if (p.plan_source != "given" || p.plan.gpu.empty() || p.plan.gpu == p.gpu->name) return v.error();
          return make_error(v.error().code,
                            fmt::format("{}. The plan was made for {}; this run tiles for {}: make a plan for it "
                                        "(gpusim plan MODEL --gpu {} --out plan.json)",
                                        v.error().message, p.plan.gpu, p.gpu->name, p.gpu->name));
        }
        auto pr = predict_plan(g0, p.plan, *p.gpu);
        if (!pr) return pr.error();
        p.pred = std::move(*pr);
        // Where `gpusim predict` prices another plan than the one that runs, say by how much, so the
        // two commands' figures can be reconciled.
        std::optional<Prediction> other;
        std::string what;
        if (p.plan_source == "given" && regenerated > 0) {
          if (auto o = predict_plan(g0, as_given, *p.gpu)) other = std::move(*o);
          what = "`gpusim predict --plan` prices the plan's own tiles";
        } else if (p.plan_source == "eager") {
          if (auto o = gpusim::predict(g0, Session::target_maker()(*p.gpu, TileSpace::kGenerated),
                                       PredictOptions(dtype, std::nullopt))) {
            other = std::move(*o);
          }
          what = "`gpusim predict` prices the eager plan with the tiles codegen builds within the profile's limits; "
                 "this run's within the device's";
        }
        if (other) {
          p.predict_kernels_us = other->kernels_us;
          p.predict_differs = what;
        }
      }
    }
    for (TensorId id : p.g.inputs) p.inputs.push_back(info_of(p.g, id));
    for (TensorId id : p.g.outputs) p.outputs.push_back(info_of(p.g, id));
    return Program(std::move(impl));
  });
}

Result<TuneReport> Program::tune(const TuneOptions& opts) noexcept {
  return guarded("tune", [&]() -> Result<TuneReport> {
    Impl& p = *impl_;
    std::lock_guard<std::mutex> lock(p.mu);
    backend::Backend* dev = p.exec->device();
    if (!dev) {
      return make_error(ErrorCode::kInvalidArgument, "tune: the cpu backend is the reference and has nothing to tune; "
                                                     "compile for a device backend (vulkan, cuda or hip)");
    }
    if (!p.gpu) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("tune: no profile to rank candidates with: none matches device \"{}\"; give one "
                                    "(`gpu NAME`) or make one with `gpusim calibrate`",
                                    dev->info().name));
    }
    std::optional<MeasurementStore> store;
    std::string store_note;
    std::string store_path = opts.store.empty() ? default_tuning_store() : opts.store;
    if (store_path == "off") store_path.clear();
    if (!store_path.empty()) {
      const std::filesystem::path dir = std::filesystem::path(store_path).parent_path();
      std::error_code ec;
      if (!dir.empty()) std::filesystem::create_directories(dir, ec);
      // The default store is a cache: a damaged one is set aside and started anew. A store the
      // user named holds their measurements: a damaged one is an error (`tune --clear` sets it aside).
      auto s = opts.store.empty() ? MeasurementStore::open_cache(store_path, &store_note) : MeasurementStore::open(store_path);
      if (!s) return s.error();
      if (!opts.store.empty()) {
        if (auto ok = s->check_integrity(); !ok) {
          return make_error(ok.error().code, ok.error().message + "; or set it aside with `gpusim tune --clear --store " +
                                                 store_path + "`");
        }
      }
      store = std::move(*s);
    }
    tune::Options o;
    o.top_k = opts.top_k;
    o.budget_s = opts.budget_s;
    o.fp16_storage = p.opts.dtype == DType::kFloat16;
    o.matrix = p.matrix();
    o.allow_tf32 = p.opts.allow_tf32;
    o.store = store ? &*store : nullptr;
    o.use_cache = opts.use_cache;
    o.command = opts.command.empty() ? fmt::format("gpusim tune {}", p.model) : opts.command;
    if (opts.progress) {
      o.progress = [&](int done, int total, int measured) {
        opts.progress(Progress{"tune", "kernels", measured, 0, done, total});
      };
    }
    Plan tuned = p.plan;
    auto r = tune::tune_plan(*dev, p.g, tuned, make_device(*p.gpu), o);
    if (!r) return r.error();
    // Predictions follow the tuned plan.
    auto pr = predict_plan(p.g, tuned, *p.gpu);  // p.g is already in the plan's dtype
    if (!pr) return pr.error();
    p.plan = std::move(tuned);
    p.pred = std::move(*pr);
    if (!p.plan_source.ends_with(", tuned")) p.plan_source += ", tuned";
    r->model = p.model;
    r->backend = p.opts.backend;
    r->device_name = dev->info().name;
    r->driver = dev->info().driver;
    r->gpu = p.gpu->name;
    r->store = store_path;
    if (!store_note.empty()) r->notes.insert(r->notes.begin(), store_note);
    return std::move(*r);
  });
}

}  // namespace gpusim
