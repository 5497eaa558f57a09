// A generation predicted kernel by kernel (include/gpusim/llm.h; core/llm/README.md): the ggml
// graph llama.cpp builds for a llama-family decoder, one pass for the prompt and one a generated
// token, each kernel priced by the kernel cost model with the fastest tile of the target's space,
// laid on one stream with launches paced by the runtime.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "gpusim/cancel.h"
#include "gpusim/device_plan.h"
#include "gpusim/llm.h"
#include "phase.h"
#include "sim/work_json.h"

namespace gpusim {
namespace {

constexpr double kF32 = 4.0;  // ggml's activations are fp32
constexpr double kKvBytes = 2.0;  // the KV cache is fp16 (llama.cpp's default cache type)

// The llama.cpp backends and how each runs a quantized mul_mat (core/llm/README.md):
//  - cuda (and hip, the same code through HIP): the activations are quantized to q8_1 first (a
//    kernel per mul_mat); matrix-vector products are mul_mat_vec_q, larger ones mul_mat_q on the int8
//    matrix units (integer dot products where the GPU has none). fp16 weights: cuBLAS with fp16
//    accumulation, the activations converted to fp16 and the result back (a kernel each).
//  - sycl: the CUDA code ported (q8_1 activations, mul_mat_vec_q); larger products dequantize to
//    fp16 for a oneMKL/oneDNN GEMM (the cuBLAS path).
//  - metal, vulkan: the shader unpacks the weights itself and multiplies in fp16/fp32.
struct BackendTraits {
  bool quantize_activations = false;  // a q8_1 kernel before each quantized mul_mat
  bool int8_matmul = false;           // large quantized mul_mats on int8 (MMQ)
  bool dequantize_cublas = false;     // large quantized mul_mats: dequantize to fp16, then cuBLAS
  bool cublas_fp16 = false;           // large fp16 mul_mats: cuBLAS with fp16 accumulation and two converts
};

BackendTraits traits(const std::string& backend, const std::string& cuda_prompt) {
  BackendTraits t;
  if (backend == "cuda" || backend == "hip") {
    t.quantize_activations = true;
    t.cublas_fp16 = true;
    t.int8_matmul = cuda_prompt != "cublas";
    t.dequantize_cublas = cuda_prompt == "cublas";
  } else if (backend == "sycl") {
    // ggml-sycl is the CUDA backend's code ported: q8_1 activations and mul_mat_vec_q for vectors;
    // larger quantized products dequantize the weights to fp16 for a oneMKL/oneDNN GEMM.
    t.quantize_activations = true;
    t.cublas_fp16 = true;
    t.dequantize_cublas = true;
  }
  return t;
}

struct Pass {
  int64_t seqs = 1;   // sequences in the batch
  int64_t rows = 1;   // tokens of each sequence in this pass
  int64_t past = 0;   // tokens already in each sequence's cache
  bool prefill = false;
};

// Kernels in launch order, `repeat` times over (the layers that are the same kernels).
struct Segment {
  std::vector<GenerationKernel> kernels;
  int repeat = 1;
};

class StepBuilder {
 public:
  StepBuilder(const LlmSpec& s, const std::vector<LlmTensor>& weights, const BackendTraits& bt, bool fa)
      : s_(s), w_(weights), bt_(bt), fa_(fa) {
    for (size_t i = 0; i < w_.size(); ++i) by_name_.emplace(w_[i].name, i);
  }

