// A generation of an ONNX decoder with a KV cache (llm.h: predict_decoder_generation): the graph is
// imported once per priced pass with its dims bound by input and axis — the prompt's pass (the
// whole prompt, an empty cache) and decode steps of one token over a cache of prompt + i — and each
// pass is predicted as any ONNX graph is, on the target under the request's runtime. Decode steps
// are priced at up to kDecodeSamples cache lengths and interpolated between them (a step's time is
// close to linear in its cache: its attention reads the cache, the rest does not change).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include "gpusim/llm.h"
#include "gpusim/onnx_import.h"
#include "gpusim/predict.h"
#include "phase.h"

namespace gpusim {
namespace {

constexpr int kDecodeSamples = 9;

// Where a decoder's graph comes from: a file or bytes (an upload), imported again for each pass with
// that pass's dims; `name` is what messages call it.
struct Source {
  std::string name;
  std::function<Result<Graph>(const ImportOptions&)> import;
};

bool is_cache_input(const std::string& n) {
  return n.rfind("past_key_values", 0) == 0 || n.find("past_key") != std::string::npos ||
         n.find("past_value") != std::string::npos;
}

// The dims of a pass, by input and axis: input_ids and position_ids [batch, sequence],
// attention_mask [batch, past + sequence], each cache input [batch, heads, past, head_dim].
Result<std::map<std::string, int64_t>> pass_dims(const Graph& probe, const std::string& name, int64_t batch,
                                                 int64_t seq, int64_t past) {
  std::map<std::string, int64_t> d;
  for (TensorId t : probe.inputs) {
    const Tensor& x = probe.tensor(t);
    const std::string& n = x.name;
    if (is_cache_input(n)) {
      if (x.shape.size() != 4) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("{}: cache input \"{}\" has rank {}; a decoder's past keys and values are "
                                      "[batch, heads, past_sequence, head_dim]",
                                      name, n, x.shape.size()));
      }
      d[n + ":0"] = batch;
      d[n + ":2"] = past;
    } else if (n == "input_ids" || n == "position_ids") {
      d[n + ":0"] = batch;
      d[n + ":1"] = seq;
    } else if (n == "attention_mask") {
      d[n + ":0"] = batch;
      d[n + ":1"] = past + seq;
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: input \"{}\" is not one a decoder step takes (input_ids, position_ids, "
                                    "attention_mask, past_key_values.N.key/value); gpusim cannot size it for a pass",
                                    name, n));
    }
  }
  return d;
}

// The cache inputs' bytes in the type the passes run in (a float cache re-typed by `dtype`).
int64_t cache_bytes(const Graph& g, const PredictOptions& po) {
  int64_t bytes = 0;
  for (TensorId t : g.inputs) {
    const Tensor& x = g.tensor(t);
    if (!is_cache_input(x.name)) continue;
    const DType dt = po.dtype && dtype_is_float(x.dtype) ? *po.dtype : x.dtype;
    bytes += x.elements() * dtype_bits(dt) / 8;
  }
  return bytes;
}

// How the weights are stored, largest share first: "78% MatMulNBits int4 in blocks of 32, 22% fp16".
// A MatMulNBits's packed B, its scales and zero points count as its `bits`-bit type; every other
// weight is its tensor type, or `retype` for a float one when the request re-types the graph. One
// type alone is just its name ("fp16").
std::string weight_types(const Graph& g, std::optional<DType> retype) {
  std::map<std::string, int64_t> bytes;
  std::vector<bool> counted(g.tensors.size(), false);
  for (const Node& n : g.nodes) {
    if (n.op_type != "MatMulNBits") continue;
    const std::string name = fmt::format("MatMulNBits int{} in blocks of {}", n.attr_int("bits", 4), n.attr_int("block_size", 0));
    for (size_t i = 1; i < n.inputs.size() && i <= 3; ++i) {  // B, scales, zero_points
      const TensorId id = n.inputs[i];
      if (id == kNoTensor || counted[static_cast<size_t>(id)] || g.tensor(id).role != TensorRole::kWeight) continue;
      counted[static_cast<size_t>(id)] = true;
      bytes[name] += g.tensor(id).bytes();
    }
  }
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    if (t.role != TensorRole::kWeight || counted[i]) continue;
    const DType dt = retype && dtype_is_float(t.dtype) ? *retype : t.dtype;
    bytes[std::string(dtype_name(dt))] += t.elements() * dtype_bits(dt) / 8;
  }
  std::vector<std::pair<int64_t, std::string>> by_size;
  int64_t total = 0;
  for (const auto& [name, b] : bytes) {
    by_size.emplace_back(b, name);
    total += b;
  }
  std::sort(by_size.rbegin(), by_size.rend());
  std::vector<std::string> shown;  // the types of at least 0.5% of the bytes
  for (const auto& [b, name] : by_size) {
    const double pct = total > 0 ? 100.0 * static_cast<double>(b) / static_cast<double>(total) : 0.0;
    if (pct >= 0.5) shown.push_back(fmt::format("{:.0f}% {}", pct, name));
  }
  if (shown.size() <= 1) return by_size.empty() ? std::string("none") : by_size.front().second;
  return fmt::format("{}", fmt::join(shown, ", "));
}

