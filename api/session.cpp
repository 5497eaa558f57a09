// The Session API (include/gpusim/gpusim.h): models, GPUs, prediction, search and the store. The
// compiled-plan half (Program) is in program.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "base/files.h"
#include "base/hash.h"
#include "codegen.h"
#include "compile_report.h"
#include "compiled_figures.h"
#include "gpusim/gpusim.h"
#include "gpusim/onnx_import.h"
#include "gpusim/data_dirs.h"
#include "gpusim/host.h"
#include "gpusim/runtime.h"
#include "guard.h"
#include "model_state.h"

namespace gpusim {

using api::guarded;

const char* version() { return GPUSIM_VERSION; }

const Graph& Model::graph() const { return state_->graph; }
const std::string& Model::source() const { return state_->source; }
const std::string& Model::content_hash() const {
  const State& st = *state_;
  std::call_once(st.hash_once, [&st] {
    if (st.from_bytes) {
      st.hash = gpusim::content_hash(st.bytes);
      return;
    }
    std::ifstream f(st.source, std::ios::binary);
    st.hash = gpusim::content_hash(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
  });
  return st.hash;
}
int64_t Model::size_bytes() const { return state_->size_bytes; }

// 128-bit FNV-1a (two 64-bit lanes with different offsets), hex: an id, not a security measure.
std::string content_hash(std::string_view bytes) {
  base::ContentDigest d;
  d.add(bytes);
  return d.hex();
}

namespace {

Result<ImportOptions> import_options(const ModelOptions& o) {
  ImportOptions io;
  for (const std::string& d : o.dims) {
    auto kv = parse_dim_override(d);
    if (!kv) return kv.error();
    io.dims[kv->first] = kv->second;
  }
  if (o.batch && *o.batch < 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`batch` {} is not a batch size; give 1 or more", *o.batch));
  }
  io.batch = o.batch;
  io.max_nodes = o.max_nodes;
  io.admit = o.admit;
  return io;
}

Error invalid_model_handle(const char* call) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: the Model is empty; open one with Session::open_model first", call));
}

}  // namespace

Session::Session(SessionOptions opts) : profile_dirs_(std::move(opts.profile_dirs)), runtime_dirs_(std::move(opts.runtime_dirs)) {
  for (std::string& d : default_profile_dirs()) profile_dirs_.push_back(std::move(d));
  for (std::string& d : default_runtime_dirs()) runtime_dirs_.push_back(std::move(d));
}

Result<Model> Session::open_model(const std::string& path, const ModelOptions& opts) const noexcept {
  return guarded("open_model", [&]() -> Result<Model> {
    auto io = import_options(opts);
    if (!io) return io.error();
    auto g = import_onnx(path, *io);
    if (!g) return g.error();
    auto st = std::make_shared<Model::State>();
    st->graph = std::move(*g);
    st->source = path;
    st->dims = opts.dims;
    st->max_nodes = opts.max_nodes;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    st->size_bytes = ec ? 0 : static_cast<int64_t>(size);
    Model m;
    m.state_ = std::move(st);
    return m;
  });
}

Result<Model> Session::open_model_bytes(std::string bytes, const std::string& name, const ModelOptions& opts) const noexcept {
  return guarded("open_model_bytes", [&]() -> Result<Model> {
    auto io = import_options(opts);
    if (!io) return io.error();
    auto g = import_onnx_bytes(bytes, name, *io);
    if (!g) return g.error();
    auto st = std::make_shared<Model::State>();
    st->graph = std::move(*g);
    st->source = name;
    st->dims = opts.dims;
    st->max_nodes = opts.max_nodes;
    st->size_bytes = static_cast<int64_t>(bytes.size());
    st->bytes = std::move(bytes);
    st->from_bytes = true;
    Model m;
    m.state_ = std::move(st);
    return m;
  });
}

Result<Model> Session::at_batch(const Model& m, int64_t batch) const noexcept {
  if (!m.valid()) return invalid_model_handle("at_batch");
  ModelOptions o;
  o.dims = m.state_->dims;
  o.max_nodes = m.state_->max_nodes;
  o.batch = batch;
  if (m.state_->from_bytes) return open_model_bytes(m.state_->bytes, m.state_->source, o);
  return open_model(m.state_->source, o);
}

Result<GpuProfile> Session::gpu(const std::string& id_or_path) const noexcept {
  return guarded("gpu", [&]() -> Result<GpuProfile> { return find_profile(id_or_path, profile_dirs_); });
}

Result<GpuProfile> Session::gpu_from_yaml(const std::string& yaml_text, const std::string& source) const noexcept {
  return guarded("gpu_from_yaml", [&]() -> Result<GpuProfile> { return load_profile_yaml(yaml_text, source, profile_dirs_); });
}

std::vector<std::pair<ProfileEntry, Result<GpuProfile>>> Session::profiles() const noexcept {
  std::vector<std::pair<ProfileEntry, Result<GpuProfile>>> out;
  try {
    for (const ProfileEntry& e : list_profiles(profile_dirs_)) {
      // One bad file never ends the listing: its error stands in its row.
      out.emplace_back(e, guarded("profiles", [&]() -> Result<GpuProfile> { return find_profile(e.path, profile_dirs_); }));
    }
  } catch (...) {
    // The directory walk itself failed (a directory removed meanwhile): what was listed stands.
  }
  return out;
}

namespace {

// Host profiles: $GPUSIM_HOST_PATH first, then each runtime directory's hosts/ (the session's own,
// then the installed runtimes/hosts), then the user's (host.h).
std::vector<std::string> host_dirs(const std::vector<std::string>& runtime_dirs) {
  std::vector<std::string> dirs;
  auto add = [&](std::string d) {
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(std::move(d));
  };
  for (std::string& d : env_dirs("GPUSIM_HOST_PATH")) add(std::move(d));
  for (const std::string& d : runtime_dirs) add(d + "/hosts");
  for (std::string& d : default_host_dirs()) add(std::move(d));
  return dirs;
}

// `rt` on the host `host` names (unchanged when it names none).
Result<RuntimeModel> runtime_on_host(RuntimeModel rt, const std::string& host, const std::vector<std::string>& runtime_dirs) {
  if (host.empty()) return rt;
  const auto dirs = host_dirs(runtime_dirs);
  auto h = find_host(host, dirs);
  if (!h) return h.error();  // it names the option
  auto model = load_host_model(dirs);
  if (!model) return model.error();
  return on_host(std::move(rt), *h, *model);
}

// The request's runtime on its host: none when it names neither (gpusim's executor), gpusim's own
// when it names a host alone (which then says it changes nothing).
Result<std::optional<RuntimeModel>> request_runtime(const PredictRequest& req, const std::vector<std::string>& runtime_dirs) {
  if (req.runtime.empty() && req.host.empty()) return std::optional<RuntimeModel>();
  auto r = find_runtime(req.runtime.empty() ? "gpusim" : req.runtime, runtime_dirs);
  if (!r) return make_error(r.error().code, "runtime: " + r.error().message);
  auto on = runtime_on_host(std::move(*r), req.host, runtime_dirs);
  if (!on) return on.error();
  return std::optional<RuntimeModel>(std::move(*on));
}

Result<Prediction> predict_impl(const Graph& g, const Target& target, const PredictRequest& req,
                                const std::vector<std::string>& runtime_dirs) {
  const GpuProfile& gpu = target.gpu();
  auto rt = request_runtime(req, runtime_dirs);
  if (!rt) return rt.error();
  std::optional<RuntimeModel> runtime = std::move(*rt);
  if (!req.plan) {
    PredictOptions po(req.dtype, runtime);
    po.lowering = req.lowering;
    po.host_copies = req.host_copies;
    return predict(g, target, po);
  }
  Plan plan = *req.plan;
  // What differs from what the plan was made for is priced as asked, and said.
  std::vector<std::string> notes;
  if (!plan.gpu.empty() && plan.gpu != gpu.name) {
    notes.push_back(fmt::format("the plan was made for {}, not {}: its fusions and tiles were chosen for that GPU "
                                "(a plan search with `gpu {}` makes one for this one)",
                                plan.gpu, gpu.name, gpu.name));
  }
  if (req.dtype && *req.dtype != plan.dtype.value_or(*req.dtype)) {
    notes.push_back(fmt::format("`dtype {}` overrides the plan's {}: its tiles were chosen for {}",
                                dtype_name(*req.dtype), dtype_name(*plan.dtype), dtype_name(*plan.dtype)));
  }
  for (TensorId t : g.inputs) {
    const Tensor& in = g.tensor(t);
    const auto it = plan.inputs.find(in.name);
    if (it != plan.inputs.end() && it->second != in.shape) {
      notes.push_back(fmt::format("input \"{}\" is {} here but {} in the plan (another `dims`): its tiles were chosen "
                                  "for those shapes",
                                  in.name, shape_str(in.shape), shape_str(it->second)));
    }
  }
  if (req.dtype) plan.dtype = req.dtype;
  plan.allow_tf32 = plan.allow_tf32 || target.device.allow_tf32;  // the plan's, or the target's TF32
  // The structure here; predict_plan prices each kernel once and says when a tile cannot run.
  if (auto v = validate_plan(plan, plan.dtype ? retype(g, *plan.dtype) : g, make_device(gpu), PlanCheck::kStructure); !v) {
    return v.error();
  }
  PredictOptions po(std::nullopt, runtime);
  po.host_copies = req.host_copies;
  auto p = predict_plan(g, plan, gpu, po);
  if (p) p->notes.insert(p->notes.begin(), notes.begin(), notes.end());
  return p;
}

}  // namespace

namespace {

// Session::target's: the library menu, or codegen's answer for the profile's threads, shared
// memory and matrix path (the float storage follows each kernel's type), with the compiled
// figures `gpusim codegen report` stored for the profile's architecture when `with_figures`.
Target make_session_target(const GpuProfile& gpu, TileSpace tiles, const TargetOptions& opts, bool with_figures) {
  if (tiles == TileSpace::kLibrary) return library_target(gpu, opts);
  Target t = make_target(gpu, nullptr, TileSpace::kGenerated);
  t.device.allow_tf32 = opts.allow_tf32;  // codegen builds fp32 GEMMs as TF32 where it can
  std::shared_ptr<const codegen::CompiledFigureTable> figures;
  const std::string vendor = codegen::profile_vendor(gpu);
  if (with_figures && (vendor == "amd" || vendor == "nvidia")) {
    if (auto arch = vendor == "amd" ? exec::hip_arch_of(gpu) : exec::cuda_arch_of(gpu)) {
      figures = codegen::load_compiled_figures(*arch);
    }
  }
  t.tiles = std::make_shared<codegen::TargetCapability>(codegen::target_options(t.device, false), std::move(figures));
  return t;
}

}  // namespace

Target Session::target(const GpuProfile& gpu, TileSpace tiles) const noexcept { return target(gpu, tiles, {}); }

Target Session::target(const GpuProfile& gpu, TileSpace tiles, const TargetOptions& opts) const noexcept {
  return make_session_target(gpu, tiles, opts, true);
}

TargetMaker Session::target_maker() {
  // Without compiled figures: a Dojo dataset is the same bytes on every machine, whatever its
  // kernel cache holds.
  return [](const GpuProfile& gpu, TileSpace tiles) -> Target { return make_session_target(gpu, tiles, {}, false); };
}

Result<TileSpace> Session::runtime_tiles(const std::string& runtime) const noexcept {
  return guarded("runtime_tiles", [&]() -> Result<TileSpace> {
    if (runtime.empty()) return TileSpace::kGenerated;
    auto r = find_runtime(runtime, runtime_dirs_);
    if (!r) return make_error(r.error().code, "runtime: " + r.error().message);
    return runtime_tile_space(*r);
  });
}

Result<LlmSpec> Session::llm(const std::string& name_or_path) const noexcept {
  return guarded("llm", [&]() -> Result<LlmSpec> { return find_llm_spec(name_or_path, default_llm_dirs()); });
}

Result<LlmSpec> Session::llm_from_text(const std::string& text, const std::string& source) const noexcept {
  return guarded("llm_from_text", [&]() -> Result<LlmSpec> { return parse_llm_spec(text, source); });
}

Result<GenerationPrediction> Session::generate(const LlmSpec& spec, const Target& target, GenerationOptions opts) const noexcept {
  return guarded("generate", [&]() -> Result<GenerationPrediction> {
    if (!opts.runtime && !opts.kernel_gap_us) {
      auto backend = opts.backend.empty() ? Result<std::string>(default_llm_backend(target.gpu())) : llm_backend(opts.backend);
      if (!backend) return backend.error();
      if (auto rt = find_runtime(llm_runtime_name(*backend), runtime_dirs_)) opts.runtime = std::move(*rt);
    }
    if (!opts.host.empty()) {
      if (!opts.runtime) {
        return make_error(ErrorCode::kInvalidArgument,
                          "`host`: there are no runtime figures for a host to scale (a fixed kernel gap, or no runtime file for the backend)");
      }
      auto on = runtime_on_host(std::move(*opts.runtime), opts.host, runtime_dirs_);
      if (!on) return on.error();
      opts.runtime = std::move(*on);
    }
    return predict_generation(spec, target, opts);
  });
}

namespace {

// The profiles a compare names, every one loaded before any prediction so that a bad name fails
// first; none is an error.
Result<std::vector<GpuProfile>> compared_profiles(const std::vector<std::string>& gpus,
                                                  const std::vector<std::string>& profile_dirs) {
  if (gpus.empty()) return make_error(ErrorCode::kInvalidArgument, "compare: no GPUs given; name at least one profile");
  std::vector<GpuProfile> profiles;
  for (const std::string& name : gpus) {
    check_cancelled();  // each load reads a directory and a file: a long list is minutes
    auto p = find_profile(name, profile_dirs);
    if (!p) return p.error();
    profiles.push_back(std::move(*p));
  }
  return profiles;
}

// The options every pass of a decoder's generation is predicted with: the request's dtype, runtime
// and lowering, and no host copies (a runtime binds each step's present keys and values to the next
// step's past on the device, and a token's ids are bytes). A plan is refused: the passes differ in
// shape.
Result<PredictOptions> decoder_pass_options(const PredictRequest& req, const std::vector<std::string>& runtime_dirs) {
  if (req.plan) {
    return make_error(ErrorCode::kInvalidArgument,
                      "plan: a generation's passes differ in shape (the prompt's, then one token's over a growing "
                      "cache); one plan cannot price them all");
  }
  PredictOptions po(req.dtype);
  auto rt = request_runtime(req, runtime_dirs);
  if (!rt) return rt.error();
  po.runtime = std::move(*rt);
  po.lowering = req.lowering;
  po.host_copies = false;
  return po;
}

}  // namespace

Result<GenerationPrediction> Session::generate_decoder(const std::string& onnx_path, const Target& target,
                                                       const GenerationOptions& opts, const PredictRequest& req) const noexcept {
  return guarded("generate_decoder", [&]() -> Result<GenerationPrediction> {
    auto po = decoder_pass_options(req, runtime_dirs_);
    if (!po) return po.error();
    return predict_decoder_generation(onnx_path, target, opts, *po);
  });
}

Result<GenerationPrediction> Session::generate_decoder_bytes(std::string_view bytes, const std::string& name,
                                                             const Target& target, const GenerationOptions& opts,
                                                             const PredictRequest& req) const noexcept {
  return guarded("generate_decoder", [&]() -> Result<GenerationPrediction> {
    auto po = decoder_pass_options(req, runtime_dirs_);
    if (!po) return po.error();
    return predict_decoder_generation_bytes(bytes, name, target, opts, *po);
  });
}

namespace {

// Every profile of `gpus` loaded (compared_profiles), then `one` on each.
Result<std::vector<GenerationPrediction>> each_gpu(
    const std::vector<std::string>& gpus, const std::vector<std::string>& profile_dirs,
    const std::function<Result<GenerationPrediction>(const GpuProfile&)>& one) {
  auto profiles = compared_profiles(gpus, profile_dirs);
  if (!profiles) return profiles.error();
  std::vector<GenerationPrediction> rows;
  for (const GpuProfile& g : *profiles) {
    check_cancelled();  // a service's request past its time limit stops between GPUs
    auto r = one(g);
    if (!r) return make_error(r.error().code, fmt::format("{}: {}", g.name, r.error().message));
    rows.push_back(std::move(*r));
  }
  return rows;
}

}  // namespace

Result<std::vector<GenerationPrediction>> Session::compare_generation(const LlmSpec& spec, const std::vector<std::string>& gpus,
                                                                      const GenerationOptions& opts) const noexcept {
  return guarded("compare_generation", [&]() -> Result<std::vector<GenerationPrediction>> {
    return each_gpu(gpus, profile_dirs_,
                    [&](const GpuProfile& g) { return generate(spec, target(g, TileSpace::kLibrary), opts); });
  });
}

Result<std::vector<GenerationPrediction>> Session::compare_decoder_generation(const std::string& onnx_path,
                                                                              const std::vector<std::string>& gpus,
                                                                              TileSpace tiles, const GenerationOptions& opts,
                                                                              const PredictRequest& req,
                                                                              const TargetOptions& target_opts) const noexcept {
  return guarded("compare_decoder_generation", [&]() -> Result<std::vector<GenerationPrediction>> {
    auto po = decoder_pass_options(req, runtime_dirs_);
    if (!po) return po.error();
    return each_gpu(gpus, profile_dirs_, [&](const GpuProfile& g) {
      return predict_decoder_generation(onnx_path, target(g, tiles, target_opts), opts, *po);
    });
  });
}

Result<Prediction> Session::predict(const Model& m, const Target& target, const PredictRequest& req) const noexcept {
  return guarded("predict", [&]() -> Result<Prediction> {
    if (!m.valid()) return invalid_model_handle("predict");
    return predict_impl(m.graph(), target, req, runtime_dirs_);
  });
}

Result<std::vector<ComparedGpu>> Session::compare(const Model& m, const std::vector<std::string>& gpus, TileSpace tiles,
                                                  const PredictRequest& req, const TargetOptions& target_opts) const noexcept {
  return guarded("compare", [&]() -> Result<std::vector<ComparedGpu>> {
    if (!m.valid()) return invalid_model_handle("compare");
    auto profiles = compared_profiles(gpus, profile_dirs_);
    if (!profiles) return profiles.error();
    std::vector<ComparedGpu> rows;
    for (GpuProfile& p : *profiles) rows.push_back({std::move(p), {}});
    for (ComparedGpu& r : rows) {
      check_cancelled();
      auto p = predict_impl(m.graph(), target(r.gpu, tiles, target_opts), req, runtime_dirs_);
      if (!p) return p.error();
      r.prediction = std::move(*p);
    }
    return rows;
  });
}

namespace {

// What sets a prediction's time, in a sentence, and whether the host or the device bounds it.
std::pair<std::string, std::string> time_setter(const Prediction& p) {
  const size_t n = p.kernels.size();
  if (p.total_us > 0 && p.launch_bound_us > 0.5 * p.total_us) {
    return {"host", fmt::format("host-bound: the GPU waits {:.3f} ms of {:.3f} ms for launches ({} kernel launches, "
                                "{:.1f} us of host time each); the kernels take {:.3f} ms",
                                p.launch_bound_us / 1e3, p.total_us / 1e3, n, n > 0 ? p.host_us / static_cast<double>(n) : 0.0,
                                p.kernels_us / 1e3)};
  }
  std::map<std::string, double> by_class;
  for (const PlannedKernel& k : p.kernels) by_class[std::string(op_class_name(k.work.cls))] += k.cost.total_us;
  std::string top;
  double top_us = -1;
  for (const auto& [c, us] : by_class) {
    if (us > top_us) top = c, top_us = us;
  }
  return {"device", fmt::format("device-bound: {} kernels take {:.3f} ms ({} kernels {:.0f}% of it); the GPU waits "
                                "{:.3f} ms for launches",
                                n, p.kernels_us / 1e3, top.empty() ? "no" : top,
                                p.kernels_us > 0 ? 100 * top_us / p.kernels_us : 0.0, p.launch_bound_us / 1e3)};
}

}  // namespace

Result<RuntimeComparison> Session::compare_runtimes(const Model& m, const GpuProfile& gpu,
                                                    const RuntimeComparisonOptions& opts, const PredictRequest& req,
                                                    const TargetOptions& target_opts) const noexcept {
  return guarded("compare_runtimes", [&]() -> Result<RuntimeComparison> {
    if (!m.valid()) return invalid_model_handle("compare_runtimes");
    constexpr size_t kMaxRuntimes = 64;
    std::vector<std::string> names;
    for (const std::string& n : opts.runtimes) {
      if (n.empty()) continue;
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    const bool all = names.empty() || (names.size() == 1 && names[0] == "all");
    if (!all && std::find(names.begin(), names.end(), "all") != names.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`runtimes` {}: \"all\" stands alone (every runtime that runs graphs); give it "
                                    "alone or name the runtimes",
                                    fmt::join(names, ",")));
    }
    if (names.size() > kMaxRuntimes) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`runtimes`: {} names, more than {}; name fewer", names.size(), kMaxRuntimes));
    }
    if (all) {
      names = list_runtimes(runtime_dirs_);
      names.push_back("gpusim-plan");
    }
    const Graph& g = m.graph();
    int64_t batch = 1;
    if (!g.inputs.empty() && !g.tensor(g.inputs.front()).shape.empty()) {
      batch = std::max<int64_t>(1, g.tensor(g.inputs.front()).shape.front());
    }
    const bool lowering_asked = !req.lowering.skip.empty() || req.lowering.autocast || req.lowering.layout != "nchw";
    RuntimeComparison out;
    out.model = m.source();
    out.gpu = gpu.name;
    for (const std::string& name : names) {
      check_cancelled();
      ComparedRuntime row;
      row.runtime = name;
      row.batch = batch;
      PredictRequest r = req;
      r.plan.reset();
      bool has_lowering = false;
      if (name == "gpusim-plan") {
        // gpusim's best plan (greedy fusion over the generated tiles), priced as its executor runs it.
        row.tiles = TileSpace::kGenerated;
        SearchOptions so;
        so.dtype = req.dtype;
        auto found = search(g, target(gpu, TileSpace::kGenerated, target_opts), so);
        if (!found) {
          if (all) {
            out.skipped.emplace_back(name, found.error().message);
            continue;
          }
          return make_error(found.error().code, "gpusim-plan: " + found.error().message);
        }
        r.runtime = "gpusim";
        r.plan = found->plans.front().plan;
      } else {
        auto rt = find_runtime(name, runtime_dirs_);
        if (!rt) return make_error(rt.error().code, "runtime: " + rt.error().message);
        if (rt->workload != "graphs") {
          const std::string why = fmt::format("runs {} (a described model's generations), not ONNX graphs", rt->workload);
          if (all) {
            out.skipped.emplace_back(name, why);
            continue;
          }
          return make_error(ErrorCode::kInvalidArgument,
                            fmt::format("runtime \"{}\" {}; compare generations on several GPUs instead, or name "
                                        "runtimes that run graphs",
                                        name, why));
        }
        has_lowering = !rt->lowering.empty();
        row.tiles = runtime_tile_space(*rt);
        r.runtime = name;
      }
      if (!has_lowering) r.lowering = {};
      auto p = predict_impl(g, target(gpu, row.tiles, target_opts), r, runtime_dirs_);
      if (!p) {
        if (all) {
          out.skipped.emplace_back(name, p.error().message);
          continue;
        }
        return make_error(p.error().code, fmt::format("runtime \"{}\": {}", name, p.error().message));
      }
      row.prediction = std::move(*p);
      if (name == "gpusim-plan") row.prediction.runtime = "gpusim-plan";
      if (row.tiles == TileSpace::kGenerated) {
        row.prediction.notes.push_back(
            "gpusim's own generated kernels are priced here, and that price is not yet checked against their runs: "
            "on an H200 (bench/gpu/h200-2026-11-27) its matrix-unit GEMMs and convolutions ran 5-6x slower than "
            "cuBLAS and cuDNN, and the cost model priced them about 20x too fast; rank it against the library runtimes "
            "with that in mind");
      }
      if (lowering_asked && !has_lowering) {
        row.prediction.notes.push_back(fmt::format("layout, autocast and skip_patterns apply to runtimes with lowering "
                                                   "rules; {} has none, so they do not apply to it",
                                                   name));
      }
      row.items_per_s = row.prediction.total_us > 0 ? static_cast<double>(batch) / (row.prediction.total_us * 1e-6) : 0;
      std::tie(row.bound, row.why) = time_setter(row.prediction);
      out.rows.push_back(std::move(row));
    }
    if (out.rows.empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: no runtime can run this model ({})", m.source(),
                                    out.skipped.empty() ? std::string("none found") : out.skipped.front().second));
    }
    std::stable_sort(out.rows.begin(), out.rows.end(), [](const ComparedRuntime& a, const ComparedRuntime& b) {
      return a.prediction.total_us < b.prediction.total_us;
    });
    if (out.rows.size() > 1) {
      const Prediction& w = out.rows[0].prediction;
      const Prediction& n = out.rows[1].prediction;
      const double dk = n.kernels_us - w.kernels_us, dl = n.launch_bound_us - w.launch_bound_us;
      const std::string reason =
          dl > dk ? fmt::format("{} waits {:.3f} ms for the host's launches, {} {:.3f} ms", out.rows[1].runtime,
                                n.launch_bound_us / 1e3, out.rows[0].runtime, w.launch_bound_us / 1e3)
                  : fmt::format("its {} kernels take {:.3f} ms of GPU time, {}'s {} kernels {:.3f} ms", w.kernels.size(),
                                w.kernels_us / 1e3, out.rows[1].runtime, n.kernels.size(), n.kernels_us / 1e3);
      out.verdict = fmt::format("{} is fastest, {:.2f}x as fast as {}: {}", out.rows[0].runtime,
                                w.total_us > 0 ? n.total_us / w.total_us : 1.0, out.rows[1].runtime, reason);
    }
    return out;
  });
}