  std::vector<Segment> build(const Pass& p) const {
    std::vector<Segment> segs(1);
    std::vector<GenerationKernel>& ks = segs.back().kernels;
    const int64_t T = p.seqs * p.rows;
    const int64_t H = s_.hidden, q_out = s_.heads * s_.head_dim, kv_out = s_.kv_heads * s_.head_dim;
    const int L = static_cast<int>(s_.layers);
    const int64_t kv_len = p.past + p.rows;
    const int64_t gqa = s_.heads / s_.kv_heads;

    // Embedding rows gathered from the token table.
    const LlmTensor& emb = tensor("token_embd.weight");
    ks.push_back(ew("get_rows", "get_rows", T * H, static_cast<double>(emb.bytes) / emb.rows * T, T * H * kF32, 0));
    // The layers: consecutive layers whose weights have the same types are the same kernels, one
    // segment repeated (llama.cpp's mixes differ per layer only in some weights' types).
    std::string last_sig;
    for (int i = 0; i < L; ++i) {
      auto wt = [&](const char* name) -> const LlmTensor& { return tensor(fmt::format("blk.{}.{}.weight", i, name)); };
      std::vector<GenerationKernel> layer;
      layer.push_back(norm("attn_norm", T, H));
      layer.push_back(ew("attn_norm_mul", "mul", T * H, 2 * T * H * kF32, T * H * kF32, T * H));
      matmul(layer, "attn_q", wt("attn_q"), T);
      matmul(layer, "attn_k", wt("attn_k"), T);
      matmul(layer, "attn_v", wt("attn_v"), T);
      layer.push_back(ew("rope_q", "rope", T * q_out, T * q_out * kF32, T * q_out * kF32, 3 * T * q_out));
      layer.push_back(ew("rope_k", "rope", T * kv_out, T * kv_out * kF32, T * kv_out * kF32, 3 * T * kv_out));
      layer.push_back(ew("cache_k", "cpy", T * kv_out, T * kv_out * kF32, T * kv_out * kKvBytes, 0));
      layer.push_back(ew("cache_v", "cpy", T * kv_out, T * kv_out * kF32, T * kv_out * kKvBytes, 0));
      attention(layer, p, kv_len, gqa);
      matmul(layer, "attn_output", wt("attn_output"), T);
      layer.push_back(ew("attn_residual", "add", T * H, 2 * T * H * kF32, T * H * kF32, T * H));
      layer.push_back(norm("ffn_norm", T, H));
      layer.push_back(ew("ffn_norm_mul", "mul", T * H, 2 * T * H * kF32, T * H * kF32, T * H));
      matmul(layer, "ffn_gate", wt("ffn_gate"), T);
      matmul(layer, "ffn_up", wt("ffn_up"), T);
      const int64_t F = s_.ffn;
      GenerationKernel silu = ew("ffn_silu", "silu", T * F, T * F * kF32, T * F * kF32, T * F);
      silu.work.flops.transcendental = T * F;
      layer.push_back(silu);
      layer.push_back(ew("ffn_gate_mul", "mul", T * F, 2 * T * F * kF32, T * F * kF32, T * F));
      matmul(layer, "ffn_down", wt("ffn_down"), T);
      layer.push_back(ew("ffn_residual", "add", T * H, 2 * T * H * kF32, T * H * kF32, T * H));
      std::string sig;
      for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
        sig += block_format(wt(n).type).name;
        sig += ',';
      }
      if (sig == last_sig) {
        ++segs.back().repeat;
      } else {
        segs.push_back({std::move(layer), 1});
        last_sig = sig;
      }
    }
    segs.push_back({});
    std::vector<GenerationKernel>& tail = segs.back().kernels;
    // The last layer's output is cut to the rows whose logits are asked for (the last token of each
    // sequence in a prompt pass), then normed and projected onto the vocabulary.
    const int64_t out_rows = p.seqs;
    tail.push_back(norm("output_norm", out_rows, H));
    tail.push_back(ew("output_norm_mul", "mul", out_rows * H, 2 * out_rows * H * kF32, out_rows * H * kF32, out_rows * H));
    matmul(tail, "output", s_.tied_embeddings ? emb : tensor("output.weight"), out_rows);
    return segs;
  }

 private:
  const LlmTensor& tensor(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? w_.front() : w_[it->second];  // llm_weights names every tensor asked for
  }

  static GenerationKernel ew(const char* name, const char* op, int64_t elements, double read, double written, int64_t fma) {
    GenerationKernel k;
    k.name = name;
    k.op = op;
    KernelWork& w = k.work;
    w.cls = OpClass::kElementwise;
    w.dtype = DType::kFloat32;
    w.elements = elements;
    w.bytes_read = static_cast<int64_t>(read);
    w.bytes_written = static_cast<int64_t>(written);
    w.flops.fma = fma;
    return k;
  }

  static GenerationKernel norm(const char* name, int64_t rows, int64_t cols) {
    GenerationKernel k;
    k.name = name;
    k.op = "rms_norm";
    KernelWork& w = k.work;
    w.cls = OpClass::kNormalization;
    w.dtype = DType::kFloat32;
    w.rows = rows;
    w.row_elements = cols;
    w.elements = rows * cols;
    w.bytes_read = static_cast<int64_t>(rows * cols * kF32);
    w.bytes_written = static_cast<int64_t>(rows * cols * kF32);
    w.flops.fma = 3 * rows * cols;
    w.flops.transcendental = rows;
    return k;
  }

