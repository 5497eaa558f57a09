// gpusim predict MODEL --gpu NAME|FILE [--dtype fp32|fp16|bf16] [--dim k=v]... [--runtime NAME|FILE] [--json]
//                [--trace out.json]
// gpusim compare MODEL --gpus a,b,c [--dtype ...] [--dim ...] [--runtime ...] [--json]
// gpusim compare LLM|DECODER.onnx --gpus a,b,c --prompt N --generate M [--weights ...] [--json]
// The eager plan's predicted latency with a per-kernel breakdown (time, share, bound, achieved
// FLOP/s and GB/s), peak memory and energy; JSON schema gpusim.predict/1 (README).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "format.h"
#include "gpusim/gpusim.h"
#include "hw/atomic_file.h"

namespace gpusim::cli {
namespace {

struct Args {
  std::string model;
  std::string gpu;
  std::vector<std::string> gpus;
  std::string dtype;
  std::vector<std::string> dims;
  std::vector<std::string> profile_dirs;
  bool json = false;
  bool all = false;
  std::string trace;
  std::string plan;
  std::string runtime;
  std::string host;
  std::string layout;
  std::string autocast;
  std::vector<std::string> skip;
  bool on_device = false;
  std::string tiles;
  bool allow_tf32 = false;
  // A language model's generation (a gpusim.llm/1 description or a config.json as the model).
  int64_t prompt = -1, generate = -1, batch = 1, ubatch = 512;
  std::string weights;
  std::string backend;
  std::string cuda_prompt;
  bool flash_attn = false;
  // compare --runtimes: the runtimes side by side on one GPU, at these batch sizes.
  std::vector<std::string> runtimes;
  std::vector<int64_t> batches;
  // compare of generations: GPU=USD (to buy) or GPU=USD/h (to rent), for value figures.
  std::vector<std::string> prices;
};

void print_phase(const GenerationPhase& ph, bool all) {
  fmt::print("\n{} ({} tokens, {} pass{}): {:.3f} ms, {:.1f} tokens/s, {} kernels, bound: {}", ph.name, ph.tokens, ph.steps,
             ph.steps == 1 ? "" : "es", ph.time_us / 1e3, ph.tokens_per_s, ph.kernels, ph.bound);
  std::string shares;
  for (const auto& [b, v] : ph.bound_share) shares += fmt::format(" {} {:.0f}%", b, 100 * v);
  fmt::print(" (kernel time:{}; GPU waiting on launches {:.3f} ms)\n", shares, ph.launch_us / 1e3);
  fmt::print("  {:<16} {:<16} {:>5} {:>10} {:>10} {:<8} {:>8} {}\n", "kernel", "op", "count", "us_each", "us_total", "bound",
             "GB/s", "tile");
  const size_t shown = all ? ph.kernels_of_step.size() : std::min<size_t>(ph.kernels_of_step.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    const GenerationKernel& k = ph.kernels_of_step[i];
    const double gbps = k.cost.total_us > 0 ? k.cost.dram_bytes / (k.cost.total_us * 1e3) : 0;
    fmt::print("  {:<16} {:<16} {:>5} {:>10.2f} {:>10.1f} {:<8} {:>8.1f} {}{}\n", k.name, k.op, k.count, k.cost.total_us,
               k.cost.total_us * k.count, bound_name(k.cost.bound), gbps, tile_notation(k.cost.tile),
               k.cost.matrix_units ? " [mma]" : "");
  }
  if (shown < ph.kernels_of_step.size()) fmt::print("  ... {} more (--all lists every one)\n", ph.kernels_of_step.size() - shown);
}

void print_generation(const GenerationPrediction& g, const GpuProfile& gpu, bool all) {
  fmt::print("model     {} ({} weights)\n", g.model, g.weights);
  if (g.backend == "onnx") {  // an ONNX decoder's passes, as predict prices the graph
    fmt::print("gpu       {} ({}), the ONNX graph's kernels, runtime {}\n", gpu.display_name, gpu.name, g.runtime);
  } else {
    fmt::print("gpu       {} ({}), llama.cpp {} backend, runtime {}\n", gpu.display_name, gpu.name, g.backend, g.runtime);
  }
  fmt::print("workload  prompt {} tokens, generate {} tokens, batch {}\n", g.prompt, g.generate, g.batch);
  fmt::print("TTFT      {:.3f} ms (the prompt's pass)\n", g.ttft_us / 1e3);
  if (g.generate > 0) {
    fmt::print("per token {:.3f} ms first, {:.3f} ms last, {:.3f} ms mean ({:.1f} tokens/s generating)\n",
               g.token_first_us / 1e3, g.token_last_us / 1e3, g.token_mean_us / 1e3, g.decode.tokens_per_s);
  }
  fmt::print("total     {:.3f} ms\n", g.total_us / 1e3);
  fmt::print("memory    {} (weights {}, KV cache {}, activations {}) of {:.0f} GB{}\n", bytes_str(static_cast<double>(g.memory_bytes)),
             bytes_str(static_cast<double>(g.weight_bytes)), bytes_str(static_cast<double>(g.kv_cache_bytes)),
             bytes_str(static_cast<double>(g.compute_bytes)), gpu.memory.dram.size_gb, g.fits_in_memory ? "" : "  DOES NOT FIT");
  if (g.prompt > 0) print_phase(g.prefill, all);
  if (g.generate > 0) print_phase(g.decode, all);
  fmt::print("\nplanned in {:.1f} ms\nnotes\n", g.planning_ms);
  for (const auto& n : g.notes) fmt::print("  - {}\n", say(n));
}

// A kernel as the table names it: the runtime pattern or fusion that made it, else its op(s).
std::string kernel_label(const PlannedKernel& k) {
  return k.fusions.empty() ? k.op_type : k.fusions.back();
}

void print_text(const Prediction& p, const GpuProfile& gpu, bool all) {
  double h2d = 0, d2h = 0;
  for (const auto& t : p.transfers) (t.to_device ? h2d : d2h) += t.duration_us;
  fmt::print("model    {}\n", p.model);
  fmt::print("gpu      {} ({}), {}\n", gpu.display_name, gpu.name, dtype_name(p.dtype));
  fmt::print("tiles    {}\n", p.tiles);
  fmt::print("latency  {:.3f} ms  (kernels {:.3f} ms in {} launches; copies in {:.3f} ms, out {:.3f} ms; GPU waiting "
             "on launches {:.3f} ms)\n",
             p.total_us / 1e3, p.kernels_us / 1e3, p.kernels.size(), h2d / 1e3, d2h / 1e3, p.launch_bound_us / 1e3);
  if (p.runtime != "gpusim") fmt::print("runtime  {}: host issuing the op calls {:.3f} ms\n", p.runtime, p.host_us / 1e3);
  fmt::print("memory   peak {} of {:.0f} GB ({} weights){}\n", bytes_str(static_cast<double>(p.peak_memory_bytes)),
             gpu.memory.dram.size_gb, bytes_str(static_cast<double>(p.weight_bytes)),
             p.fits_in_memory ? "" : "  DOES NOT FIT");
  fmt::print("energy   {:.3f} J (average {:.0f} W)\n\n", p.energy_j, p.energy_j / (p.total_us * 1e-6));
  std::vector<const PlannedKernel*> order;
  for (const auto& k : p.kernels) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->cost.total_us > b->cost.total_us; });
  const size_t shown = all ? order.size() : std::min<size_t>(order.size(), 25);
  fmt::print("{:>10} {:>6} {:<8} {:>9} {:>8} {:>7} {:>6} {:>5} {:<22} {:<22} {}\n", "time_us", "share", "bound",
             "TFLOP/s", "GB/s", "CTAs", "waves", "occ", "tile", "op", "node");
  for (size_t i = 0; i < shown; ++i) {
    const PlannedKernel& k = *order[i];
    const KernelCost& c = k.cost;
    fmt::print("{:>10.1f} {:>5.1f}% {:<8} {:>9.2f} {:>8.1f} {:>7} {:>6} {:>5.2f} {:<22} {:<22} {}\n", c.total_us,
               100 * c.total_us / p.kernels_us, bound_name(c.bound), p.achieved_tflops(k), p.achieved_gbps(k), c.ctas,
               c.waves, c.occupancy, tile_notation(c.tile), kernel_label(k) + (c.tf32 ? " [tf32]" : c.matrix_units ? " [mma]" : ""),
               k.name + (k.node_names.size() > 1 ? fmt::format(" +{} more", k.node_names.size() - 1) : ""));
    if (all && k.node_names.size() > 1) {
      for (size_t n = 1; n < k.node_names.size(); ++n) fmt::print("{:>108} {}\n", "", k.node_names[n]);
    }
  }
  if (shown < order.size()) fmt::print("... {} more kernels (--all lists every one)\n", order.size() - shown);
  fmt::print("{}; [mma] = on the matrix units; [tf32] = fp32 on the matrix units as TF32\n", kTileLegend);
  // Time by class and bound.
  std::map<std::string, double> by_class, by_bound;
  for (const auto& k : p.kernels) {
    by_class[std::string(op_class_name(k.work.cls))] += k.cost.total_us;
    by_bound[std::string(bound_name(k.cost.bound))] += k.cost.total_us;
  }
  fmt::print("\nby class ");
  for (const auto& [c, t] : by_class) fmt::print(" {} {:.1f}%", c, 100 * t / p.kernels_us);
  fmt::print("\nby bound ");
  for (const auto& [b, t] : by_bound) fmt::print(" {} {:.1f}%", b, 100 * t / p.kernels_us);
  fmt::print("\n\nnotes\n");
  for (const auto& n : p.notes) fmt::print("  - {}\n", say(n));
}