struct Pass {
  Prediction p;
  int64_t cache_bytes = 0;  // the cache inputs' bytes
};

Result<Pass> price_pass(const Source& src, const Graph& probe, const Target& target, const PredictOptions& po,
                        int64_t batch, int64_t seq, int64_t past) {
  auto dims = pass_dims(probe, src.name, batch, seq, past);
  if (!dims) return dims.error();
  ImportOptions io;
  io.dims = std::move(*dims);
  io.onnx_shape_inference = false;  // gpusim's own inference sizes every op here; ONNX's adds time a pass
  auto g = src.import(io);
  if (!g) return g.error();
  Pass out;
  out.cache_bytes = cache_bytes(*g, po);
  auto p = predict(*g, target, po);
  if (!p) return p.error();
  out.p = std::move(*p);
  return out;
}

// Adds `weight` passes like p to the phase; `kernels` counts launches (rounded into the phase after).
void add_pass(GenerationPhase& ph, const Prediction& p, double weight, std::map<std::string, double>& bound_us,
              double& kernels) {
  ph.kernels_us += weight * p.kernels_us;
  ph.launch_us += weight * p.launch_bound_us;
  ph.energy_j += weight * p.energy_j;
  kernels += weight * static_cast<double>(p.kernels.size());
  for (const PlannedKernel& k : p.kernels) {
    ph.dram_bytes += weight * k.cost.dram_bytes;
    bound_us[std::string(bound_name(k.cost.bound))] += weight * k.cost.total_us;
  }
}

// A pass's kernels as a phase lists them, most expensive first.
std::vector<GenerationKernel> kernels_of(const Prediction& p) {
  std::vector<GenerationKernel> out;
  for (const PlannedKernel& k : p.kernels) {
    GenerationKernel g;
    g.name = k.name;
    g.op = k.op_type;
    g.work = k.work;
    g.cost = k.cost;
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GenerationKernel& a, const GenerationKernel& b) { return a.cost.total_us > b.cost.total_us; });
  return out;
}