  // A weight times the activations: [m, k] x [k, n] with n = the weight's rows.
  void matmul(std::vector<GenerationKernel>& ks, const char* name, const LlmTensor& t, int64_t m) const {
    const BlockFormat& f = block_format(t.type);
    const bool quantized = f.block_elements > 1;
    const int64_t k = t.row_elements, n = t.rows;
    GenerationKernel g;
    g.name = name;
    g.op = "mul_mat";
    g.work = gemm_work(DType::kFloat16, 1, m, n, k);
    KernelWork& w = g.work;
    w.b_shared = true;
    w.bytes_written = static_cast<int64_t>(m * n * kF32);
    const bool vec = m <= 8;
    if (quantized && !vec && bt_.dequantize_cublas) {
      // The weight unpacked to fp16 by a kernel of its own, then an fp16 product as below.
      GenerationKernel dq = ew("dequantize", "dequantize", n * k, static_cast<double>(t.bytes), n * k * 2.0, 0);
      dq.work.flops.fma = static_cast<int64_t>(f.dequant_ops * static_cast<double>(n * k));
      ks.push_back(std::move(dq));
      w.dtype = DType::kFloat16;
      w.accumulate_half = true;
      w.a_bytes = static_cast<int64_t>(m * k * 2);
      ks.push_back(ew("to_fp16", "cpy", m * k, m * k * kF32, m * k * 2.0, 0));
      w.bytes_read = w.a_bytes + n * k * 2;
      ks.push_back(std::move(g));
      ks.push_back(ew("to_fp32", "cpy", m * n, m * n * 2.0, m * n * kF32, 0));
      return;
    }
    if (quantized) {
      w.b_bits = f.bits();
      w.dequant_ops = f.dequant_ops;
      w.dtype = !vec && bt_.int8_matmul ? DType::kInt8 : DType::kFloat16;
      // mul_mat_q rescales each 32-element block's integer sum (K-quants' sub-blocks are 32 wide too).
      if (w.dtype == DType::kInt8) w.k_block = 32;
      if (bt_.quantize_activations) {
        ks.push_back(ew("quantize_q8_1", "quantize_q8_1", m * k, m * k * kF32, m * k * 1.125, 2 * m * k));
      }
      w.a_bytes = static_cast<int64_t>(m * k * (bt_.quantize_activations ? 1.125 : kF32));
    } else {
      w.dtype = t.type == GgmlType::kF32 ? DType::kFloat32 : t.type == GgmlType::kBF16 ? DType::kBFloat16 : DType::kFloat16;
      w.a_bytes = static_cast<int64_t>(m * k * kF32);
      if (!vec && bt_.cublas_fp16 && w.dtype == DType::kFloat16) {
        w.accumulate_half = true;
        w.a_bytes = static_cast<int64_t>(m * k * 2);
        ks.push_back(ew("to_fp16", "cpy", m * k, m * k * kF32, m * k * 2.0, 0));
      }
    }
    w.bytes_read = w.a_bytes + t.bytes;
    ks.push_back(std::move(g));
    if (!quantized && !vec && bt_.cublas_fp16 && w.dtype == DType::kFloat16) {
      ks.push_back(ew("to_fp32", "cpy", m * n, m * n * 2.0, m * n * kF32, 0));
    }
  }

  // Attention over the cache: one fused kernel (-fa 1), or ggml's KQ product, softmax and KQV
  // product with the heads copied back in order. The query heads sharing a KV head are rows of
  // one product, so each KV head's cache is read once.
  void attention(std::vector<GenerationKernel>& ks, const Pass& p, int64_t kv_len, int64_t gqa) const {
    const int64_t hd = s_.head_dim, groups = p.seqs * s_.kv_heads, rows = p.rows * gqa;
    const double cache_bytes = static_cast<double>(groups) * kv_len * hd * kKvBytes;
    const int64_t T = p.seqs * p.rows, q_out = s_.heads * hd;
    if (fa_) {
      GenerationKernel g;
      g.name = "attention";
      g.op = "flash_attn_ext";
      KernelWork& w = g.work;
      w.cls = OpClass::kAttention;
      w.dtype = DType::kFloat16;
      w.batch = groups;
      w.m = rows;
      w.kv_seq = kv_len;
      w.head_dim = hd;
      w.v_head_dim = hd;
      w.macs = 2 * groups * rows * kv_len * hd;
      w.flops.fma = 2 * w.macs;
      w.flops.transcendental = groups * rows * kv_len;
      w.bytes_read = static_cast<int64_t>(T * q_out * kF32 + 2 * cache_bytes);
      w.bytes_written = static_cast<int64_t>(T * q_out * kF32);
      ks.push_back(std::move(g));
      return;
    }
    auto bmm = [&](const char* name, int64_t n, int64_t k) {
      GenerationKernel g;
      g.name = name;
      g.op = "mul_mat";
      g.work = gemm_work(DType::kFloat16, groups, rows, n, k);
      KernelWork& w = g.work;
      w.a_bytes = static_cast<int64_t>(groups * rows * k * kF32);
      w.bytes_read = static_cast<int64_t>(w.a_bytes + cache_bytes);
      w.bytes_written = static_cast<int64_t>(groups * rows * n * kF32);
      ks.push_back(std::move(g));
    };
    bmm("attn_kq", kv_len, hd);
    GenerationKernel sm = norm("attn_softmax", groups * rows, kv_len);
    sm.op = "soft_max";
    sm.work.flops.transcendental = groups * rows * kv_len;
    ks.push_back(std::move(sm));
    bmm("attn_kqv", hd, kv_len);
    ks.push_back(ew("attn_permute", "cont", T * q_out, T * q_out * kF32, T * q_out * kF32, 0));
  }

  const LlmSpec& s_;
  const std::vector<LlmTensor>& w_;
  BackendTraits bt_;
  bool fa_;
  std::map<std::string, size_t> by_name_;
};

// Prices kernels on the target, each work once.
class Pricer {
 public:
  explicit Pricer(const Target& t) : t_(t) {}
  KernelCost price(const KernelWork& w) {
    const std::string key = work_to_json(w).dump();
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    TileConfig tile = best_generated_tile(w, t_.device, t_.capability());
    // A matrix-vector product (at most 8 rows) runs llama.cpp's mul_mat_vec kernels: a GEMV-shaped
    // tile, whatever a tiled loop would cost.
    if (w.cls == OpClass::kGemm && w.m <= 8) {
      double best = -1;
      for (const TileConfig& g : generated_tiles(w, t_.device, t_.capability())) {
        if (!gemv_shaped(g)) continue;
        const KernelCost c = kernel_cost(w, g, t_.device);
        if (c.feasible && (best < 0 || c.total_us < best)) {
          best = c.total_us;
          tile = g;
        }
      }
    }
    KernelCost c = kernel_cost(w, tile, t_.device);
    memo_.emplace(key, c);
    return c;
  }

