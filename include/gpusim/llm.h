// Language models as workloads: a decoder described by its shapes (the llama family), its weights
// as a quantizer stores them (GGUF's block formats and llama.cpp's file types, byte-exact), and a
// generation — a prompt pushed through in one pass, then tokens generated one at a time over a
// growing KV cache — predicted kernel by kernel as the runtime launches them.
//
// Usage:
//   auto spec = gpusim::load_llm_spec("models/llm/llama-2-7b.yaml");
//   auto gpu = gpusim::find_profile("rtx-3060", gpusim::default_profile_dirs());
//   gpusim::GenerationOptions o;  o.weights = "q4_0";  o.prompt = 512;  o.generate = 128;
//   auto g = gpusim::predict_generation(*spec, gpusim::library_target(*gpu), o);
//   fmt::print("TTFT {:.1f} ms, {:.1f} tokens/s\n", g->ttft_us / 1e3, g->decode.tokens_per_s);
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/kernel_cost.h"
#include "gpusim/predict.h"
#include "gpusim/result.h"
#include "gpusim/runtime.h"
#include "gpusim/data_dirs.h"
#include "gpusim/target.h"

namespace gpusim {

// --- weight formats

// ggml's tensor types (ggml/include/ggml.h), the ones llama.cpp's file types use for a llama model.
enum class GgmlType { kF32, kF16, kBF16, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K };

// One block format: `block_elements` weights of a row stored in `block_bytes` bytes, quants and
// scales together (ggml/src/ggml-common.h: block_q4_0 is an fp16 scale and 16 bytes of nibbles for
// 32 weights). `dequant_ops`: vector instructions a kernel spends per weight to unpack it and apply
// its scales before the multiply-add (core/llm/README.md counts them); 0 for plain floats.
struct GPUSIM_API BlockFormat {
  GgmlType type = GgmlType::kF32;
  std::string_view name;  // "q4_0", as llama.cpp prints it lower-cased
  int block_elements = 1;
  int block_bytes = 4;
  double dequant_ops = 0;
  double bits() const { return 8.0 * block_bytes / block_elements; }
};
GPUSIM_API const BlockFormat& block_format(GgmlType t);
GPUSIM_API const std::vector<BlockFormat>& block_formats();
// "q4_0", "Q4_0", "f16", "bf16", ...: nullopt for names of no format here.
GPUSIM_API std::optional<GgmlType> ggml_type_from_name(std::string_view name);
// Bytes of a [rows, row_elements] weight in `t`: whole blocks per row.
GPUSIM_API int64_t ggml_bytes(GgmlType t, int64_t rows, int64_t row_elements);

// llama.cpp's file types (llama_ftype, what `llama-quantize` is asked for and `llama-bench` prints
// as the model's type): "F16", "Q8_0", "Q4_0", "Q4_K_M", ... The names this project models.
GPUSIM_API const std::vector<std::string>& llm_file_types();
// The canonical name of a file type spelled in any case ("q4_k_m" -> "Q4_K_M"); nullopt otherwise.
GPUSIM_API std::optional<std::string> llm_file_type(std::string_view name);

// --- model description

// A decoder of the llama family (Llama 1-3, Mistral, Qwen2 without biases, ...): pre-norm RMSNorm,
// rotary positions, grouped-query attention, a SwiGLU feed-forward. Read from a gpusim.llm/1 YAML
// file or a Hugging Face config.json (core/llm/README.md).
struct GPUSIM_API LlmSpec {
  std::string name;
  std::string architecture = "llama";
  std::string source_path;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t ffn = 0;        // the feed-forward's inner width
  int64_t heads = 0;
  int64_t kv_heads = 0;   // = heads without grouped-query attention
  int64_t head_dim = 0;   // hidden / heads unless given
  int64_t vocab = 0;
  int64_t context = 4096; // the longest sequence it was trained for (a warning beyond it)
  bool tied_embeddings = false;  // the output projection is the token embedding
  // The parameters of its matrices and norms (the embedding counted once when tied).
  int64_t parameters() const;
};

GPUSIM_API Result<LlmSpec> load_llm_spec(const std::string& path);
// `text` as a gpusim.llm/1 YAML document or a config.json (JSON), `source` naming it in messages.
GPUSIM_API Result<LlmSpec> parse_llm_spec(const std::string& text, const std::string& source);
// Where model descriptions are found by name: $GPUSIM_LLM_PATH, <user config>/llm, then the
// installed <data>/llm (the bundled models/llm: llama-2-7b, llama-3-8b, llama-3-70b, ...).
GPUSIM_API std::vector<std::string> default_llm_dirs();
// NAME (NAME.yaml in `dirs`) or a path to a description file.
GPUSIM_API Result<LlmSpec> find_llm_spec(const std::string& name_or_path, const std::vector<std::string>& dirs);

// Whether a file is a model description this module reads (.yaml/.yml of schema gpusim.llm/1, or a
// .json with a llama-family "model_type"), without reporting why not.
GPUSIM_API bool is_llm_spec_file(const std::string& path);

// One weight tensor as llama.cpp names and stores it.
struct GPUSIM_API LlmTensor {
  std::string name;          // "blk.0.attn_v.weight"
  int layer = -1;            // -1: not in a layer
  int64_t rows = 0;          // outputs (ggml's ne[1])
  int64_t row_elements = 0;  // inputs (ggml's ne[0])
  GgmlType type = GgmlType::kF32;
  int64_t bytes = 0;
};
// Every weight of `spec` typed as llama-quantize types it for `file_type` (llama.cpp's
// llama_tensor_get_type: the output projection in Q6_K, K-quant mixes that keep some attn_v and
// ffn_down in more bits, norms in F32). Errors name the file type and the ones modelled.
GPUSIM_API Result<std::vector<LlmTensor>> llm_weights(const LlmSpec& spec, const std::string& file_type);

// --- generation

struct GPUSIM_API GenerationOptions {
  int64_t prompt = 512;    // tokens of the prompt, pushed through before the first token
  int64_t generate = 128;  // tokens generated one at a time after it
  int64_t batch = 1;       // sequences generated together (each with its own cache)
  int64_t ubatch = 512;    // rows a prefill pass takes at once (llama.cpp's n_ubatch)
  std::string weights = "F16";  // a llama.cpp file type (llm_file_types)
  bool flash_attention = false;  // llama.cpp's -fa 1: one fused attention kernel
  // An ONNX decoder of more nodes is refused before its passes (0: no limit; ImportOptions::max_nodes).
  int64_t max_nodes = 0;
  // The runtime that launches the kernels: its default_us is the gap after each kernel (the device's
  // dispatch from one to the next). Unset: llama.cpp's for the backend (runtimes/llamacpp-*.yaml).
  std::optional<RuntimeModel> runtime;
  // The device's gap after each kernel, microseconds, over the runtime's default_us (validation sets
  // the one it fitted).
  std::optional<double> kernel_gap_us;
  // The host that drives the GPU (host.h, as PredictRequest::host): llama.cpp's runtimes give the
  // device's gap between kernels, which a host does not change, and the prediction says so.
  std::string host;
  // The llama.cpp backend whose kernels run: "cuda", "metal", "vulkan", "hip"; "" = the GPU
  // vendor's (Apple: metal, AMD: hip, NVIDIA: cuda, others: vulkan).
  std::string backend;
  // How the cuda and hip backends multiply quantized weights by more than 8 rows (a prompt):
  // "mmq", llama.cpp's mul_mat_q on int8 (the default since llama.cpp PR #8075, June 2024, where the
  // GPU has int8 matrix units or only integer dot products), or "cublas", the builds before it and
  // GPUs with fp16 matrix units but no int8 ones (V100): a kernel dequantizes the weight to fp16,
  // then cuBLAS multiplies. "": as current llama.cpp chooses for the GPU. A GPU without fp16 matrix
  // units (Pascal) runs mmq on integer dot products whichever is asked, as every build did.
  std::string cuda_prompt;
};

// A kernel of a step, with how many times the step launches it.
struct GPUSIM_API GenerationKernel {
  std::string name;  // "attn_q", "ffn_down", "rms_norm", "attention"
  std::string op;    // what ggml calls it: "mul_mat", "rms_norm", "rope", "flash_attn_ext"
  int count = 1;     // launches in one step (per layer ones x layers)
  KernelWork work;
  KernelCost cost;
};

struct GPUSIM_API GenerationPhase {
  std::string name;  // "prefill" or "decode"
  int64_t tokens = 0;
  int64_t steps = 0;         // passes (ubatches for prefill, tokens for decode)
  double time_us = 0;
  double tokens_per_s = 0;
  double kernels_us = 0;     // sum of kernel times
  double launch_us = 0;      // time the GPU waited for launches
  int64_t kernels = 0;       // kernels launched
  double dram_bytes = 0;
  // Share of kernel time per bound ("dram", "compute", "latency", "l2") and the largest.
  std::map<std::string, double> bound_share;
  std::string bound;
  // Energy: the idle power over the phase, plus the dynamic power (TDP - idle) while a kernel keeps
  // its bottleneck busy (predict's model); per token of the phase.
  double energy_j = 0;
  double j_per_token = 0;
  // One step's kernels (the first decode step; a full prefill pass), most expensive first.
  std::vector<GenerationKernel> kernels_of_step;
};

struct GPUSIM_API GenerationPrediction {
  std::string gpu, model, weights, backend, runtime;
  int64_t prompt = 0, generate = 0, batch = 1;
  GenerationPhase prefill, decode;
  double ttft_us = 0;            // the prompt's pass: time to the first token
  double token_first_us = 0;     // the first generated token's step (cache = prompt)
  double token_last_us = 0;      // the last one's (cache = prompt + generate - 1)
  double token_mean_us = 0;
  double total_us = 0;           // prefill + every decode step
  double energy_j = 0;           // both phases'
  int64_t weight_bytes = 0;
  int64_t kv_cache_bytes = 0;    // f16 keys and values for prompt + generate tokens, every sequence
  int64_t compute_bytes = 0;     // the largest pass's activations
  int64_t memory_bytes = 0;
  bool fits_in_memory = true;
  double kernel_gap_us = 0;      // the gap after each kernel it was predicted with
  double planning_ms = 0;        // wall time of this prediction
  std::vector<std::string> notes;
};

// Predicts `spec` generating per `opts` on `target` (its profile, tiles and TF32 permission).
// Errors name the option and its allowed values.
GPUSIM_API Result<GenerationPrediction> predict_generation(const LlmSpec& spec, const Target& target,
                                                           const GenerationOptions& opts);

// The llama.cpp backend a GPU runs by default (metal on Apple, hip on AMD, cuda on NVIDIA, vulkan
// otherwise), and the runtime file that describes its launches ("llamacpp-cuda").
GPUSIM_API std::string default_llm_backend(const GpuProfile& gpu);
GPUSIM_API std::string llm_runtime_name(const std::string& backend);
// A backend as llama-bench prints it ("CUDA", "ROCm", "Vulkan", "Metal,BLAS", "SYCL") or as a user
// writes it, as the name gpusim models it by: cuda, hip (ROCm and HIP), vulkan, metal or sycl. A
// list takes its GPU backend ("Metal,BLAS" -> metal); a CPU-only one ("CPU", "BLAS") or an unknown
// name is an error saying which are modelled.
GPUSIM_API Result<std::string> llm_backend(const std::string& printed);

GPUSIM_API std::string generation_json(const GenerationPrediction& g);
// gpusim.compare-generation/1: the same generation on several GPUs, a row each (time to first
// token, per-token latency, tokens/s, speed-up over the first row, each phase's bound, memory).
// What a GPU costs, for value figures: to buy (USD), or to rent (USD an hour).
struct GPUSIM_API GpuPrice {
  double usd = 0;
  bool per_hour = false;
};
// "GPU=USD" (to buy) or "GPU=USD/h" (to rent); errors show both forms.
GPUSIM_API Result<std::pair<std::string, GpuPrice>> parse_gpu_price(const std::string& text);
// Each of `texts` parsed, and each naming a GPU of `rows` (as a row names it: its profile's name).
GPUSIM_API Result<std::map<std::string, GpuPrice>> gpu_prices(const std::vector<std::string>& texts,
                                                               const std::vector<GenerationPrediction>& rows);
// A generation's value at a price, from its decode tokens/s: per thousand dollars of purchase price,
// or tokens a dollar of rent (and dollars per million tokens). Zero where it does not apply.
struct GPUSIM_API GpuValue {
  double tokens_per_s_per_kusd = 0;
  double tokens_per_usd = 0;
  double usd_per_million_tokens = 0;
};
GPUSIM_API GpuValue gpu_value(const GenerationPrediction& g, const GpuPrice& price);
// `prices` by GPU name add each priced row's value (rows without a price have none); every row has
// its energy and joules per token of each phase.
GPUSIM_API std::string compare_generation_json(const std::string& model, const std::vector<GenerationPrediction>& rows,
                                               const std::map<std::string, GpuPrice>& prices = {});

// --- ONNX decoders with a KV cache

// Whether a graph takes a KV cache: an input named past_key_values.* (or *past_key* / *past_value*).
GPUSIM_API bool is_decoder_with_cache(const Graph& g);

// The generation of the ONNX decoder at `path` (tools/export_llama_onnx.py writes them; Optimum's
// and transformers.js's exports take the same inputs): its prompt's pass (sequence = opts.prompt,
// an empty cache) and each token's step (sequence 1, a cache of prompt + i), every pass the graph
// predicted as `predict` predicts it on `target` with `po` (dtype, runtime). The graph's inputs are
// sized by name: input_ids and position_ids [batch, sequence], attention_mask [batch, past +
// sequence], each past_key_values input [batch, heads, past, head_dim]; another input is an error
// naming it. Of opts, prompt, generate and batch apply (the rest describe llama.cpp). The cache's
// bytes are the cache inputs' at prompt + generate tokens.
GPUSIM_API Result<GenerationPrediction> predict_decoder_generation(const std::string& path, const Target& target,
                                                                   const GenerationOptions& opts,
                                                                   const PredictOptions& po = {});
// The same for a decoder's bytes (an upload); `name` stands for the file in messages and in the
// prediction's model.
GPUSIM_API Result<GenerationPrediction> predict_decoder_generation_bytes(std::string_view bytes, const std::string& name,
                                                                         const Target& target, const GenerationOptions& opts,
                                                                         const PredictOptions& po = {});

}  // namespace gpusim