Result<SearchResult> Session::plan(const Model& m, const Target& target, const SearchOptions& opts) const noexcept {
  return guarded("plan", [&]() -> Result<SearchResult> {
    if (!m.valid()) return invalid_model_handle("plan");
    auto r = search(m.graph(), target, opts);
    if (!r) return r.error();
    if (r->plans.empty()) return make_error(ErrorCode::kInvalidArgument, "plan: the search produced no plan");
    return r;
  });
}

Result<Plan> Session::load_plan(const Model& m, const std::string& json_text, const std::string& source) const noexcept {
  return guarded("load_plan", [&]() -> Result<Plan> {
    if (!m.valid()) return invalid_model_handle("load_plan");
    return plan_from_json(json_text, source, m.graph());
  });
}

Result<Plan> Session::load_plan_file(const Model& m, const std::string& path) const noexcept {
  return guarded("load_plan_file", [&]() -> Result<Plan> {
    auto text = base::read_regular_file(path, int64_t{256} << 20, "the plan");
    if (!text) return text.error();
    return load_plan(m, *text, path);
  });
}

Result<std::string> read_user_file(const std::string& path, int64_t max_bytes, const std::string& what) noexcept {
  try {
    return base::read_regular_file(path, max_bytes, what);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read {} ({})", path, what, e.what()));
  }
}

std::vector<Measurement> Session::measurements(const RunReport& r) const noexcept {
  try {
    if (r.backend == "cpu") return {};  // the reference times nodes on the host: not kernel truth
    auto recs = parse_run_json(run_document(r), r.model);
    return recs ? std::move(*recs) : std::vector<Measurement>{};
  } catch (...) {
    return {};
  }
}

Result<InsertStats> Session::record(const std::string& store_path, const std::vector<Measurement>& records,
                                    const std::string& command) const noexcept {
  return guarded("record", [&]() -> Result<InsertStats> {
    auto store = MeasurementStore::open(store_path);
    if (!store) return store.error();
    return store->insert(records, command);
  });
}

Result<Validation> Session::validate(const std::string& truth_path, ValidateOptions opts) const noexcept {
  return guarded("validate", [&]() -> Result<Validation> {
    auto recs = read_measurements(truth_path);
    if (!recs) return recs.error();
    for (const std::string& d : profile_dirs_) opts.profile_dirs.push_back(d);
    auto rep = gpusim::validate(*recs, opts);
    if (!rep) return rep.error();
    return Validation{std::move(*recs), std::move(*rep)};
  });
}

}  // namespace gpusim