Result<GenerationPrediction> decoder_generation(const Source& src, const Target& target, const GenerationOptions& o,
                                                const PredictOptions& po) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.prompt < 1 || o.prompt > (int64_t{1} << 20)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("prompt: {} tokens is out of range; an ONNX decoder's prompt pass takes 1 to {}", o.prompt,
                                  int64_t{1} << 20));
  }
  if (o.generate < 0 || o.generate > (int64_t{1} << 20)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("generate: {} tokens is out of range; expected 0 to {}", o.generate, int64_t{1} << 20));
  }
  if (o.batch < 1 || o.batch > 4096) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("batch: {} is out of range; expected 1 to 4096", o.batch));
  }
  // A first import with every dim 1 names the inputs.
  ImportOptions probe_opts;
  probe_opts.other_dims = 1;
  probe_opts.onnx_shape_inference = false;
  probe_opts.max_nodes = o.max_nodes;  // the passes import the same graph: refused here, once
  auto probe = src.import(probe_opts);
  if (!probe) return probe.error();
  if (!is_decoder_with_cache(*probe)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: no past_key_values inputs: a generation needs a decoder that takes its KV cache "
                                  "(past_key_values.N.key/value in, present.N.key/value out, as "
                                  "tools/export_llama_onnx.py and Optimum export them), or a language model's "
                                  "description (models/llm/*.yaml, a Hugging Face config.json); this graph is "
                                  "predicted as one pass",
                                  src.name));
  }
  GenerationPrediction g;
  g.gpu = target.gpu().name;
  g.model = src.name;
  g.backend = "onnx";
  g.prompt = o.prompt;
  g.generate = o.generate;
  g.batch = o.batch;

  auto pre = price_pass(src, *probe, target, po, o.batch, o.prompt, 0);
  if (!pre) return pre.error();
  g.weights = weight_types(*probe, po.dtype);
  g.runtime = pre->p.runtime;
  g.prefill.name = "prefill";
  g.prefill.tokens = o.prompt * o.batch;
  g.prefill.steps = 1;
  g.prefill.time_us = pre->p.total_us;
  std::map<std::string, double> pre_bounds;
  double pre_kernels = 0;
  add_pass(g.prefill, pre->p, 1.0, pre_bounds, pre_kernels);
  g.prefill.kernels = static_cast<int64_t>(pre_kernels + 0.5);
  close_phase(g.prefill, pre_bounds);
  g.prefill.kernels_of_step = kernels_of(pre->p);
  g.ttft_us = pre->p.total_us;
  g.weight_bytes = pre->p.weight_bytes;
  int64_t compute = std::max<int64_t>(0, pre->p.peak_memory_bytes - pre->p.weight_bytes - pre->cache_bytes);

  g.decode.name = "decode";
  g.decode.tokens = o.generate * o.batch;
  g.decode.steps = o.generate;
  if (o.generate > 0) {
    // Steps i = 0 .. generate - 1 read a cache of prompt + i; priced at up to kDecodeSamples of them.
    std::vector<int64_t> at;
    const int64_t n = std::min<int64_t>(o.generate, kDecodeSamples);
    for (int64_t s = 0; s < n; ++s) at.push_back(n == 1 ? 0 : s * (o.generate - 1) / (n - 1));
    std::vector<Pass> passes;
    for (int64_t i : at) {
      auto p = price_pass(src, *probe, target, po, o.batch, 1, o.prompt + i);
      if (!p) return p.error();
      compute = std::max<int64_t>(compute, p->p.peak_memory_bytes - p->p.weight_bytes - p->cache_bytes);
      passes.push_back(std::move(*p));
    }
    // Each sample stands for the steps nearest it (the trapezoid rule's weights in whole steps).
    std::map<std::string, double> bounds;
    double total = 0, kernels = 0;
    for (size_t s = 0; s < passes.size(); ++s) {
      const double lo = s == 0 ? 0.0 : 0.5 * static_cast<double>(at[s - 1] + at[s]);
      const double hi = s + 1 == passes.size() ? static_cast<double>(o.generate) : 0.5 * static_cast<double>(at[s] + at[s + 1]);
      const double w = passes.size() == 1 ? static_cast<double>(o.generate) : hi - lo;
      total += w * passes[s].p.total_us;
      add_pass(g.decode, passes[s].p, w, bounds, kernels);
    }
    g.decode.time_us = total;
    g.decode.kernels = static_cast<int64_t>(kernels + 0.5);
    close_phase(g.decode, bounds);
    g.decode.kernels_of_step = kernels_of(passes.front().p);
    g.token_first_us = passes.front().p.total_us;
    g.token_last_us = passes.back().p.total_us;
    g.token_mean_us = total / static_cast<double>(o.generate);
    g.notes.push_back(fmt::format("decode steps priced at {} cache lengths ({} to {}) and interpolated between them",
                                  passes.size(), o.prompt + at.front(), o.prompt + at.back()));
  }
  g.total_us = g.ttft_us + g.decode.time_us;
  for (GenerationPhase* ph : {&g.prefill, &g.decode}) {
    ph->j_per_token = ph->tokens > 0 ? ph->energy_j / static_cast<double>(ph->tokens) : 0;
  }
  g.energy_j = g.prefill.energy_j + g.decode.energy_j;
  // The cache after the last token: the probe's one token a sequence (every dim 1), in the type
  // the passes ran in, times the sequences and the tokens.
  g.kv_cache_bytes = cache_bytes(*probe, po) * o.batch * (o.prompt + o.generate);
  g.compute_bytes = compute;
  g.memory_bytes = g.weight_bytes + g.kv_cache_bytes + g.compute_bytes;
  const double dram = target.gpu().memory.dram.size_gb * 1e9;
  g.fits_in_memory = dram <= 0 || static_cast<double>(g.memory_bytes) <= dram;
  g.notes.push_back(fmt::format("each pass is the ONNX graph predicted under the {} runtime: the prompt's with an empty "
                                "cache, each token's with sequence length 1{}",
                                g.runtime, po.host_copies ? "" : "; the cache stays on the device (no copies in or out)"));
  g.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

}  // namespace

bool is_decoder_with_cache(const Graph& g) {
  for (TensorId t : g.inputs) {
    if (is_cache_input(g.tensor(t).name)) return true;
  }
  return false;
}

Result<GenerationPrediction> predict_decoder_generation(const std::string& path, const Target& target,
                                                        const GenerationOptions& o, const PredictOptions& po) {
  return decoder_generation(Source{path, [&](const ImportOptions& io) { return import_onnx(path, io); }}, target, o, po);
}

Result<GenerationPrediction> predict_decoder_generation_bytes(std::string_view bytes, const std::string& name,
                                                              const Target& target, const GenerationOptions& o,
                                                              const PredictOptions& po) {
  return decoder_generation(Source{name, [&](const ImportOptions& io) { return import_onnx_bytes(bytes, name, io); }},
                            target, o, po);
}

}  // namespace gpusim