 private:
  const Target& t_;
  std::map<std::string, KernelCost> memo_;
};

struct StepResult {
  // active_us: each kernel's time weighed by how busy it keeps its bottleneck (the energy model's
  // dynamic share, as predict's timeline counts it).
  double time_us = 0, kernels_us = 0, launch_us = 0, dram_bytes = 0, active_us = 0;
  int64_t kernels = 0;
  std::map<std::string, double> bound_us;
};

// One pass on one stream: kernel after kernel, each followed by the runtime's gap (llama.cpp
// launches a pass's kernels back to back, or replays them as a CUDA graph: the device's dispatch
// between two kernels, not the host's, sets the gap).
StepResult run_step(std::vector<Segment>& segs, Pricer& pricer, double gap_us) {
  StepResult r;
  double gpu = 0;
  for (Segment& s : segs) {
    for (GenerationKernel& k : s.kernels) k.cost = pricer.price(k.work);
    for (int rep = 0; rep < s.repeat; ++rep) {
      for (const GenerationKernel& k : s.kernels) {
        gpu += k.cost.total_us + gap_us;
        r.launch_us += gap_us;
        r.kernels_us += k.cost.total_us;
        r.dram_bytes += k.cost.dram_bytes;
        const double busy = std::max({k.cost.compute_us, k.cost.dram_us, k.cost.l2_us});
        r.active_us += k.cost.total_us > 0 ? std::min(1.0, busy / k.cost.total_us) * k.cost.total_us : 0;
        r.bound_us[std::string(bound_name(k.cost.bound))] += k.cost.total_us;
        ++r.kernels;
      }
    }
  }
  r.time_us = gpu;
  return r;
}

// The step's kernels merged by name and work (their launches counted), most expensive first.
std::vector<GenerationKernel> summarize(const std::vector<Segment>& segs) {
  std::vector<GenerationKernel> out;
  std::map<std::string, size_t> at;
  for (const Segment& s : segs) {
    for (const GenerationKernel& k : s.kernels) {
      const std::string key = k.name + "|" + work_to_json(k.work).dump();
      auto it = at.find(key);
      if (it == at.end()) {
        at.emplace(key, out.size());
        out.push_back(k);
        out.back().count = s.repeat;
      } else {
        out[it->second].count += s.repeat;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const GenerationKernel& a, const GenerationKernel& b) {
    return a.cost.total_us * a.count > b.cost.total_us * b.count;
  });
  return out;
}

void finish_phase(GenerationPhase& ph, const StepResult& total, const GpuProfile& gpu) {
  // Energy: idle power throughout, the dynamic share while a kernel keeps its bottleneck busy.
  ph.energy_j = gpu.power.idle_w * ph.time_us * 1e-6 + (gpu.power.tdp_w - gpu.power.idle_w) * total.active_us * 1e-6;
  ph.j_per_token = ph.tokens > 0 ? ph.energy_j / static_cast<double>(ph.tokens) : 0;
  ph.kernels_us = total.kernels_us;
  ph.launch_us = total.launch_us;
  ph.kernels = total.kernels;
  ph.dram_bytes = total.dram_bytes;
  close_phase(ph, total.bound_us);
}

// The type of most of the weights (the layers' attn_q).
GgmlType base_type(const std::vector<LlmTensor>& w) {
  for (const LlmTensor& t : w) {
    if (t.name == "blk.0.attn_q.weight") return t.type;
  }
  return GgmlType::kF16;
}

}  // namespace

void close_phase(GenerationPhase& ph, const std::map<std::string, double>& bound_us) {
  double best = -1;
  for (const auto& [b, us] : bound_us) {
    const double share = ph.kernels_us > 0 ? us / ph.kernels_us : 0;
    ph.bound_share[b] = share;
    if (share > best) {
      best = share;
      ph.bound = b;
    }
  }
  // Launch-bound when the GPU waited for launches longer than any bound kept it busy.
  if (ph.kernels_us > 0 && ph.launch_us > best * ph.kernels_us) ph.bound = "launch";
  ph.tokens_per_s = ph.time_us > 0 ? static_cast<double>(ph.tokens) / (ph.time_us * 1e-6) : 0;
}

std::string default_llm_backend(const GpuProfile& gpu) {
  if (gpu.vendor == "apple") return "metal";
  if (gpu.vendor == "amd") return "hip";
  if (gpu.vendor == "nvidia") return "cuda";
  return "vulkan";
}

std::string llm_runtime_name(const std::string& backend) { return "llamacpp-" + backend; }

Result<std::string> llm_backend(const std::string& printed) {
  static const std::pair<const char*, const char*> kGpu[] = {
      {"cuda", "cuda"}, {"rocm", "hip"}, {"hip", "hip"}, {"vulkan", "vulkan"}, {"metal", "metal"}, {"sycl", "sycl"}};
  static const char* kCpu[] = {"cpu", "blas", "accelerate", "openblas", "mkl", "blis", "amx", "kleidiai"};
  std::vector<std::string> parts(1);
  for (const char ch : printed.substr(0, 256)) {
    if (ch == ',' || ch == '+' || ch == ' ' || ch == '/') {
      if (!parts.back().empty()) parts.emplace_back();
    } else {
      parts.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  bool cpu = false;
  for (const std::string& part : parts) {
    for (const auto& [name, modelled] : kGpu) {
      if (part == name) return std::string(modelled);
    }
    for (const char* c : kCpu) cpu = cpu || part == c;
  }
  const std::string shown = printed.substr(0, 64);
  if (cpu) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("backend \"{}\" runs llama.cpp on the CPU, not on a GPU; gpusim models its GPU "
                                  "backends: CUDA, ROCm (hip), Vulkan, Metal and SYCL",
                                  shown));
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("backend \"{}\" is not a llama.cpp backend gpusim models; expected cuda, hip (ROCm), "
                                "vulkan, metal or sycl",
                                shown));
}

Result<GenerationPrediction> predict_generation(const LlmSpec& spec, const Target& target, const GenerationOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.prompt < 0 || o.prompt > (int64_t{1} << 22)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("prompt: {} tokens is out of range; expected 0 to {}", o.prompt, int64_t{1} << 22));
  }
  if (o.generate < 0 || o.generate > (int64_t{1} << 22)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("generate: {} tokens is out of range; expected 0 to {}", o.generate, int64_t{1} << 22));
  }
  if (o.prompt == 0 && o.generate == 0) {
    return make_error(ErrorCode::kInvalidArgument, "prompt and generate are both 0: nothing to predict; give `prompt`, `generate` or both a number of tokens");
  }
  if (o.batch < 1 || o.batch > 4096) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("batch: {} is out of range; expected 1 to 4096 sequences", o.batch));
  }
  if (o.ubatch < 1 || o.ubatch > 65536) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("ubatch: {} is out of range; expected 1 to 65536 rows", o.ubatch));
  }
  // The largest figures the kernels count (a pass's widest product and its attention over the whole
  // cache, the cache itself), in floating point: they must stay well inside 64-bit counts.
  {
    const double rows = static_cast<double>(o.batch) * static_cast<double>(std::min(o.ubatch, std::max<int64_t>(o.prompt, 1)));
    const double ctx = static_cast<double>(o.prompt + o.generate);
    const double width = static_cast<double>(std::max({spec.ffn, spec.vocab, spec.heads * spec.head_dim}));
    const double gemm = rows * width * static_cast<double>(spec.hidden);
    const double attention = rows * static_cast<double>(spec.heads) * ctx * static_cast<double>(spec.head_dim);
    const double cache = 4.0 * static_cast<double>(spec.layers * spec.kv_heads * spec.head_dim) * ctx * static_cast<double>(o.batch);
    if (std::max({gemm, attention, cache}) > 1e17) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("batch {} x ubatch {} over {} tokens of {} is too large to price ({:.2g} multiply-adds in "
                                    "one kernel, a {:.2g}-byte cache); give fewer sequences, rows or tokens",
                                    o.batch, o.ubatch, o.prompt + o.generate, spec.name, std::max(gemm, attention), cache));
      }
  }
  std::string backend = default_llm_backend(target.gpu());
  if (!o.backend.empty()) {
    auto named = llm_backend(o.backend);
    if (!named) return named.error();
    backend = *named;
  }
  auto weights = llm_weights(spec, o.weights);
  if (!weights) return weights.error();
  if (!o.cuda_prompt.empty() && o.cuda_prompt != "mmq" && o.cuda_prompt != "cublas") {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cuda_prompt \"{}\" is not a path llama.cpp takes; expected mmq or cublas", o.cuda_prompt));
  }
  // Unset, as current llama.cpp chooses (ggml_cuda_should_use_mmq): MMQ unless the GPU has fp16
  // matrix units but no int8 ones. A GPU without fp16 matrix units runs MMQ on integer dot products
  // in every build, the older ones included.
  std::string cuda_prompt = o.cuda_prompt;
  bool cublas_refused = false;
  {
    const GpuProfile& p = target.gpu();
    const bool int8_mma = p.matrix_tflops(Precision::kInt8, Precision::kInt32).has_value();
    const bool fp16_mma = p.matrix_tflops(Precision::kFp16, Precision::kFp16).has_value();
    if (cuda_prompt.empty()) cuda_prompt = !int8_mma && fp16_mma ? "cublas" : "mmq";
    if (!fp16_mma && cuda_prompt == "cublas") {
      cuda_prompt = "mmq";
      cublas_refused = true;
    }
  }

  GenerationPrediction g;
  g.gpu = target.gpu().name;
  g.model = spec.name;
  g.weights = *llm_file_type(o.weights);
  g.backend = backend;
  g.prompt = o.prompt;
  g.generate = o.generate;
  g.batch = o.batch;
  if (cublas_refused && (backend == "cuda" || backend == "hip")) {
    g.notes.push_back(fmt::format("cuda_prompt cublas: {} has no fp16 matrix units, where llama.cpp always ran mul_mat_q; "
                                  "priced as mmq", target.gpu().name));
  }

  // The gap after each kernel: the option's, the runtime's (default_us of runtimes/llamacpp-*.yaml),
  // else the profile's launch overhead.
  double gap_us = target.gpu().launch.overhead_us * target.gpu().efficiency.launch;
  if (o.kernel_gap_us) {
    g.runtime = fmt::format("{} (gap {:.2f} us)", llm_runtime_name(backend), *o.kernel_gap_us);
    gap_us = *o.kernel_gap_us;
  } else if (o.runtime) {
    g.runtime = o.runtime->name;
    gap_us = o.runtime->default_us;
    if (!o.runtime->host_note.empty()) g.notes.push_back(o.runtime->host_note);
  } else if (auto rt = find_runtime(llm_runtime_name(backend), default_runtime_dirs())) {
    g.runtime = rt->name;
    gap_us = rt->default_us;
  } else {
    g.runtime = "profile launch overhead";
    g.notes.push_back(fmt::format("no runtime {} found: each kernel is followed by the profile's launch overhead, {:.1f} us",
                                  llm_runtime_name(backend), gap_us));
  }
  if (!(gap_us >= 0) || gap_us > 1e4) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("kernel gap: {} us is out of range; expected 0 to 10000", gap_us));
  }
  g.kernel_gap_us = gap_us;

  const StepBuilder builder(spec, *weights, traits(backend, cuda_prompt), o.flash_attention);
  Pricer pricer(target);
  for (const LlmTensor& t : *weights) g.weight_bytes += t.bytes;

  // Passes that differ only in the cache before them (attention is linear in its length): up to 65
  // are priced one by one, more at 65 evenly spaced ones with those between interpolated. `at(i)`
  // builds pass i; the sum of all `count` passes goes to `total`, each priced pass's result to
  // `priced` (first and last).
  auto integrate = [&](int64_t count, const std::function<Pass(int64_t)>& at, StepResult& total,
                       std::vector<StepResult>* priced, std::vector<GenerationKernel>* first_step) {
    if (count <= 0) return;
    constexpr int64_t kSamples = 65;
    std::vector<int64_t> sample;
    if (count <= kSamples) {
      for (int64_t j = 0; j < count; ++j) sample.push_back(j);
    } else {
      for (int64_t s = 0; s < kSamples; ++s) sample.push_back(s * (count - 1) / (kSamples - 1));
    }
    for (size_t s = 0; s < sample.size(); ++s) {
      check_cancelled();
      std::vector<Segment> ks = builder.build(at(sample[s]));
      const StepResult r = run_step(ks, pricer, gap_us);
      if (s == 0 && first_step) *first_step = summarize(ks);
      if (priced) priced->push_back(r);
      // The passes nearer this sample than the next weigh as it does.
      const int64_t lo = s == 0 ? 0 : (sample[s - 1] + sample[s]) / 2 + 1;
      const int64_t hi = s + 1 == sample.size() ? count - 1 : (sample[s] + sample[s + 1]) / 2;
      const double weight = static_cast<double>(hi - lo + 1);
      total.time_us += weight * r.time_us;
      total.kernels_us += weight * r.kernels_us;
      total.launch_us += weight * r.launch_us;
      total.dram_bytes += weight * r.dram_bytes;
      total.active_us += weight * r.active_us;
      total.kernels += (hi - lo + 1) * r.kernels;
      for (const auto& [b, us] : r.bound_us) total.bound_us[b] += weight * us;
    }
  };

  // Prefill: the prompt in passes of ubatch rows over the cache the earlier ones filled, the last
  // pass holding what is left.
  g.prefill.name = "prefill";
  g.prefill.tokens = o.prompt * o.batch;
  StepResult pre;
  const int64_t full = o.prompt / o.ubatch, tail = o.prompt % o.ubatch;
  const int64_t largest_rows = std::max<int64_t>(1, std::min(o.ubatch, o.prompt));
  integrate(full, [&](int64_t i) { return Pass{o.batch, o.ubatch, i * o.ubatch, true}; }, pre, nullptr,
            &g.prefill.kernels_of_step);
  integrate(tail > 0 ? 1 : 0, [&](int64_t) { return Pass{o.batch, tail, full * o.ubatch, true}; }, pre, nullptr,
            full == 0 ? &g.prefill.kernels_of_step : nullptr);
  g.prefill.steps = full + (tail > 0 ? 1 : 0);
  g.prefill.time_us = pre.time_us;
  finish_phase(g.prefill, pre, target.gpu());
  g.ttft_us = g.prefill.time_us;

  // Decode: one step a token over a cache of prompt + j tokens.
  g.decode.name = "decode";
  g.decode.tokens = o.generate * o.batch;
  g.decode.steps = o.generate;
  StepResult dec;
  if (o.generate > 0) {
    std::vector<StepResult> priced;
    integrate(o.generate, [&](int64_t j) { return Pass{o.batch, 1, o.prompt + j, false}; }, dec, &priced,
              &g.decode.kernels_of_step);
    g.token_first_us = priced.front().time_us;
    g.token_last_us = priced.back().time_us;
    g.decode.time_us = dec.time_us;
    g.token_mean_us = dec.time_us / static_cast<double>(o.generate);
  }
  finish_phase(g.decode, dec, target.gpu());
  g.total_us = g.prefill.time_us + g.decode.time_us;
  g.energy_j = g.prefill.energy_j + g.decode.energy_j;

  // Memory: weights, the cache for every token of every sequence, and the largest pass's
  // activations (llama.cpp's compute buffer: the widest layer's tensors, and the attention scores
  // without -fa).
  const int64_t ctx = o.prompt + o.generate;
  g.kv_cache_bytes = static_cast<int64_t>(2.0 * spec.layers * spec.kv_heads * spec.head_dim * ctx * kKvBytes) * o.batch;
  const int64_t T = o.batch * largest_rows;
  double act = static_cast<double>(T) * (4.0 * spec.hidden + 3.0 * spec.ffn) * kF32;
  if (!o.flash_attention) act += static_cast<double>(o.batch) * spec.heads * largest_rows * ctx * kF32;
  act += static_cast<double>(o.batch) * spec.vocab * kF32;  // the logits
  g.compute_bytes = static_cast<int64_t>(act);
  g.memory_bytes = g.weight_bytes + g.kv_cache_bytes + g.compute_bytes;
  const double dram = target.gpu().memory.dram.size_gb * 1e9;
  g.fits_in_memory = dram <= 0 || static_cast<double>(g.memory_bytes) <= dram;
  if (!g.fits_in_memory) {
    g.notes.push_back(fmt::format("needs {:.2f} GB (weights {:.2f}, KV cache {:.2f}, activations {:.2f}); {} has {:.0f} GB",
                                  g.memory_bytes / 1e9, g.weight_bytes / 1e9, g.kv_cache_bytes / 1e9, g.compute_bytes / 1e9,
                                  target.gpu().name, target.gpu().memory.dram.size_gb));
  }
  if (ctx > spec.context) {
    g.notes.push_back(fmt::format("{} tokens exceed the {} the model was trained for", ctx, spec.context));
  }
  g.notes.push_back(fmt::format("llama.cpp's {} kernels for a {} decoder in {}, the KV cache in fp16{}{}", backend,
                                spec.architecture, g.weights, o.flash_attention ? ", flash attention" : "",
                                (backend == "cuda" || backend == "hip") && block_format(base_type(*weights)).block_elements > 1
                                    ? fmt::format(", quantized prompt products by {}", cuda_prompt == "mmq" ? "mul_mat_q (int8)" : "dequantize + cuBLAS (fp16)")
                                    : ""));
  g.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