void add_common(CLI::App* cmd, Args& a, std::string_view schema) {
  cmd->add_option("model", a.model, "The .onnx file (weights are not needed); for predict, also a language model: a gpusim.llm/1 YAML, a config.json or a bundled name (llama-2-7b)")->required();
  cmd->add_option("--dtype", a.dtype, "Re-type the graph's float tensors: fp32, fp16, bf16, or int8 / fp8 (every float tensor in 8 bits, as a W8A8 engine runs it: GEMMs and convolutions on the 8-bit matrix units)");
  cmd->add_option("--dim", a.dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--profiles", a.profile_dirs, "Extra directory of GPU profiles, searched first (repeatable)");
  cmd->add_flag("--json", a.json, fmt::format("Print machine-readable JSON (schema {}, see README)", schema));
  cmd->add_option("--runtime", a.runtime,
                  "What launches the kernels: gpusim (default: gpusim's executor), cuda-graph, pytorch-eager, "
                  "torch-compile (-reduce-overhead, -max-autotune), tensorrt, onnxruntime-cuda, or a runtime YAML "
                  "(runtimes/)");
  cmd->add_option("--host", a.host,
                  "The host that drives the GPU, which scales a framework runtime's per-call host time: a host "
                  "profile (`gpusim profiles hosts` lists them), a YAML file, or key=value pairs: os=linux|windows|macos, "
                  "driver=wddm|tcc|wsl2, single_thread=N (the CPU's Geekbench 6 single-core score), cpu=NAME "
                  "(default: the Linux hosts the runtimes were fitted on)");
  cmd->add_option("--layout", a.layout,
                  "With a lowering runtime: the memory layout of 4-D activations, nchw (default) or nhwc "
                  "(channels_last)");
  cmd->add_option("--autocast", a.autocast,
                  "With a lowering runtime: run under torch.autocast with this type (fp16 or bf16) on the model's own "
                  "(fp32) weights, as the runtime's autocast rules say");
  cmd->add_option("--skip-pattern", a.skip,
                  "With a lowering runtime: its kernel pattern NAME does not apply, the model's code takes another "
                  "path (repeatable; `gpusim inspect --runtime R` lists the patterns)");
  cmd->add_flag("--on-device", a.on_device,
                "Inputs are made on the device and outputs stay there: no host copies (as a benchmark's loop)");
  cmd->add_option("--tiles", a.tiles,
                  "The tile space kernels are priced in: generated (the kernels gpusim's code generator builds, as "
                  "gpusim plan and run use; the default for gpusim's runtimes) or library (the cost model's whole "
                  "menu, as vendor libraries run kernels; the default for framework runtimes)");
  cmd->add_flag("--allow-tf32", a.allow_tf32,
                "fp32 GEMMs and convolutions on the matrix units as TF32 where the GPU has them (PyTorch's "
                "torch.backends.cuda.matmul.allow_tf32; off by default, as there)");
}

// The session, the model, the request (--dtype, --runtime) and the tile space (--tiles, else the
// runtime's); prints the error and sets rc on failure.
bool parse_request(const Args& a, const char* cmd, const Session& s, PredictRequest& req, TileSpace& tiles, int& rc) {
  {
    auto t = a.tiles.empty() ? s.runtime_tiles(a.runtime) : parse_tile_space(a.tiles, "--tiles");
    if (!t) {
      fmt::print(stderr, "gpusim {}: {}{}\n", cmd, a.tiles.empty() ? "--" : "", say(t.error()));
      rc = 2;
      return false;
    }
    tiles = *t;
  }
  if (!a.dtype.empty()) {
    auto d = parse_dtype(a.dtype);
    if (!d) {
      fmt::print(stderr, "gpusim {}: {}\n", cmd, say(d.error()));
      rc = 2;
      return false;
    }
    req.dtype = *d;
  }
  req.runtime = a.runtime;
  req.host = a.host;
  if (!a.layout.empty()) {
    if (auto l = check_layout(a.layout); !l) {
      fmt::print(stderr, "gpusim {}: --layout: {}\n", cmd, say(l.error()));
      rc = 2;
      return false;
    }
    req.lowering.layout = a.layout;
  }
  if (!a.autocast.empty()) {
    auto d = float_dtype_from_name(a.autocast);
    if (!d || *d == DType::kFloat32) {
      fmt::print(stderr, "gpusim {}: --autocast {}: expected fp16 or bf16 (the type torch.autocast computes in)\n",
                 cmd, a.autocast);
      rc = 2;
      return false;
    }
    req.lowering.autocast = *d;
  }
  req.lowering.skip = a.skip;
  req.host_copies = !a.on_device;
  return true;
}

std::optional<Model> load(const Args& a, const char* cmd, const Session& s, PredictRequest& req, TileSpace& tiles,
                          int& rc) {
  if (!parse_request(a, cmd, s, req, tiles, rc)) return std::nullopt;
  auto m = s.open_model(a.model, {a.dims});
  if (!m) {
    fmt::print(stderr, "gpusim {}: {}\n", cmd, say(m.error()));
    rc = exit_code(m.error());
    return std::nullopt;
  }
  return std::move(*m);
}

// A language model: a description file, or a bundled one's name ("llama-2-7b") that is no file.
bool is_description(const Args& a, const Session& session) {
  std::error_code ec;
  return is_llm_spec_file(a.model) || (!std::filesystem::exists(a.model, ec) && session.llm(a.model));
}

void add_generation_options(CLI::App* cmd, Args& a) {
  cmd->add_option("--prompt", a.prompt, "Language models: tokens of the prompt, pushed through before the first token (default 512)");
  cmd->add_option("--generate", a.generate, "Language models: tokens generated one at a time after it (default 128)");
  cmd->add_option("--batch", a.batch, "Language models: sequences generated together (default 1)");
  cmd->add_option("--ubatch", a.ubatch, "Language models: rows of a prompt pass (llama.cpp's n_ubatch, default 512)");
  cmd->add_option("--weights", a.weights,
                  "Language models: how the weights are stored, a llama.cpp file type: F16 (default), Q8_0, Q4_0, Q4_K_M, ...");
  cmd->add_option("--backend", a.backend, "Language models: llama.cpp's backend: cuda, hip, metal or vulkan (default: the GPU vendor's)");
  cmd->add_flag("--flash-attn", a.flash_attn, "Language models: fused attention (llama.cpp's -fa 1)");
  cmd->add_option("--cuda-prompt", a.cuda_prompt,
                  "Language models on cuda/hip: how a prompt's quantized products run, mmq (int8 mul_mat_q, llama.cpp "
                  "since June 2024) or cublas (dequantize to fp16, then cuBLAS: older builds); default as llama.cpp picks");
}

// The generation's tokens and sequences as given (512 and 128 tokens, one sequence by default).
GenerationOptions workload(const Args& a) {
  GenerationOptions o;
  o.prompt = a.prompt >= 0 ? a.prompt : 512;
  o.generate = a.generate >= 0 ? a.generate : 128;
  o.batch = a.batch;
  return o;
}

// A generation as --json or the text report; its error with the exit code (2 for a bad option).
int report_generation(const Args& a, const GpuProfile& gpu, const Result<GenerationPrediction>& g) {
  if (!g) {
    fmt::print(stderr, "gpusim predict: {}: {}\n", a.model, say(g.error()));
    return g.error().code == ErrorCode::kInvalidArgument ? 2 : exit_code(g.error());
  }
  if (a.json) {
    fmt::print("{}\n", generation_json(*g));
  } else {
    print_generation(*g, gpu, a.all);
  }
  return 0;
}

// A description's generation options (--prompt, --generate, --batch, --weights, --backend, ... and
// --runtime): 0, or the exit code after saying why not.
int description_options(const Args& a, const char* cmd, GenerationOptions& o) {
  if (!a.dtype.empty() || !a.plan.empty() || !a.dims.empty() || !a.tiles.empty()) {
    // --tiles too: a generation prices the kernels llama.cpp launches, in their own tiles.
    fmt::print(stderr, "gpusim {}: {}: --dtype, --plan, --dim and --tiles apply to ONNX graphs; a language model "
                       "takes --weights (F16, Q8_0, Q4_0, ...), --prompt and --generate (its kernels are llama.cpp's, "
                       "in their own tiles)\n", cmd, a.model);
    return 2;
  }
  for (const auto& [set, flag] : {std::pair{!a.trace.empty(), "--trace"}, {!a.layout.empty(), "--layout"},
                                  {!a.autocast.empty(), "--autocast"}, {!a.skip.empty(), "--skip-pattern"},
                                  {a.on_device, "--on-device"}}) {
    if (set) {
      fmt::print(stderr,
                 "gpusim {}: {}: {} applies to an ONNX graph's kernels (one pass's timeline, a framework's lowering, "
                 "its host copies); a language model's generation runs llama.cpp's kernels pass after pass: each "
                 "phase's kernels are listed with --all and --json\n",
                 cmd, a.model, flag);
      return 2;
    }
  }
  o = workload(a);
  o.ubatch = a.ubatch;
  if (!a.weights.empty()) o.weights = a.weights;
  o.backend = a.backend;
  o.flash_attention = a.flash_attn;
  o.cuda_prompt = a.cuda_prompt;
  if (!a.runtime.empty()) {
    auto rt = find_runtime(a.runtime, default_runtime_dirs());
    if (!rt) {
      fmt::print(stderr, "gpusim {}: --runtime: {}\n", cmd, say(rt.error()));
      return 2;
    }
    o.runtime = std::move(*rt);
  }
  o.host = a.host;
  return 0;
}

// An ONNX decoder's generation options: llama.cpp's and --dim/--plan refused, then the request and
// the tile space as for the graph (--dtype, --runtime, --tiles). 0, or the exit code.
int decoder_options(const Args& a, const char* cmd, const Session& session, PredictRequest& req, TileSpace& tiles) {
  for (const auto& [set, flag] : {std::pair{!a.plan.empty(), "--plan"}, {!a.dims.empty(), "--dim"},
                                  {a.ubatch != 512, "--ubatch"}, {!a.backend.empty(), "--backend"},
                                  {a.flash_attn, "--flash-attn"}, {!a.cuda_prompt.empty(), "--cuda-prompt"},
                                  {!a.weights.empty(), "--weights"}, {!a.trace.empty(), "--trace"}}) {
    if (set) {
      fmt::print(stderr,
                 "gpusim {}: {}: {} does not apply to an ONNX decoder's generation (its passes are sized from "
                 "--prompt, --generate and --batch and run in the graph's own types, which --dtype re-types; "
                 "--weights, --backend, --ubatch, --flash-attn and --cuda-prompt describe llama.cpp; --trace writes "
                 "one pass's timeline: predict the decoder without --prompt/--generate, its dims set with --dim)\n",
                 cmd, a.model, flag);
      return 2;
    }
  }
  int rc = 0;
  if (!parse_request(a, cmd, session, req, tiles, rc)) return rc;
  return 0;
}

// The first option only a generation takes, set on a graph predicted as one pass ("" when none).
std::string generation_flag(const Args& a) {
  for (const auto& [set, flag] : {std::pair{!a.weights.empty(), "--weights"}, {a.batch != 1, "--batch"},
                                  {a.ubatch != 512, "--ubatch"}, {!a.backend.empty(), "--backend"},
                                  {a.flash_attn, "--flash-attn"}, {!a.cuda_prompt.empty(), "--cuda-prompt"}}) {
    if (set) return flag;
  }
  return "";
}

// Says that a generation's option was given for one pass of a graph; returns 2.
int refuse_generation_flag(const Args& a, const char* cmd, const std::string& flag) {
  if (flag == "--weights") {
    fmt::print(stderr,
               "gpusim {}: {}: --weights is a language model description's (a gpusim.llm/1 YAML such as "
               "models/llm/llama-2-7b.yaml, or a Hugging Face config.json); an ONNX graph's weights are its own "
               "(tools/export_llama_onnx.py --weights q4 writes a 4-bit decoder)\n",
               cmd, a.model);
  } else {
    fmt::print(stderr,
               "gpusim {}: {}: {} applies to a generation: a language model's description, or an ONNX decoder with "
               "a KV cache given --prompt or --generate\n",
               cmd, a.model, flag);
  }
  return 2;
}

// `gpusim predict DESCRIPTION --prompt N --generate M`: a generation, phase by phase.
int predict_llm(const Args& a, const Session& session) {
  auto spec = session.llm(a.model);
  if (!spec) {
    fmt::print(stderr, "gpusim predict: {}\n", say(spec.error()));
    return exit_code(spec.error());
  }
  GenerationOptions o;
  if (int rc = description_options(a, "predict", o); rc != 0) return rc;
  auto gpu = session.gpu(a.gpu);
  if (!gpu) {
    fmt::print(stderr, "gpusim predict: {}\n", say(gpu.error()));
    return 1;
  }
  return report_generation(a, *gpu, session.generate(*spec, session.target(*gpu, TileSpace::kLibrary, {a.allow_tf32}), o));
}

// `gpusim predict DECODER.onnx --prompt N --generate M`: an ONNX decoder with a KV cache, its
// prompt's pass and each token's step predicted as the graph is (--dtype, --runtime, --tiles).
int predict_decoder(const Args& a, const Session& session) {
  PredictRequest req;
  TileSpace tiles = TileSpace::kGenerated;
  if (int rc = decoder_options(a, "predict", session, req, tiles); rc != 0) return rc;
  auto gpu = session.gpu(a.gpu);
  if (!gpu) {
    fmt::print(stderr, "gpusim predict: {}\n", say(gpu.error()));
    return 1;
  }
  return report_generation(a, *gpu, session.generate_decoder(a.model, session.target(*gpu, tiles, {a.allow_tf32}), workload(a), req));
}

// `gpusim compare MODEL --gpus ... --prompt N --generate M`: the generation on each GPU, side by
// side (a description's as llama.cpp runs it, an ONNX decoder's pass by pass).
int compare_generation(const Args& a, const Session& session, const std::vector<std::string>& gpus) {
  Result<std::vector<GenerationPrediction>> rows = std::vector<GenerationPrediction>{};
  if (is_description(a, session)) {
    auto spec = session.llm(a.model);
    if (!spec) {
      fmt::print(stderr, "gpusim compare: {}\n", say(spec.error()));
      return exit_code(spec.error());
    }
    GenerationOptions o;
    if (int rc = description_options(a, "compare", o); rc != 0) return rc;
    rows = session.compare_generation(*spec, gpus, o);
  } else {
    PredictRequest req;
    TileSpace tiles = TileSpace::kGenerated;
    if (int rc = decoder_options(a, "compare", session, req, tiles); rc != 0) return rc;
    rows = session.compare_decoder_generation(a.model, gpus, tiles, workload(a), req, {a.allow_tf32});
  }
  if (!rows) {
    fmt::print(stderr, "gpusim compare: {}: {}\n", a.model, say(rows.error()));
    return rows.error().code == ErrorCode::kInvalidArgument ? 2 : exit_code(rows.error());
  }
  auto priced = gpu_prices(a.prices, *rows);
  if (!priced) {
    fmt::print(stderr, "gpusim compare: --price: {}\n", say(priced.error()));
    return 2;
  }
  const std::map<std::string, GpuPrice>& prices = *priced;
  if (a.json) {
    fmt::print("{}\n", compare_generation_json(a.model, *rows, prices));
    return 0;
  }
  const GenerationPrediction& f = rows->front();
  fmt::print("model {} ({} weights), prompt {} tokens, generate {}, batch {}\n", a.model, f.weights, f.prompt, f.generate,
             f.batch);
  // llama-bench's columns first (ppN and tgN: prompt and generation tokens/s), then the latencies.
  const std::string pp = fmt::format("pp{} t/s", f.prompt), tg = fmt::format("tg{} t/s", f.generate);
  fmt::print("{:<24} {:<8} {:>11} {:>11} {:>9} {:>9} {:>10} {:>9} {:>9} {:<8} {:<8} {:>9}{}\n", "gpu", "backend", pp, tg,
             "ttft_ms", "token_ms", "total_ms", "vs_first", "J/token", "prefill", "decode", "memory",
             prices.empty() ? "" : "  value");
  for (const GenerationPrediction& g : *rows) {
    std::string value;
    if (auto it = prices.find(g.gpu); it != prices.end()) {
      const GpuValue v = gpu_value(g, it->second);
      value = it->second.per_hour ? fmt::format("  ${:.2f} a million tokens (${}/h)", v.usd_per_million_tokens, it->second.usd)
                                  : fmt::format("  {:.2f} t/s per $1000 (${})", v.tokens_per_s_per_kusd, it->second.usd);
    }
    fmt::print("{:<24} {:<8} {:>11.1f} {:>11.1f} {:>9.3f} {:>9.3f} {:>10.1f} {:>8.2f}x {:>9.3f} {:<8} {:<8} {:>9}{}{}\n",
               g.gpu, g.backend, g.prefill.tokens_per_s, g.decode.tokens_per_s, g.ttft_us / 1e3, g.token_mean_us / 1e3,
               g.total_us / 1e3, g.total_us > 0 ? f.total_us / g.total_us : 0.0, g.decode.j_per_token, g.prefill.bound,
               g.generate > 0 ? g.decode.bound : "-", bytes_str(static_cast<double>(g.memory_bytes)), value,
               g.fits_in_memory ? "" : "  (does not fit)");
  }
  fmt::print("t/s: all sequences together (pp: the prompt's passes, tg: generating); J/token: energy a generated token; "
             "prefill and decode: each phase's bound\n");
  return 0;
}

}  // namespace