GpuValue gpu_value(const GenerationPrediction& g, const GpuPrice& price) {
  GpuValue v;
  const double tps = g.decode.tokens_per_s;
  if (price.usd <= 0 || tps <= 0) return v;
  if (price.per_hour) {
    v.tokens_per_usd = tps * 3600 / price.usd;
    v.usd_per_million_tokens = 1e6 / v.tokens_per_usd;
  } else {
    v.tokens_per_s_per_kusd = tps / (price.usd / 1000);
  }
  return v;
}

std::string generation_json(const GenerationPrediction& g) {
  auto phase = [](const GenerationPhase& p) {
    nlohmann::json ks = nlohmann::json::array();
    for (const GenerationKernel& k : p.kernels_of_step) {
      ks.push_back({{"name", k.name}, {"op", k.op}, {"count", k.count}, {"us", k.cost.total_us},
                    {"bound", std::string(bound_name(k.cost.bound))}, {"tile", tile_notation(k.cost.tile)},
                    {"dram_bytes", k.cost.dram_bytes}, {"achieved_dram_gbps", k.cost.achieved_dram_gbps},
                    {"work", work_to_json(k.work)}});
    }
    return nlohmann::json{{"tokens", p.tokens}, {"steps", p.steps}, {"time_us", p.time_us}, {"tokens_per_s", p.tokens_per_s},
                          {"kernels_us", p.kernels_us}, {"launch_us", p.launch_us}, {"kernels", p.kernels},
                          {"dram_bytes", p.dram_bytes}, {"bound", p.bound}, {"bound_share", p.bound_share},
                          {"energy_j", p.energy_j}, {"j_per_token", p.j_per_token}, {"kernels_of_step", ks}};
  };
  nlohmann::json j = {{"schema", "gpusim.generation/1"},
                      {"gpu", g.gpu},
                      {"model", g.model},
                      {"weights", g.weights},
                      {"backend", g.backend},
                      {"runtime", g.runtime},
                      {"kernel_gap_us", g.kernel_gap_us},
                      {"prompt", g.prompt},
                      {"generate", g.generate},
                      {"batch", g.batch},
                      {"ttft_us", g.ttft_us},
                      {"token_first_us", g.token_first_us},
                      {"token_last_us", g.token_last_us},
                      {"token_mean_us", g.token_mean_us},
                      {"total_us", g.total_us},
                      {"energy_j", g.energy_j},
                      {"prefill", phase(g.prefill)},
                      {"decode", phase(g.decode)},
                      {"memory", {{"weights_bytes", g.weight_bytes}, {"kv_cache_bytes", g.kv_cache_bytes},
                                  {"compute_bytes", g.compute_bytes}, {"total_bytes", g.memory_bytes},
                                  {"fits", g.fits_in_memory}}},
                      {"planning_ms", g.planning_ms},
                      {"notes", g.notes}};
  return j.dump(2);
}

Result<std::pair<std::string, GpuPrice>> parse_gpu_price(const std::string& text) {
  const size_t eq = text.rfind('=');
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("price \"{}\": {}; expected GPU=USD (what the card costs to buy) or GPU=USD/h (to "
                                  "rent an hour), e.g. nvidia-rtx-4090=1599 or nvidia-h100-sxm=2.49/h",
                                  text, why));
  };
  if (eq == std::string::npos || eq == 0) return bad("no GPU name before '='");
  std::string v = text.substr(eq + 1);
  GpuPrice p;
  if (v.size() > 2 && v.ends_with("/h")) {
    p.per_hour = true;
    v.resize(v.size() - 2);
  }
  if (!v.empty() && v.front() == '$') v.erase(0, 1);
  double usd = 0;
  size_t used = 0;
  try {
    usd = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) return bad(fmt::format("\"{}\" is not a number of dollars", v));
  if (!(usd > 0 && usd < 1e9)) return bad(fmt::format("{} dollars is out of range; give more than 0", usd));
  p.usd = usd;
  return std::make_pair(text.substr(0, eq), p);
}

Result<std::map<std::string, GpuPrice>> gpu_prices(const std::vector<std::string>& texts,
                                                    const std::vector<GenerationPrediction>& rows) {
  std::map<std::string, GpuPrice> out;
  for (const std::string& text : texts) {
    auto p = parse_gpu_price(text);
    if (!p) return p.error();
    if (std::none_of(rows.begin(), rows.end(), [&](const GenerationPrediction& g) { return g.gpu == p->first; })) {
      std::vector<std::string> names;
      for (const GenerationPrediction& g : rows) names.push_back(g.gpu);
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("price \"{}\": \"{}\" is not one of the GPUs compared ({}); price those", text,
                                    p->first, fmt::join(names, ", ")));
    }
    out[p->first] = p->second;
  }
  return out;
}