void add_predict(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("predict", "Predict the latency of a graph on a GPU, kernel by kernel");
  add_common(cmd, *a, "gpusim.predict/1");
  cmd->add_option("--gpu", a->gpu, "GPU profile name (gpusim profiles list) or a .yaml path")->required();
  cmd->add_option("--trace", a->trace, "Write the timeline as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  cmd->add_flag("--all", a->all, "List every kernel, not the 25 slowest");
  cmd->add_option("--plan", a->plan, "Score this plan (JSON from gpusim plan --out) instead of the eager one");
  add_generation_options(cmd, *a);
  cmd->callback([a, &rc] {
    const Session session({a->profile_dirs, {}});
    warn_profile_dirs(session.profile_dirs());
    if (is_description(*a, session)) {
      rc = predict_llm(*a, session);
      return;
    }
    if (a->prompt >= 0 || a->generate >= 0) {  // an ONNX decoder with its KV cache, pass by pass
      rc = predict_decoder(*a, session);
      return;
    }
    if (const std::string flag = generation_flag(*a); !flag.empty()) {
      rc = refuse_generation_flag(*a, "predict", flag);
      return;
    }
    PredictRequest req;
    TileSpace tiles = TileSpace::kGenerated;
    auto m = load(*a, "predict", session, req, tiles, rc);
    if (!m) return;
    auto gpu = session.gpu(a->gpu);
    if (!gpu) {
      fmt::print(stderr, "gpusim predict: {}\n", say(gpu.error()));
      rc = 1;
      return;
    }
    if (!a->plan.empty()) {
      auto plan = session.load_plan_file(*m, a->plan);
      if (!plan) {
        fmt::print(stderr, "gpusim predict: {}\n", say(plan.error()));
        rc = 1;
        return;
      }
      req.plan = std::move(*plan);
    }
    auto p = session.predict(*m, session.target(*gpu, tiles, {a->allow_tf32}), req);
    if (!p) {
      fmt::print(stderr, "gpusim predict: {}\n", say(p.error()));
      rc = exit_code(p.error());
      return;
    }
    if (!a->trace.empty()) {
      std::ofstream f(a->trace, std::ios::trunc);
      f << chrome_trace(*p);
      if (!f) {
        fmt::print(stderr, "gpusim predict: {}: cannot write the trace file\n", a->trace);
        rc = 1;
        return;
      }
    }
    if (a->json) {
      fmt::print("{}\n", prediction_document(*p, *gpu));
    } else {
      print_text(*p, *gpu, a->all);
      if (!a->trace.empty()) fmt::print("\ntrace written to {}\n", a->trace);
    }
    rc = 0;
  });
}

namespace {

// compare --runtimes: the runtimes that run the model on one GPU, ranked at each batch size.
int compare_runtimes(const Args& a, const Session& session) {
  const char* cmd = "compare";
  if (a.runtimes.empty()) {
    fmt::print(stderr, "gpusim compare: --gpu, --batches and --all go with --runtimes (the runtimes to rank on that "
                       "GPU, or all); to compare GPUs, give --gpus\n");
    return 2;
  }
  std::string gpu_name = a.gpu;
  if (gpu_name.empty() && a.gpus.size() == 1) gpu_name = a.gpus.front();
  if (gpu_name.empty() || (!a.gpu.empty() && !a.gpus.empty())) {
    fmt::print(stderr, "gpusim compare: --runtimes compares runtimes on one GPU: give it with --gpu G{}\n",
               a.gpus.size() > 1 ? " (--gpus names several; compare GPUs without --runtimes)" : "");
    return 2;
  }
  if (is_description(a, session) || a.prompt >= 0 || a.generate >= 0) {
    fmt::print(stderr, "gpusim compare: {}: --runtimes ranks the runtimes that run an ONNX graph; a language model's "
                       "generation runs llama.cpp's kernels (compare it across GPUs with --gpus)\n",
               a.model);
    return 2;
  }
  if (const std::string flag = generation_flag(a); !flag.empty()) return refuse_generation_flag(a, cmd, flag);
  for (const auto& [set, flag, why] :
       {std::tuple{!a.runtime.empty(), "--runtime", "--runtimes names the runtimes compared"},
        {!a.tiles.empty(), "--tiles", "each runtime is priced in its own tile space (gpusim and gpusim-plan in the "
                                      "generated one, the others in the library's)"}}) {
    if (set) {
      fmt::print(stderr, "gpusim compare: {} does not apply with --runtimes: {}\n", flag, why);
      return 2;
    }
  }
  PredictRequest req;
  TileSpace tiles = TileSpace::kGenerated;
  if (int rc = 0; !parse_request(a, cmd, session, req, tiles, rc)) return rc;
  auto gpu = session.gpu(gpu_name);
  if (!gpu) {
    fmt::print(stderr, "gpusim compare: --gpu: {}\n", say(gpu.error()));
    return exit_code(gpu.error());
  }
  std::vector<std::optional<int64_t>> batches;
  for (int64_t b : a.batches) batches.emplace_back(b);
  if (batches.empty()) batches.emplace_back(std::nullopt);
  if (batches.size() > 16) {
    fmt::print(stderr, "gpusim compare: --batches: {} sizes, more than 16; give fewer\n", batches.size());
    return 2;
  }
  RuntimeComparisonOptions ro;
  ro.runtimes = a.runtimes;
  std::vector<RuntimeComparison> out;
  for (const std::optional<int64_t>& b : batches) {
    ModelOptions mo;
    mo.dims = a.dims;
    mo.batch = b;
    auto m = session.open_model(a.model, mo);
    if (!m) {
      fmt::print(stderr, "gpusim compare: {}{}\n", b ? fmt::format("--batches {}: ", *b) : "", say(m.error()));
      return exit_code(m.error());
    }
    auto c = session.compare_runtimes(*m, *gpu, ro, req, {a.allow_tf32});
    if (!c) {
      fmt::print(stderr, "gpusim compare: {}\n", say(c.error()));
      return c.error().code == ErrorCode::kInvalidArgument ? 2 : exit_code(c.error());
    }
    out.push_back(std::move(*c));
  }
  if (a.json) {
    fmt::print("{}\n", runtime_comparison_document(a.model, out));
    return 0;
  }
  for (const RuntimeComparison& c : out) {
    fmt::print("{} on {} ({}), batch {}: fastest first\n", a.model, gpu->display_name, gpu->name,
               c.rows.front().batch);
    fmt::print("{:>4}  {:<30} {:>11} {:>11} {:>8} {:>9} {:>9} {:>10} {:<7}\n", "rank", "runtime", "latency_ms", "items/s",
               "kernels", "gpu_ms", "wait_ms", "peak_mem", "bound");
    int rank = 0;
    for (const ComparedRuntime& r : c.rows) {
      const Prediction& p = r.prediction;
      fmt::print("{:>4}  {:<30} {:>11.3f} {:>11.1f} {:>8} {:>9.3f} {:>9.3f} {:>10} {:<7}{}\n", ++rank, r.runtime,
                 p.total_us / 1e3, r.items_per_s, p.kernels.size(), p.kernels_us / 1e3, p.launch_bound_us / 1e3,
                 bytes_str(static_cast<double>(p.peak_memory_bytes)), r.bound, p.fits_in_memory ? "" : " (does not fit)");
    }
    if (!c.verdict.empty()) fmt::print("{}\n", say(c.verdict));
    if (a.all) {
      for (const ComparedRuntime& r : c.rows) {
        fmt::print("  {}: {}\n", r.runtime, r.why);
        for (const std::string& n : r.prediction.notes) fmt::print("    - {}\n", say(n));
      }
    }
    fmt::print("\n");
  }
  if (!out.front().skipped.empty()) {
    fmt::print("not compared:\n");
    for (const auto& [name, why] : out.front().skipped) fmt::print("  {}: {}\n", name, say(why));
  }
  if (!a.all) fmt::print("--all says what sets each runtime's time and its notes\n");
  return 0;
}

}  // namespace

void add_compare(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("compare", "Predict one graph, or a language model's generation, on several GPUs, side by side");
  add_common(cmd, *a, "gpusim.compare/1");
  cmd->add_option("--gpus", a->gpus, "Comma-separated GPU profile names or paths; all: every profile found (as dojo --gpu all)")
      ->delimiter(',');
  cmd->add_option("--gpu", a->gpu, "With --runtimes: the one GPU the runtimes are compared on");
  cmd->add_flag("--all", a->all, "With --runtimes: say what sets each runtime's time, with its prediction's notes");
  cmd->add_option("--runtimes", a->runtimes,
                  "Compare runtimes on one GPU instead of GPUs: comma-separated runtime names (pytorch-eager, "
                  "torch-compile, torch-compile-reduce-overhead, torch-compile-max-autotune, cuda-graph, tensorrt, "
                  "onnxruntime-cuda, gpusim, gpusim-plan: gpusim's best plan) or all (every runtime that runs graphs)")
      ->delimiter(',');
  cmd->add_option("--batches", a->batches,
                  "With --runtimes: the batch sizes to rank them at, comma-separated (every input's leading axis; "
                  "default: the model's own)")
      ->delimiter(',');
  cmd->add_option("--price", a->prices,
                  "Generations: what a compared GPU costs, GPU=USD to buy or GPU=USD/h to rent (repeatable or "
                  "comma-separated): adds tokens/s per $1000, or dollars a million tokens")
      ->delimiter(',');
  add_generation_options(cmd, *a);
  cmd->callback([a, &rc] {
    const Session session({a->profile_dirs, {}});
    warn_profile_dirs(session.profile_dirs());
    if (!a->prices.empty() && !is_description(*a, session) && a->prompt < 0 && a->generate < 0) {
      fmt::print(stderr, "gpusim compare: --price applies to a generation's value (tokens a dollar): give a language "
                         "model, or an ONNX decoder with --prompt or --generate\n");
      rc = 2;
      return;
    }
    if (!a->runtimes.empty() || !a->batches.empty() || !a->gpu.empty() || a->all) {
      rc = compare_runtimes(*a, session);
      return;
    }
    if (a->gpus.empty()) {
      fmt::print(stderr, "gpusim compare: give --gpus (several GPUs side by side) or --gpu G --runtimes LIST (several "
                         "runtimes on one GPU)\n");
      rc = 2;
      return;
    }
    // "a, b" and "a,,b" as typed: names without the spaces around them, empty ones dropped.
    std::vector<std::string> gpus;
    for (const std::string& g : a->gpus) {
      const size_t b = g.find_first_not_of(" \t"), e = g.find_last_not_of(" \t");
      if (b != std::string::npos) gpus.push_back(g.substr(b, e - b + 1));
    }
    if (gpus.size() == 1 && gpus[0] == "all") {  // every profile that loads, calibrated ones included
      gpus.clear();
      for (const auto& [entry, profile] : session.profiles()) {
        if (profile) gpus.push_back(entry.path);
      }
    }
    if (is_description(*a, session) || a->prompt >= 0 || a->generate >= 0) {  // a generation on each GPU
      rc = compare_generation(*a, session, gpus);
      return;
    }
    if (const std::string flag = generation_flag(*a); !flag.empty()) {
      rc = refuse_generation_flag(*a, "compare", flag);
      return;
    }
    PredictRequest req;
    TileSpace tiles = TileSpace::kGenerated;
    auto m = load(*a, "compare", session, req, tiles, rc);
    if (!m) return;
    auto rows = session.compare(*m, gpus, tiles, req, {a->allow_tf32});
    if (!rows) {
      fmt::print(stderr, "gpusim compare: {}\n", say(rows.error()));
      rc = exit_code(rows.error());
      return;
    }
    if (a->json) {
      fmt::print("{}\n", compare_document(a->model, *rows));
      rc = 0;
      return;
    }
    // The bound shares are of kernel time and add up to 100% (compute, DRAM, L2, latency).
    fmt::print("{:<26} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9}\n", "gpu", "latency_ms", "vs_first", "compute%",
               "dram%", "l2%", "latency%", "peak_mem", "energy_J");
    const double first = rows->front().prediction.total_us;
    for (const ComparedGpu& r : *rows) {
      const Prediction& p = r.prediction;
      std::map<Bound, double> bound;
      for (const auto& k : p.kernels) bound[k.cost.bound] += k.cost.total_us;
      auto share = [&](Bound b) { return p.kernels_us > 0 ? 100 * bound[b] / p.kernels_us : 0; };
      fmt::print("{:<26} {:>11.3f} {:>8.2f}x {:>8.1f}% {:>8.1f}% {:>8.1f}% {:>8.1f}% {:>11} {:>9.3f}{}\n", r.gpu.name,
                 p.total_us / 1e3, first / p.total_us, share(Bound::kCompute), share(Bound::kDram), share(Bound::kL2),
                 share(Bound::kLatency), bytes_str(static_cast<double>(p.peak_memory_bytes)), p.energy_j,
                 p.fits_in_memory ? "" : "  (does not fit)");
    }
    // The host applies to every row alike: said once.
    if (const Prediction& p = rows->front().prediction; !p.host.empty()) {
      for (const std::string& n : p.notes) {
        if (n.rfind("host ", 0) == 0) fmt::print("\n{}\n", say(n));
      }
    }
    rc = 0;
  });
}

void add_report(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("report", "Write one self-contained HTML page about a graph on a GPU: the biggest "
                                           "costs, the roofline of every kernel, the timeline, the comparison");
  add_common(cmd, *a, "none: a report is HTML");
  cmd->add_option("--gpu", a->gpu, "GPU profile name (gpusim profiles list) or a .yaml path")->required();
  cmd->add_option("-o,--out", *out, "The HTML file to write")->required();
  cmd->add_option("--runtimes", a->runtimes,
                  "Also rank these runtimes on the GPU (comma-separated, or all), as compare --runtimes does")
      ->delimiter(',');
  cmd->add_option("--gpus", a->gpus, "Also predict the model on these GPUs (comma-separated), as compare --gpus does")
      ->delimiter(',');
  cmd->callback([a, out, &rc] {
    const Session session({a->profile_dirs, {}});
    warn_profile_dirs(session.profile_dirs());
    if (a->json) {
      fmt::print(stderr, "gpusim report: --json does not apply: a report is an HTML page (--out); predict --json and "
                         "compare --json print the documents it draws\n");
      rc = 2;
      return;
    }
    if (is_description(*a, session)) {
      fmt::print(stderr, "gpusim report: {}: a report draws an ONNX graph's kernels; a language model's generation is "
                         "predict's and compare's (--json for its kernels)\n",
                 a->model);
      rc = 2;
      return;
    }
    PredictRequest req;
    TileSpace tiles = TileSpace::kGenerated;
    auto m = load(*a, "report", session, req, tiles, rc);
    if (!m) return;
    auto gpu = session.gpu(a->gpu);
    if (!gpu) {
      fmt::print(stderr, "gpusim report: --gpu: {}\n", say(gpu.error()));
      rc = exit_code(gpu.error());
      return;
    }
    auto p = session.predict(*m, session.target(*gpu, tiles, {a->allow_tf32}), req);
    if (!p) {
      fmt::print(stderr, "gpusim report: {}\n", say(p.error()));
      rc = p.error().code == ErrorCode::kInvalidArgument ? 2 : exit_code(p.error());
      return;
    }
    std::optional<RuntimeComparison> runtimes;
    if (!a->runtimes.empty()) {
      RuntimeComparisonOptions ro;
      ro.runtimes = a->runtimes;
      PredictRequest rreq = req;
      rreq.runtime.clear();
      auto c = session.compare_runtimes(*m, *gpu, ro, rreq, {a->allow_tf32});
      if (!c) {
        fmt::print(stderr, "gpusim report: --runtimes: {}\n", say(c.error()));
        rc = c.error().code == ErrorCode::kInvalidArgument ? 2 : exit_code(c.error());
        return;
      }
      runtimes = std::move(*c);
    }
    std::vector<ComparedGpu> gpus;
    if (!a->gpus.empty()) {
      auto rows = session.compare(*m, a->gpus, tiles, req, {a->allow_tf32});
      if (!rows) {
        fmt::print(stderr, "gpusim report: --gpus: {}\n", say(rows.error()));
        rc = exit_code(rows.error());
        return;
      }
      gpus = std::move(*rows);
    }
    ReportData d;
    d.model = a->model;
    d.gpu = *gpu;
    d.prediction = std::move(*p);
    d.runtimes = runtimes ? &*runtimes : nullptr;
    d.gpus = gpus.empty() ? nullptr : &gpus;
    if (auto w = write_file_atomic(*out, report_html(d)); !w) {
      fmt::print(stderr, "gpusim report: --out {}: cannot write it ({})\n", *out, say(w.error()));
      rc = 1;
      return;
    }
    fmt::print("{}: {} on {}, {} kernels, {:.3f} ms{}{}\n", *out, a->model, gpu->name, d.prediction.kernels.size(),
               d.prediction.total_us / 1e3, runtimes ? fmt::format(", {} runtimes", runtimes->rows.size()) : "",
               gpus.empty() ? "" : fmt::format(", {} GPUs", gpus.size()));
    rc = 0;
  });
}

}  // namespace gpusim::cli