std::string compare_generation_json(const std::string& model, const std::vector<GenerationPrediction>& rows,
                                    const std::map<std::string, GpuPrice>& prices) {
  nlohmann::json out = nlohmann::json::array();
  const double first = rows.empty() ? 0.0 : rows.front().total_us;
  for (const GenerationPrediction& g : rows) {
    nlohmann::json value = nullptr;
    if (auto it = prices.find(g.gpu); it != prices.end()) {
      const GpuValue v = gpu_value(g, it->second);
      value = {{"usd", it->second.usd}, {"per", it->second.per_hour ? "hour" : "purchase"}};
      if (it->second.per_hour) {
        value["decode_tokens_per_usd"] = v.tokens_per_usd;
        value["usd_per_million_tokens"] = v.usd_per_million_tokens;
      } else {
        value["decode_tokens_per_s_per_kusd"] = v.tokens_per_s_per_kusd;
      }
    }
    out.push_back({{"gpu", g.gpu},
                   {"weights", g.weights},
                   {"backend", g.backend},
                   {"runtime", g.runtime},
                   {"ttft_us", g.ttft_us},
                   {"token_mean_us", g.token_mean_us},
                   {"prefill_tokens_per_s", g.prefill.tokens_per_s},
                   {"decode_tokens_per_s", g.decode.tokens_per_s},
                   {"total_us", g.total_us},
                   {"speedup", g.total_us > 0 ? first / g.total_us : 0.0},
                   {"prefill_bound", g.prefill.bound},
                   {"decode_bound", g.decode.bound},
                   {"memory_bytes", g.memory_bytes},
                   {"fits", g.fits_in_memory},
                   {"energy_j", g.energy_j},
                   {"prefill_j_per_token", g.prefill.j_per_token},
                   {"decode_j_per_token", g.decode.j_per_token},
                   {"value", value},
                   {"planning_ms", g.planning_ms}});
  }
  nlohmann::json j = {{"schema", "gpusim.compare-generation/1"}, {"model", model}, {"gpus", out}};
  if (!rows.empty()) {
    j["prompt"] = rows.front().prompt;
    j["generate"] = rows.front().generate;
    j["batch"] = rows.front().batch;
  }
  return j.dump(2);
}

}  // namespace gpusim
