// Language models: weight formats byte-exact against the files llama-bench measured, the model
// description's errors, a generation's phases and memory, the quantized GEMV's price, and the
// llama-bench reader and validation.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gpusim/gpusim.h"
#include "gpusim/kernel_work.h"
#include "gpusim/llm.h"
#include "gpusim/onnx_import.h"
#include "gpusim/op_catalog.h"
#include "support/onnx_builder.h"
#include "support/fixtures.h"
#include "support/devices.h"
#include "support/run_cli.h"

using namespace gpusim;
namespace fs = std::filesystem;

namespace {

LlmSpec bundled(const std::string& name) {
  auto s = load_llm_spec(test::source_dir() + "/models/llm/" + name + ".yaml");
  REQUIRE(s);
  return *s;
}

double file_gib(const LlmSpec& s, const std::string& type) {
  auto w = llm_weights(s, type);
  REQUIRE(w);
  int64_t bytes = 0;
  for (const LlmTensor& t : *w) bytes += t.bytes;
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

GpuProfile profile(const std::string& name) {
  auto p = find_profile(name, {test::source_dir() + "/gpu_profiles"});
  REQUIRE(p);
  return *p;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (fs::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("GGUF block formats hold their bytes exactly", "[llm]") {
  CHECK(block_format(GgmlType::kQ4_0).bits() == 4.5);
  CHECK(block_format(GgmlType::kQ8_0).bits() == 8.5);
  CHECK(block_format(GgmlType::kQ4_K).bits() == 4.5);
  CHECK(block_format(GgmlType::kQ6_K).bits() == 6.5625);
  CHECK(block_format(GgmlType::kQ2_K).bits() == 2.625);
  CHECK(ggml_bytes(GgmlType::kQ4_0, 4096, 4096) == 4096 * 128 * 18);
  CHECK(ggml_type_from_name("Q4_K") == GgmlType::kQ4_K);
  CHECK_FALSE(ggml_type_from_name("q4_2").has_value());
  CHECK(llm_file_type("q4_k_m") == std::string("Q4_K_M"));
}

// The file sizes llama-bench printed for the models it measured (../shared/truth/llamacpp README and
// rows: model_size_gib, two decimals): llama-quantize's per-tensor types reproduce them.
TEST_CASE("llama.cpp file types reproduce the measured models' file sizes", "[llm]") {
  const LlmSpec l2 = bundled("llama-2-7b"), l3 = bundled("llama-3-8b"), l70 = bundled("llama-3-70b");
  CHECK(l2.parameters() == Approx(6.74e9).epsilon(0.002));
  CHECK(l3.parameters() == Approx(8.03e9).epsilon(0.002));
  CHECK(l70.parameters() == Approx(70.55e9).epsilon(0.002));
  const struct {
    const LlmSpec* spec;
    const char* type;
    double gib;
  } cases[] = {{&l2, "F16", 12.55},   {&l2, "Q8_0", 6.67}, {&l2, "Q4_0", 3.56},   {&l3, "F16", 14.96},
               {&l3, "Q8_0", 7.95},   {&l3, "Q4_0", 4.33}, {&l3, "Q4_K_M", 4.58}, {&l70, "Q4_K_M", 39.59}};
  for (const auto& c : cases) {
    INFO(c.spec->name << " " << c.type);
    CHECK(file_gib(*c.spec, c.type) == Approx(c.gib).margin(0.006));
  }
  // The mix: Q4_K_M keeps half of attn_v and ffn_down (use_more_bits) and the output in Q6_K.
  auto w = llm_weights(l3, "Q4_K_M");
  REQUIRE(w);
  int q6 = 0;
  for (const LlmTensor& t : *w) q6 += t.type == GgmlType::kQ6_K;
  CHECK(q6 == 2 * 16 + 1);
}

TEST_CASE("model description errors name the file, the field, the value and the fix", "[llm][errors]") {
  auto missing = parse_llm_spec("schema: gpusim.llm/1\nlayers: 2\nhidden: 64\nffn: 128\nheads: 4\n", "m.yaml");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Catch::Contains("m.yaml: vocab: is missing"));
  auto schema = parse_llm_spec("schema: gpusim.profile/1\n", "p.yaml");
  REQUIRE_FALSE(schema);
  CHECK_THAT(schema.error().message, Catch::Contains("p.yaml: schema") && Catch::Contains("gpusim.llm/1"));
  auto gqa = parse_llm_spec("schema: gpusim.llm/1\nlayers: 2\nhidden: 64\nffn: 128\nheads: 4\nkv_heads: 3\nvocab: 10\n", "g.yaml");
  REQUIRE_FALSE(gqa);
  CHECK_THAT(gqa.error().message, Catch::Contains("kv_heads: 3 does not divide heads (4)"));
  auto typo = parse_llm_spec("schema: gpusim.llm/1\nlayer: 2\n", "t.yaml");
  REQUIRE_FALSE(typo);
  CHECK_THAT(typo.error().message, Catch::Contains("t.yaml: layer: is not a field of gpusim.llm/1"));
  auto word = parse_llm_spec("schema: gpusim.llm/1\nlayers: two\nhidden: 64\nffn: 128\nheads: 4\nvocab: 10\n", "w.yaml");
  REQUIRE_FALSE(word);
  CHECK_THAT(word.error().message, Catch::Contains("w.yaml: layers: \"two\" is not a whole number"));
  auto bert = parse_llm_spec(R"({"model_type": "bert", "hidden_size": 768})", "config.json");
  REQUIRE_FALSE(bert);
  CHECK_THAT(bert.error().message, Catch::Contains("config.json: model_type: \"bert\" is not a llama-family decoder"));
  // Shapes that do not fit together: a width no whole number of heads divides, and KV heads or a
  // head width of 0 given outright (0 stood for "absent" and was taken as the default).
  const std::string base = R"("model_type": "llama", "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 10)";
  auto odd = parse_llm_spec("{" + base + R"(, "hidden_size": 4097, "num_attention_heads": 32})", "config.json");
  REQUIRE_FALSE(odd);
  CHECK_THAT(odd.error().message, Catch::Contains("config.json: hidden: 4097 is not a multiple of heads (32)") &&
                                      Catch::Contains("give head_dim"));
  auto no_kv = parse_llm_spec("{" + base + R"(, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 0})",
                              "config.json");
  REQUIRE_FALSE(no_kv);
  CHECK_THAT(no_kv.error().message, Catch::Contains("config.json: num_key_value_heads: 0 is out of range"));
  auto no_hd = parse_llm_spec("{" + base + R"(, "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 0})", "config.json");
  REQUIRE_FALSE(no_hd);
  CHECK_THAT(no_hd.error().message, Catch::Contains("config.json: head_dim: 0 is out of range"));
  auto yaml_kv = parse_llm_spec("schema: gpusim.llm/1\nlayers: 2\nhidden: 64\nffn: 128\nheads: 4\nkv_heads: 0\nvocab: 10\n", "k.yaml");
  REQUIRE_FALSE(yaml_kv);
  CHECK_THAT(yaml_kv.error().message, Catch::Contains("k.yaml: kv_heads: 0 is out of range"));
  // head_dim given: the width need not be heads x head_dim (as in several published models).
  CHECK(parse_llm_spec("{" + base + R"(, "hidden_size": 4097, "num_attention_heads": 32, "head_dim": 128})", "config.json"));
  auto ft = llm_weights(bundled("tiny-llama-test"), "Q4_9");
  REQUIRE_FALSE(ft);
  CHECK_THAT(ft.error().message, Catch::Contains("weights \"Q4_9\"") && Catch::Contains("Q4_K_M"));
}

TEST_CASE("a Hugging Face config.json reads as the same description", "[llm]") {
  auto j = parse_llm_spec(R"({"model_type": "llama", "_name_or_path": "meta-llama/Meta-Llama-3-8B", "num_hidden_layers": 32,
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 8192, "tie_word_embeddings": false})", "config.json");
  REQUIRE(j);
  const LlmSpec y = bundled("llama-3-8b");
  CHECK(j->parameters() == y.parameters());
  CHECK(j->head_dim == 128);
  CHECK(j->kv_heads == 8);
}

TEST_CASE("a quantized matrix-vector product streams its packed weight and pays its unpacking", "[llm][sim]") {
  const DeviceModel d = make_device(profile("nvidia-rtx-3090"));
  KernelWork f16 = gemm_work(DType::kFloat16, 1, 1, 4096, 4096);
  f16.b_shared = true;
  KernelWork q4 = f16;
  q4.b_bits = 4.5;
  q4.dequant_ops = 2;
  const KernelCost cf = kernel_cost(f16, choose_tile(f16, d), d);
  const KernelCost cq = kernel_cost(q4, choose_tile(q4, d), d);
  CHECK(cq.dram_bytes == Approx(4096.0 * 4096 * 4.5 / 8).epsilon(0.01));
  CHECK(cf.dram_bytes == Approx(4096.0 * 4096 * 2).epsilon(0.01));
  CHECK(cq.bound == Bound::kDram);
  CHECK(cq.total_us < cf.total_us);
  // Unpacking is work: the same bytes with more instructions a weight never run faster.
  KernelWork heavy = q4;
  heavy.dequant_ops = 40;
  CHECK(kernel_cost(heavy, choose_tile(q4, d), d).compute_us > cq.compute_us);
}

TEST_CASE("a generation reports its phases, per-token latency and memory", "[llm]") {
  const LlmSpec spec = bundled("llama-2-7b");
  const GpuProfile gpu = profile("nvidia-rtx-3060");
  GenerationOptions o;
  o.weights = "Q4_0";
  o.prompt = 512;
  o.generate = 128;
  auto g = predict_generation(spec, library_target(gpu), o);
  REQUIRE(g);
  CHECK(g->ttft_us == g->prefill.time_us);
  CHECK(g->prefill.tokens_per_s > g->decode.tokens_per_s);
  CHECK(g->decode.steps == 128);
  CHECK(g->token_last_us >= g->token_first_us);
  CHECK(g->decode.bound == "dram");
  CHECK(g->total_us == Approx(g->prefill.time_us + g->decode.time_us));
  // Memory: the weights as stored, and fp16 keys and values for 640 tokens of 32 layers of 4096.
  CHECK(g->weight_bytes == Approx(3.56 * 1024 * 1024 * 1024).epsilon(0.002));
  CHECK(g->kv_cache_bytes == int64_t{2} * 32 * 4096 * 640 * 2);
  CHECK(g->fits_in_memory);
  // A decode step streams every weight once: its DRAM bytes are at least the weights'.
  CHECK(g->decode.dram_bytes / 128 >= 0.99 * static_cast<double>(g->weight_bytes));
  // Q4_0 generates faster than F16 (fewer bytes a token); F16 does not fit a 12 GB card with room.
  o.weights = "F16";
  auto f = predict_generation(spec, library_target(gpu), o);
  REQUIRE(f);
  CHECK(f->decode.tokens_per_s < g->decode.tokens_per_s);
  CHECK_FALSE(f->fits_in_memory);
  CHECK_THAT(f->notes.front(), Catch::Contains("needs") && Catch::Contains("GB"));
  // The JSON document carries the same figures.
  CHECK_THAT(generation_json(*g), Catch::Contains("\"schema\": \"gpusim.generation/1\"") && Catch::Contains("\"ttft_us\""));
}

TEST_CASE("a prompt's quantized products run as mul_mat_q or as dequantize and cuBLAS, as the build chose", "[llm]") {
  const LlmSpec spec = bundled("llama-2-7b");
  const Target t = library_target(profile("nvidia-rtx-3090"));
  GenerationOptions o;
  o.weights = "Q4_0";
  o.prompt = 512;
  o.generate = 0;
  auto mmq = predict_generation(spec, t, o);
  o.cuda_prompt = "cublas";
  auto cublas = predict_generation(spec, t, o);
  REQUIRE(mmq);
  REQUIRE(cublas);
  auto find = [](const GenerationPrediction& g, const std::string& name) -> const GenerationKernel* {
    for (const GenerationKernel& k : g.prefill.kernels_of_step) {
      if (k.name == name) return &k;
    }
    return nullptr;
  };
  // MMQ: int8 products with a rescale a 32-element block; no fp16 copy of the weights.
  const GenerationKernel* q = find(*mmq, "ffn_up");
  REQUIRE(q);
  CHECK(q->work.dtype == DType::kInt8);
  CHECK(q->work.k_block == 32);
  CHECK(find(*mmq, "dequantize") == nullptr);
  // Older builds: a dequantize kernel writes the fp16 weight, which cuBLAS then reads.
  const GenerationKernel* dq = find(*cublas, "dequantize");
  REQUIRE(dq);
  CHECK(dq->work.bytes_written == 2 * 4096 * 11008);
  const GenerationKernel* f = find(*cublas, "ffn_up");
  REQUIRE(f);
  CHECK(f->work.dtype == DType::kFloat16);
  CHECK(f->work.accumulate_half);
  // Decode is matrix-vector either way: the same.
  o.prompt = 0;
  o.generate = 8;
  auto d1 = predict_generation(spec, t, o);
  o.cuda_prompt = "";
  auto d2 = predict_generation(spec, t, o);
  REQUIRE(d1);
  REQUIRE(d2);
  CHECK(d1->decode.time_us == d2->decode.time_us);
  o.cuda_prompt = "dp4a";
  auto bad = predict_generation(spec, t, o);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("cuda_prompt \"dp4a\"") && Catch::Contains("mmq or cublas"));
}

TEST_CASE("a per-block rescale of integer products adds vector work to the main loop", "[llm][sim]") {
  const DeviceModel d = make_device(profile("nvidia-rtx-3090"));
  KernelWork w = gemm_work(DType::kInt8, 1, 512, 4096, 4096);
  w.b_shared = true;
  const TileConfig tile = choose_tile(w, d);
  const KernelCost plain = kernel_cost(w, tile, d);
  w.k_block = 32;
  const KernelCost scaled = kernel_cost(w, tile, d);
  CHECK(plain.matrix_units);
  CHECK(scaled.compute_us > 1.5 * plain.compute_us);
  // A finer block rescales more often.
  w.k_block = 16;
  CHECK(kernel_cost(w, tile, d).compute_us > scaled.compute_us);
}

TEST_CASE("generation options out of range are refused with the allowed values", "[llm][errors]") {
  const LlmSpec spec = bundled("tiny-llama-test");
  const Target t = library_target(profile("nvidia-rtx-3060"));
  GenerationOptions o;
  o.prompt = 0;
  o.generate = 0;
  auto none = predict_generation(spec, t, o);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Catch::Contains("nothing to predict"));
  o.generate = 4;
  o.backend = "opencl";
  auto be = predict_generation(spec, t, o);
  REQUIRE_FALSE(be);
  CHECK_THAT(be.error().message, Catch::Contains("backend \"opencl\"") && Catch::Contains("cuda, hip (ROCm), vulkan, metal or sycl"));
  o.backend = "";
  o.batch = 0;
  auto b = predict_generation(spec, t, o);
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error().message, Catch::Contains("batch: 0 is out of range"));
  // Sizes whose counts would not fit 64 bits are refused, not priced.
  LlmSpec wide = spec;
  wide.hidden = 1 << 17;
  wide.ffn = 1 << 19;
  o.batch = 4096;
  o.ubatch = 65536;
  o.prompt = 1 << 22;
  auto big = predict_generation(wide, t, o);
  REQUIRE_FALSE(big);
  CHECK_THAT(big.error().message, Catch::Contains("too large to price"));
  // A long prompt in many passes is priced at sampled passes, not pass by pass.
  o.batch = 1;
  o.ubatch = 1;
  o.prompt = 100000;
  o.generate = 0;
  auto many = predict_generation(spec, t, o);
  o.prompt = 1;
  auto single = predict_generation(spec, t, o);
  REQUIRE(many);
  REQUIRE(single);
  CHECK(many->prefill.steps == 100000);
  CHECK(many->prefill.kernels == 100000 * single->prefill.kernels);
  // Later passes attend over a longer cache: none is cheaper than the first.
  CHECK(many->prefill.time_us >= 100000 * single->prefill.time_us);
}

TEST_CASE("a prompt not a multiple of ubatch ends with a shorter pass", "[llm]") {
  const LlmSpec spec = bundled("tiny-llama-test");
  const Target t = library_target(profile("nvidia-rtx-3060"));
  GenerationOptions o;
  o.prompt = 300;
  o.generate = 0;
  o.ubatch = 128;
  auto g = predict_generation(spec, t, o);
  REQUIRE(g);
  CHECK(g->prefill.steps == 3);
  CHECK(g->prefill.tokens == 300);
  o.ubatch = 512;
  auto one = predict_generation(spec, t, o);
  REQUIRE(one);
  CHECK(one->prefill.steps == 1);
}

TEST_CASE("llama-bench rows are read as whole-model records of a generation", "[llm][truth]") {
  const std::string csv = write_file(
      "gpusim_llamacpp_sample.csv",
      "source_url,gpu,gpu_norm,backend,model,model_size_gib,quant,test,tokens_per_s,n_ubatch,flash_attn,build\n"
      "x,NVIDIA GeForce RTX 3090,RTX 3090,CUDA,llama 7B,3.56,Q4_0,tg128,158.16,,0,c76b420\n"
      "x,NVIDIA GeForce RTX 3090,RTX 3090,CUDA,llama 7B,3.56,Q4_0,pp512,5174.69,,0,c76b420\n"
      "x,Apple M2 Max (38-core GPU),Apple M2 Max (38-core GPU),Metal,llama 7B (Llama-2-7B),12.55,F16,tg128,24.65,,,\n"
      "x,NVIDIA RTX A6000,RTX A6000,CUDA,llama 8B,4.58,Q4_K_M,pp512,3780.55,,,4426e298 (2824)\n");
  auto recs = read_measurements(csv);
  REQUIRE(recs);
  REQUIRE(recs->size() == 4);
  // Builds before llama.cpp PR #8075 (b3216) ran a prompt's quantized products through cuBLAS.
  CHECK((*recs)[3].config.at("cuda_prompt") == "cublas");
  CHECK((*recs)[1].config.count("cuda_prompt") == 0);
  CHECK((*recs)[3].op == "llama-3-8b");
  const Measurement& tg = (*recs)[0];
  CHECK(tg.op == "llama-2-7b");
  CHECK(tg.op_class == "model");
  CHECK(tg.gpu == "NVIDIA GeForce RTX 3090");
  CHECK(tg.backend == "cuda");
  CHECK(tg.dims.at("generate") == 128);
  CHECK(tg.time_us == Approx(128 / 158.16 * 1e6));
  CHECK(tg.config.at("family") == "llm");
  CHECK(tg.config.at("weights") == "Q4_0");
  CHECK((*recs)[1].dims.at("prompt") == 512);
  // Validated: each row predicted as a generation on its GPU's profile.
  ValidateOptions vo;
  vo.profile_dirs = {test::source_dir() + "/gpu_profiles"};
  auto rep = validate(*recs, vo);
  REQUIRE(rep);
  REQUIRE(rep->llm.rows.size() == 4);
  for (const LlmRow& r : rep->llm.rows) {
    INFO(r.gpu << " " << r.test);
    CHECK(r.predicted_us > 0);
    CHECK(r.kernels > 0);
  }
  CHECK(rep->llm.gaps.count("cuda") == 1);
}

TEST_CASE("leave one architecture out fits a GPU's kernel gap on other architectures only", "[llm][truth]") {
  // Two Ampere cards and one Ada card on CUDA: held out by architecture, the 3090 and the A6000 are
  // both priced with the gap of the 4090's rows alone; held out one by one, each sees the other.
  const std::string csv = write_file(
      "gpusim_llamacpp_loao.csv",
      "source_url,gpu,gpu_norm,backend,model,model_size_gib,quant,test,tokens_per_s,n_ubatch,flash_attn,build\n"
      "x,NVIDIA GeForce RTX 3090,RTX 3090,CUDA,llama 7B,3.56,Q4_0,tg128,158.16,,0,c76b420\n"
      "x,NVIDIA RTX A6000,RTX A6000,CUDA,llama 7B,3.56,Q4_0,tg128,140.0,,0,c76b420\n"
      "x,NVIDIA GeForce RTX 4090,RTX 4090,CUDA,llama 7B,3.56,Q4_0,tg128,180.0,,0,c76b420\n");
  auto recs = read_measurements(csv);
  REQUIRE(recs);
  ValidateOptions vo;
  vo.profile_dirs = {test::source_dir() + "/gpu_profiles"};
  const std::map<std::string, std::string> arch = {{"NVIDIA GeForce RTX 3090", "Ampere"},
                                                   {"NVIDIA RTX A6000", "Ampere"},
                                                   {"NVIDIA GeForce RTX 4090", "Ada"}};
  auto loao = validate_llm(*recs, vo, true, arch);
  auto logo = validate_llm(*recs, vo, true);
  REQUIRE(loao);
  REQUIRE(logo);
  CHECK(loao->leave_one_architecture_out);
  CHECK_FALSE(logo->leave_one_architecture_out);
  std::map<std::string, double> a, g;
  for (const LlmRow& r : loao->rows) a[r.gpu] = r.gap_us;
  for (const LlmRow& r : logo->rows) g[r.gpu] = r.gap_us;
  REQUIRE(a.size() == 3);
  CHECK(a["NVIDIA GeForce RTX 3090"] == Approx(a["NVIDIA RTX A6000"]));
  CHECK(g["NVIDIA GeForce RTX 3090"] != Approx(g["NVIDIA RTX A6000"]));
  // The Ada card is alone in its architecture: both ways, it is fitted on the two Ampere cards.
  CHECK(a["NVIDIA GeForce RTX 4090"] == Approx(g["NVIDIA GeForce RTX 4090"]));
}

TEST_CASE("a quantized-over-F16 ratio pairs rows of one build, a page and date standing for an unnamed one", "[llm][truth]") {
  // The F16 and first Q4_0 rows come from one thread; the second Q4_0 row, 0.8x as fast, from a
  // pull request a year earlier. Neither names its build.
  const std::string csv = write_file(
      "gpusim_llamacpp_builds.csv",
      "source_url,date,gpu,gpu_norm,backend,model,quant,test,tokens_per_s,build\n"
      "thread,,Apple M2 Max (30-core GPU),Apple M2 Max (30-core GPU),Metal,llama 7B,F16,pp512,600.46,\n"
      "thread,,Apple M2 Max (30-core GPU),Apple M2 Max (30-core GPU),Metal,llama 7B,Q4_0,pp512,537.6,\n"
      "pr,2023-09-01,Apple M2 Max (30-core GPU),Apple M2 Max (30-core GPU),Metal,llama 7B,Q4_0,pp512,433.35,\n");
  auto recs = read_measurements(csv);
  REQUIRE(recs);
  REQUIRE(recs->size() == 3);
  CHECK((*recs)[0].config.at("source_url") == "thread");
  ValidateOptions vo;
  vo.profile_dirs = {test::source_dir() + "/gpu_profiles"};
  auto rep = validate(*recs, vo);
  REQUIRE(rep);
  REQUIRE(rep->llm.ratios.size() == 1);
  const LlmRatio& r = rep->llm.ratios[0];
  CHECK(r.weights == "Q4_0");
  // The thread's own pair: 600.46 / 537.6 tokens/s, not the mean time of both Q4_0 rows.
  CHECK(r.measured == Approx(600.46 / 537.6));
}

TEST_CASE("llama-bench reader errors name the file, the line and the fix", "[llm][truth][errors]") {
  const std::string no_col = write_file("gpusim_llamacpp_nocol.csv", "gpu,gpu_norm,backend,model,quant,test\nA,A,CUDA,llama 7B,Q4_0,tg128\n");
  // Without tokens_per_s the file is not recognised as llama-bench's: read it with the reader itself.
  auto a = read_llamacpp_csv(no_col);
  REQUIRE_FALSE(a);
  CHECK_THAT(a.error().message, Catch::Contains("gpusim_llamacpp_nocol.csv:1") && Catch::Contains("tokens_per_s"));
  const std::string bad_test = write_file("gpusim_llamacpp_badtest.csv",
                                          "gpu,gpu_norm,backend,model,quant,test,tokens_per_s\nA,A,CUDA,llama 7B,Q4_0,t128,5\n");
  auto b = read_measurements(bad_test);
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error().message, Catch::Contains(":2: test \"t128\" is not ppN or tgN"));
  const std::string huge = write_file("gpusim_llamacpp_huge.csv",
                                      "gpu,gpu_norm,backend,model,quant,test,tokens_per_s\nA,A,CUDA,llama 7B,Q4_0,"
                                      "tg99999999999999999999999,5\n");
  auto h = read_measurements(huge);
  REQUIRE_FALSE(h);
  CHECK_THAT(h.error().message, Catch::Contains(":2: test \"tg9999") && Catch::Contains("N from 1 to"));
  const std::string ubatch = write_file("gpusim_llamacpp_ubatch.csv",
                                        "gpu,gpu_norm,backend,model,quant,test,tokens_per_s,n_ubatch,flash_attn\n"
                                        "A,A,CUDA,llama 7B,Q4_0,tg128,5,lots,0\n");
  auto u = read_measurements(ubatch);
  REQUIRE_FALSE(u);
  CHECK_THAT(u.error().message, Catch::Contains(":2: n_ubatch \"lots\" is not a whole number"));
  const std::string fa = write_file("gpusim_llamacpp_fa.csv",
                                    "gpu,gpu_norm,backend,model,quant,test,tokens_per_s,flash_attn\nA,A,CUDA,llama 7B,Q4_0,tg128,5,yes\n");
  auto f = read_measurements(fa);
  REQUIRE_FALSE(f);
  CHECK_THAT(f.error().message, Catch::Contains(":2: flash_attn \"yes\" is not 0 or 1"));
  const std::string bad_tps = write_file("gpusim_llamacpp_badtps.csv",
                                         "gpu,gpu_norm,backend,model,quant,test,tokens_per_s\nA,A,CUDA,llama 7B,Q4_0,tg128,fast\n");
  auto c = read_measurements(bad_tps);
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error().message, Catch::Contains(":2: tokens_per_s \"fast\" is not a speed from 0 to 1e7"));
  // A speed past any GPU's (1e308 validated with exit 0, an infinite error and a 0 us gap).
  const std::string huge_tps = write_file("gpusim_llamacpp_hugetps.csv",
                                          "gpu,gpu_norm,backend,model,quant,test,tokens_per_s\nA,A,CUDA,llama 7B,Q4_0,tg128,1e308\n");
  auto fast = read_measurements(huge_tps);
  REQUIRE_FALSE(fast);
  CHECK_THAT(fast.error().message, Catch::Contains(":2: tokens_per_s \"1e308\" is not a speed from 0 to 1e7 tokens a second"));
  // A column named twice: which one was meant is a guess, so the header is refused.
  const std::string twice = write_file("gpusim_llamacpp_twice.csv",
                                       "gpu,gpu_norm,backend,model,quant,test,tokens_per_s,tokens_per_s\nA,A,CUDA,llama 7B,Q4_0,tg128,5,50\n");
  auto t = read_measurements(twice);
  REQUIRE_FALSE(t);
  CHECK_THAT(t.error().message, Catch::Contains(":1: the header names the column \"tokens_per_s\" twice (columns 7 and 8); keep one"));
}

TEST_CASE("gpusim predict runs a generation from a description and refuses generation options on a graph", "[llm][cli]") {
  const std::string model = test::source_dir() + "/models/llm/llama-2-7b.yaml";
  const test::Run r = test::run_gpusim("predict " + model + " --gpu rtx-3060 --weights Q4_0 --prompt 512 --generate 128");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("TTFT") && Catch::Contains("per token") && Catch::Contains("KV cache") &&
                        Catch::Contains("decode (128 tokens"));
  const test::Run j = test::run_gpusim("predict " + model + " --gpu rtx-3060 --weights q8_0 --prompt 16 --generate 4 --json");
  REQUIRE(j.rc == 0);
  CHECK_THAT(j.out, Catch::Contains("\"weights\": \"Q8_0\""));
  const test::Run bad = test::run_gpusim("predict " + model + " --gpu rtx-3060 --weights Q4_9");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("weights \"Q4_9\""));
  // llama.cpp's kernels run in their own tiles: --tiles is refused, not silently ignored.
  const test::Run tiled = test::run_gpusim("predict " + model + " --gpu rtx-3060 --tiles library");
  CHECK(tiled.rc == 2);
  CHECK_THAT(tiled.out, Catch::Contains("--dtype, --plan, --dim and --tiles apply to ONNX graphs") &&
                            Catch::Contains("its kernels are llama.cpp's, in their own tiles"));
  // A graph's options on a generation are refused, naming themselves: a trace is one pass's timeline.
  for (const char* flag : {"--trace /tmp/gpusim-llm-trace.json", "--layout nhwc", "--autocast fp16", "--on-device",
                           "--skip-pattern sdpa"}) {
    const test::Run refused = test::run_gpusim("predict " + model + " --gpu rtx-3060 " + flag);
    INFO(flag << ": " << refused.out);
    CHECK(refused.rc == 2);
    CHECK_THAT(refused.out, Catch::Contains(std::string(flag).substr(0, std::string(flag).find(' '))) &&
                                Catch::Contains("applies to an ONNX graph's kernels"));
  }
  // And llama.cpp's runtimes price generations, not a graph's kernels.
  const test::Run llama_rt =
      test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu rtx-3060 --runtime llamacpp-cuda");
  CHECK(llama_rt.rc == 2);
  CHECK_THAT(llama_rt.out, Catch::Contains("runtime \"llamacpp-cuda\"") &&
                               Catch::Contains("prices llama.cpp's generations of a language model") &&
                               Catch::Contains("predict a graph under gpusim, cuda-graph, pytorch-eager or torch-compile"));
  const test::Run graph = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu rtx-3060 --generate 8");
  CHECK(graph.rc == 2);
  CHECK_THAT(graph.out, Catch::Contains("resnet50.onnx: no past_key_values inputs: a generation needs a decoder that "
                                        "takes its KV cache") &&
                            Catch::Contains("this graph is predicted as one pass"));
  const test::Run w = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu rtx-3060 --weights Q4_0");
  CHECK(w.rc == 2);
  CHECK_THAT(w.out, Catch::Contains("--weights is a language model description's"));
}

// On the published llama-bench rows, where ../shared/truth is present (CI has it beside the clone):
// the leave-one-GPU-out errors do not rise above the recorded ones.
TEST_CASE("language-model errors on the llama-bench rows do not rise above the recorded ones", "[llm][truth][cli]") {
  const std::string dir = test::source_dir() + "/../shared/truth/llamacpp";
  if (!fs::exists(dir)) {
    WARN("../shared/truth/llamacpp is absent: the llama-bench guard is skipped");
    return;
  }
  const test::Run r = test::run_gpusim("validate --truth " + dir + " --leave-one-gpu-out --check-against " +
                                       test::source_dir() + "/bench/validate/llamacpp-logo.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("language models") && Catch::Contains("none worse"));
}

// --- quantized ONNX graphs: QDQ, QLinear ops and MatMulNBits import, cost and price as such

namespace {

constexpr int kOnnxF16 = onnx::TensorProto::FLOAT16;
constexpr int kOnnxF32 = onnx::TensorProto::FLOAT;
constexpr int kOnnxU8 = onnx::TensorProto::UINT8;
constexpr int kOnnxI8 = onnx::TensorProto::INT8;

// A Llama-shaped projection as ONNX Runtime's int4 quantizer writes it: x [1, 1, 4096] by a
// 4096 x 4096 weight in 4-bit blocks of 32 with fp16 scales.
std::string nbits_model(int64_t rows) {
  test::OnnxBuilder b(17);
  b.input("x", kOnnxF16, {int64_t{1}, rows, int64_t{4096}});
  b.initializer("w", kOnnxU8, {4096, 128, 16});
  b.initializer("scales", kOnnxF16, {4096 * 128});
  b.node("MatMulNBits", {"x", "w", "scales"}, {"y"}, "proj")
      .i("K", 4096)
      .i("N", 4096)
      .i("bits", 4)
      .i("block_size", 32)
      .proto()
      ->set_domain("com.microsoft");
  b.output("y");
  auto* op = b.model().add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
  return b.write("nbits_" + std::to_string(rows) + ".onnx");
}

}  // namespace

TEST_CASE("MatMulNBits imports with its packed weight's exact bytes and prices as a quantized GEMV", "[llm][graph]") {
  auto g = import_onnx(nbits_model(1));
  REQUIRE(g);
  const Node& n = g->nodes.front();
  const OpCost c = op_cost(*g, n);
  CHECK(c.cls == OpClass::kGemm);
  CHECK(c.macs == 4096LL * 4096);
  // Packed nibbles and one fp16 scale a block of 32: 4.5 bits a weight, and the activations.
  CHECK(c.bytes_read == 4096LL * 4096 / 2 + 4096LL * 128 * 2 + 4096 * 2);
  CHECK(g->tensor(n.outputs[0]).shape == Shape{1, 1, 4096});
  auto w = node_work(*g, n);
  REQUIRE(w);
  CHECK(w->m == 1);
  CHECK(w->k == 4096);
  CHECK(w->b_bits == Approx(4.5));
  CHECK(w->dequant_ops == 2);
  // Predicted: DRAM-bound, and faster than the same product by an fp16 weight.
  const GpuProfile gpu = profile("nvidia-rtx-3060");
  auto p = predict(*g, library_target(gpu));
  REQUIRE(p);
  KernelWork f16 = *w;
  f16.b_bits = 0;
  f16.dequant_ops = 0;
  const DeviceModel d = make_device(gpu);
  CHECK(p->kernels.front().cost.bound == Bound::kDram);
  CHECK(p->kernels.front().cost.total_us < kernel_cost(f16, choose_tile(f16, d), d).total_us);
}

TEST_CASE("QDQ and QLinear graphs import with their integer types and price at the int8 rate", "[llm][graph]") {
  test::OnnxBuilder b(21);
  b.input("x", kOnnxF32, {int64_t{8}, int64_t{64}, int64_t{56}, int64_t{56}});
  b.initializer("xs", kOnnxF32, {});
  b.initializer("xz", kOnnxU8, {});
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "q");
  b.initializer("w", kOnnxI8, {128, 64, 3, 3});
  b.initializer("ws", kOnnxF32, {128});
  b.initializer("wz", kOnnxI8, {128});
  b.initializer("ys", kOnnxF32, {});
  b.initializer("yz", kOnnxU8, {});
  b.node("QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"yq"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dq");
  b.output("y");
  auto g = import_onnx(b.write("qdq_conv.onnx"));
  REQUIRE(g);
  const Node& conv = g->nodes[1];
  CHECK(g->tensor(g->nodes[0].outputs[0]).dtype == DType::kUInt8);
  CHECK(g->tensor(conv.outputs[0]).dtype == DType::kUInt8);
  CHECK(g->tensor(conv.outputs[0]).shape == Shape{8, 128, 56, 56});
  CHECK(g->tensor(g->nodes[2].outputs[0]).dtype == DType::kFloat32);
  const OpCost c = op_cost(*g, conv);
  CHECK(c.macs == 8LL * 128 * 56 * 56 * 64 * 9);
  auto w = node_work(*g, conv);
  REQUIRE(w);
  CHECK(w->dtype == DType::kUInt8);
  CHECK(w->n == 128);
  CHECK(w->k == 64 * 9);
  // On the int8 matrix units of an RTX 3060.
  const DeviceModel d = make_device(profile("nvidia-rtx-3060"));
  const KernelCost kc = kernel_cost(*w, choose_tile(*w, d), d);
  CHECK(kc.matrix_units);
  CHECK(kc.peak_tflops == Approx(*d.profile->matrix_tflops(Precision::kInt8, Precision::kInt32)));

  test::OnnxBuilder m(17);
  m.input("a", kOnnxU8, {int64_t{128}, int64_t{768}});
  m.initializer("as", kOnnxF32, {});
  m.initializer("az", kOnnxU8, {});
  m.initializer("b", kOnnxI8, {768, 3072});
  m.initializer("bs", kOnnxF32, {});
  m.initializer("bz", kOnnxI8, {});
  m.initializer("ys", kOnnxF32, {});
  m.initializer("yz", kOnnxI8, {});
  m.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"}, "mm");
  m.output("y");
  auto mg = import_onnx(m.write("qlinear_matmul.onnx"));
  REQUIRE(mg);
  CHECK(mg->tensor(mg->nodes[0].outputs[0]).shape == Shape{128, 3072});
  CHECK(mg->tensor(mg->nodes[0].outputs[0]).dtype == DType::kInt8);
  auto mw = node_work(*mg, mg->nodes[0]);
  REQUIRE(mw);
  CHECK(mw->m == 128);
  CHECK(mw->n == 3072);
  CHECK(mw->k == 768);
}

TEST_CASE("quantized op errors name the node, the attribute or input, and what is expected", "[llm][graph][errors]") {
  test::OnnxBuilder b(17);
  b.input("x", kOnnxF16, {int64_t{1}, int64_t{4096}});
  b.initializer("w", kOnnxU8, {4096, 64, 16});  // blocks of 32 over K = 4096 need 128, not 64
  b.initializer("scales", kOnnxF16, {4096 * 128});
  b.node("MatMulNBits", {"x", "w", "scales"}, {"y"}, "proj").i("K", 4096).i("N", 4096).i("bits", 4).i("block_size", 32).proto()->set_domain("com.microsoft");
  b.output("y");
  auto* op = b.model().add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
  auto g = import_onnx(b.write("nbits_bad.onnx"));
  REQUIRE_FALSE(g);
  CHECK_THAT(g.error().message, Catch::Contains("proj") && Catch::Contains("[4096, 64, 16]") && Catch::Contains("[4096, 128, 16]"));

  test::OnnxBuilder d(17);
  d.input("x", kOnnxU8, {int64_t{4}});
  d.initializer("s", kOnnxU8, {});
  d.node("DequantizeLinear", {"x", "s"}, {"y"}, "dq");
  d.output("y");
  auto dg = import_onnx(d.write("dq_bad.onnx"));
  REQUIRE_FALSE(dg);
  CHECK_THAT(dg.error().message, Catch::Contains("node \"dq\"") && Catch::Contains("is uint8") && Catch::Contains("x_scale takes float"));
}

// --- ONNX decoders with a KV cache (tools/export_llama_onnx.py; models/*_decoder*.onnx)

TEST_CASE("an ONNX decoder with a KV cache predicts a generation pass by pass", "[llm][cli]") {
  const std::string tiny = test::source_dir() + "/models/tiny_llama_decoder.onnx";
  Session s;
  auto gpu = s.gpu("nvidia-rtx-3060");
  REQUIRE(gpu);
  GenerationOptions o;
  o.prompt = 64;
  o.generate = 16;
  o.batch = 2;
  auto g = s.generate_decoder(tiny, s.target(*gpu, TileSpace::kGenerated), o);
  INFO((g ? std::string() : g.error().message));
  REQUIRE(g);
  CHECK(g->backend == "onnx");
  CHECK(g->prefill.tokens == 128);
  CHECK(g->decode.steps == 16);
  CHECK(g->decode.tokens == 32);
  // 2 layers x keys and values x 2 KV heads x head_dim 64 x fp16, for 80 tokens of 2 sequences.
  CHECK(g->kv_cache_bytes == 2 * 2 * 2 * 64 * 2 * 80 * 2);
  CHECK(g->weight_bytes > 0);
  CHECK(g->ttft_us > 0);
  CHECK(g->token_last_us >= g->token_first_us);  // the cache grows
  CHECK(g->token_mean_us >= g->token_first_us);
  CHECK(g->token_mean_us <= g->token_last_us);
  CHECK(g->total_us == Approx(g->ttft_us + g->decode.time_us));
  CHECK(g->decode.kernels == 16 * static_cast<int64_t>(g->decode.kernels_of_step.size()));
  // The runtime and dtype of the request price each pass: fp32 weights are twice fp16's bytes.
  PredictRequest req;
  req.dtype = DType::kFloat32;
  auto g32 = s.generate_decoder(tiny, s.target(*gpu, TileSpace::kGenerated), o, req);
  REQUIRE(g32);
  CHECK(g32->weight_bytes == Approx(2.0 * static_cast<double>(g->weight_bytes)).epsilon(1e-3));  // int64 shape constants aside
  CHECK(g32->kv_cache_bytes == 2 * g->kv_cache_bytes);
  // Activations are what a pass holds beyond its weights and its cache, both in the re-typed type:
  // twice fp16's, not fp32's less an fp16-sized cache.
  CHECK(static_cast<double>(g32->compute_bytes) == Approx(2.0 * static_cast<double>(g->compute_bytes)).epsilon(0.02));
  CHECK(g->weights == "fp16");
  CHECK(g32->weights == "fp32");
  req.plan = Plan{};
  auto planned = s.generate_decoder(tiny, s.target(*gpu, TileSpace::kGenerated), o, req);
  REQUIRE_FALSE(planned);
  CHECK_THAT(planned.error().message, Catch::Contains("a generation's passes differ in shape"));

  // The 7B-shaped decoders: the 4-bit one (MatMulNBits) holds about 3.6x fewer weight bytes and
  // generates faster at batch 1, where its steps stream the weights.
  GenerationOptions o7;
  o7.prompt = 128;
  o7.generate = 8;
  auto f16 = s.generate_decoder(test::source_dir() + "/models/llama2_7b_decoder.onnx", s.target(*gpu, TileSpace::kLibrary), o7);
  auto q4 = s.generate_decoder(test::source_dir() + "/models/llama2_7b_decoder_q4.onnx", s.target(*gpu, TileSpace::kLibrary), o7);
  REQUIRE(f16);
  REQUIRE(q4);
  CHECK(f16->weight_bytes == Approx(13.48e9).epsilon(0.01));
  CHECK(static_cast<double>(f16->weight_bytes) / static_cast<double>(q4->weight_bytes) > 3.0);
  CHECK(q4->token_mean_us < f16->token_mean_us);
  CHECK(f16->decode.bound == "dram");
  // Its weights as stored: the projections' packed blocks with their scales, the rest (embeddings,
  // the vocabulary projection, norms) fp16.
  CHECK(q4->weights == "87% MatMulNBits int4 in blocks of 32, 13% fp16");

  // From the CLI, and what it refuses.
  const test::Run r = test::run_gpusim("predict " + tiny + " --gpu rtx-3060 --prompt 32 --generate 8");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("the ONNX graph's kernels") && Catch::Contains("TTFT") &&
                        Catch::Contains("decode (8 tokens, 8 passes)"));
  const test::Run j = test::run_gpusim("predict " + tiny + " --gpu rtx-3060 --prompt 32 --generate 8 --json");
  REQUIRE(j.rc == 0);
  CHECK_THAT(j.out, Catch::Contains("\"schema\": \"gpusim.generation/1\"") && Catch::Contains("\"backend\": \"onnx\""));
  const test::Run dim = test::run_gpusim("predict " + tiny + " --gpu rtx-3060 --prompt 32 --dim batch_size=2");
  CHECK(dim.rc == 2);
  CHECK_THAT(dim.out, Catch::Contains("--dim does not apply to an ONNX decoder's generation"));
  const test::Run trace = test::run_gpusim("predict " + tiny + " --gpu rtx-3060 --prompt 32 --trace /tmp/gpusim-dec.json");
  CHECK(trace.rc == 2);
  CHECK_THAT(trace.out, Catch::Contains("--trace does not apply to an ONNX decoder's generation") &&
                            Catch::Contains("--trace writes one pass's timeline"));
  // One pass of it without --prompt needs its dims, each named once however many inputs share it.
  const test::Run pass = test::run_gpusim("inspect " + tiny);
  CHECK(pass.rc != 0);
  CHECK_THAT(pass.out, Catch::Contains("input \"input_ids\" dim 0 is symbolic (\"batch_size\") and has no value (and 6 "
                                       "more input dims of that name); set it with --dim batch_size=N") &&
                           Catch::Contains("(\"total_sequence_length\") and has no value; set it with --dim "
                                           "total_sequence_length=N"));
  const test::Run zero = test::run_gpusim("predict " + tiny + " --gpu rtx-3060 --prompt 0 --generate 8");
  CHECK(zero.rc == 2);
  CHECK_THAT(zero.out, Catch::Contains("prompt: 0 tokens is out of range; an ONNX decoder's prompt pass takes 1 to"));
}


TEST_CASE("gpusim compare puts a generation side by side on several GPUs", "[llm][cli]") {
  // A description: each GPU its own backend (cuda, metal), the rows the library's generations.
  const test::Run r = test::run_gpusim("compare llama-2-7b --gpus nvidia-rtx-3060,apple-m2-max --weights Q4_0 --prompt 128 "
                                       "--generate 16 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("schema") == "gpusim.compare-generation/1");
  REQUIRE(doc.at("gpus").size() == 2);
  Session s;
  auto spec = s.llm("llama-2-7b");
  REQUIRE(spec);
  GenerationOptions o;
  o.weights = "Q4_0";
  o.prompt = 128;
  o.generate = 16;
  auto rows = s.compare_generation(*spec, {"nvidia-rtx-3060", "apple-m2-max"}, o);
  REQUIRE(rows);
  for (size_t i = 0; i < 2; ++i) {
    const auto& row = doc.at("gpus").at(i);
    CHECK(row.at("gpu") == (*rows)[i].gpu);
    CHECK(row.at("backend") == (i == 0 ? "cuda" : "metal"));
    CHECK(row.at("ttft_us").get<double>() == Approx((*rows)[i].ttft_us).epsilon(1e-12));
    CHECK(row.at("token_mean_us").get<double>() == Approx((*rows)[i].token_mean_us).epsilon(1e-12));
  }
  CHECK(doc.at("gpus").at(0).at("speedup").get<double>() == 1.0);
  // An ONNX decoder, pass by pass, as text.
  const std::string tiny = test::source_dir() + "/models/tiny_llama_decoder.onnx";
  const test::Run t = test::run_gpusim("compare " + tiny + " --gpus nvidia-rtx-3060,nvidia-h100-sxm --prompt 32 --generate 4");
  INFO(t.out);
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Catch::Contains("ttft_ms") && Catch::Contains("nvidia-h100-sxm") && Catch::Contains("onnx"));
  // What it refuses: llama.cpp's options for a decoder, generation options for one pass of a graph,
  // and an unknown GPU before any prediction.
  const test::Run w = test::run_gpusim("compare " + tiny + " --gpus nvidia-t4 --prompt 8 --weights Q4_0");
  CHECK(w.rc == 2);
  CHECK_THAT(w.out, Catch::Contains("--weights does not apply to an ONNX decoder's generation"));
  const test::Run b = test::run_gpusim("compare " + test::source_dir() + "/models/resnet50.onnx --gpus nvidia-t4 --batch 4");
  CHECK(b.rc == 2);
  CHECK_THAT(b.out, Catch::Contains("--batch applies to a generation: a language model's description, or an ONNX decoder"));
  const test::Run p = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-t4 --backend cuda");
  CHECK(p.rc == 2);
  CHECK_THAT(p.out, Catch::Contains("--backend applies to a generation"));
  const test::Run g = test::run_gpusim("compare llama-2-7b --gpus nvidia-t4,no-such-gpu");
  CHECK(g.rc == 1);
  CHECK_THAT(g.out, Catch::Contains("no GPU profile named \"no-such-gpu\""));
  auto none = s.compare_generation(*spec, {}, o);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Catch::Contains("no GPUs given"));
}


// A decode step's attention: one query a head over a long cache. The library menu has
// flash-decoding's key splits (every SM streams some of the cache); gpusim's own generator splits
// alike, combining in the kernel instead of a second one.
TEST_CASE("a decode step's attention splits the keys as flash-decoding does in a library's two kernels or gpusim's one", "[llm][cost]") {
  Session s;
  auto gpu = s.gpu("nvidia-h200");
  REQUIRE(gpu);
  const DeviceModel d = make_device(*gpu);
  KernelWork w;
  w.cls = OpClass::kAttention;
  w.dtype = DType::kFloat16;
  w.batch = 8;  // the KV heads of one sequence (Llama-3-8B's, queries grouped)
  w.m = 1;
  w.kv_seq = 4096;
  w.head_dim = w.v_head_dim = 128;
  const TileConfig best = choose_tile(w, d);
  CHECK(best.split_k > 1);
  double best_unsplit = 1e300;
  for (const TileConfig& t : tile_menu(w, d)) {
    if (t.split_k == 1) best_unsplit = std::min(best_unsplit, kernel_cost(w, t, d).total_us);
  }
  const KernelCost split = kernel_cost(w, best, d);
  INFO("split " << best.split_k << ": " << split.total_us << " us; unsplit " << best_unsplit << " us");
  CHECK(split.total_us * 2 < best_unsplit);
  // Every byte of the cache is still read once: 8 heads x 4096 keys x (128 + 128) x fp16.
  CHECK(split.dram_bytes >= 8.0 * 4096 * 256 * 2);
  // A prompt's attention (many queries) keeps its unsplit tiles.
  KernelWork prompt = w;
  prompt.m = 512;
  CHECK(choose_tile(prompt, d).split_k == 1);
  // The library's combine is a second kernel; gpusim's generator splits the keys alike and
  // combines them in the last group of each query block (gen_attention.cpp), one launch.
  CHECK(split.reduce_us > 0);
  const Target gen = s.target(*gpu, TileSpace::kGenerated);
  CHECK(gen.capability().generated(w, best).split_k == best.split_k);
  const TileConfig own = best_generated_tile(w, d, gen.capability());
  CHECK(own.split_k > 1);
  CHECK(kernel_cost(w, own, d).reduce_us == 0);
  double own_unsplit = 1e300;
  for (const TileConfig& t : tile_menu(w, d)) {
    const TileConfig built = gen.capability().generated(w, t);
    if (built.split_k == 1) own_unsplit = std::min(own_unsplit, kernel_cost(w, built, d).total_us);
  }
  INFO("generated: split " << own.split_k << ": " << kernel_cost(w, own, d).total_us << " us; unsplit " << own_unsplit << " us");
  CHECK(kernel_cost(w, own, d).total_us * 2 < own_unsplit);
}

// `dtype int8|fp8`: a graph re-typed to 8 bits, as a fully quantized (W8A8) engine runs it, priced
// on the 8-bit matrix units in the library tile space; refused where the GPU has no such units, in
// the generated tile space, and by the backends.
TEST_CASE("predict re-types a graph to int8 or fp8 where the GPU has the matrix units", "[llm][predict][errors]") {
  Session s;
  ModelOptions mo;
  mo.dims = {"input:0=32"};  // ResNet-50's batch is fixed at 1: its axis sets it
  auto m = s.open_model(test::source_dir() + "/models/resnet50.onnx", mo);
  REQUIRE(m);
  auto rtx = s.gpu("nvidia-rtx-3060");
  auto h100 = s.gpu("nvidia-h100-sxm");
  REQUIRE(rtx);
  REQUIRE(h100);
  PredictRequest f16, i8, f8;
  f16.dtype = DType::kFloat16;
  i8.dtype = DType::kInt8;
  f8.dtype = DType::kFloat8E4M3FN;
  const Target lib = s.target(*rtx, TileSpace::kLibrary);
  auto a = s.predict(*m, lib, f16);
  auto b = s.predict(*m, lib, i8);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(b->dtype == DType::kInt8);
  CHECK(b->weight_bytes * 2 == Approx(static_cast<double>(a->weight_bytes)).epsilon(0.01));
  CHECK(b->kernels_us < 0.7 * a->kernels_us);  // the RTX 3060's int8 matrix rate is twice its fp16 one
  bool int8_units = false;
  for (const PlannedKernel& k : b->kernels) int8_units = int8_units || (k.op_type == "Conv" && k.cost.matrix_units);
  CHECK(int8_units);
  auto h = s.predict(*m, s.target(*h100, TileSpace::kLibrary), f8);
  REQUIRE(h);
  CHECK(h->dtype == DType::kFloat8E4M3FN);

  auto no_fp8 = s.predict(*m, lib, f8);
  REQUIRE_FALSE(no_fp8);
  CHECK_THAT(no_fp8.error().message, Catch::Contains("(nvidia-rtx-3060) has no fp8 matrix units: its profile gives matrix "
                                                     "rates for fp16, bf16, tf32, int8") &&
                                         Catch::Contains("a GPU with fp8 (NVIDIA Ada, Hopper or Blackwell; AMD CDNA3)"));
  auto gen = s.predict(*m, s.target(*rtx, TileSpace::kGenerated), i8);
  REQUIRE_FALSE(gen);
  CHECK_THAT(gen.error().message, Catch::Contains("`dtype int8`: gpusim's code generator builds fp32 and fp16 kernels"));
  const test::Run apple = test::run_gpusim("plan " + test::source_dir() + "/models/resnet50.onnx --gpu apple-m3-max --dim batch=1 "
                                                                          "--dtype int8 --tiles library");
  CHECK(apple.rc == 2);
  CHECK_THAT(apple.out, Catch::Contains("has no int8 matrix units"));
  const test::Run bad = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu rtx-3060 --dim batch=1 "
                                                                         "--dtype int4");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("--dtype \"int4\" is not supported; expected fp32, fp16, bf16, int8 or fp8"));
  const test::Run run = test::run_gpusim("run " + test::source_dir() + "/models/resnet50.onnx --backend vulkan --dim batch=1 "
                                                                       "--dtype int8");
  CHECK(run.rc == 2);
  // A plan searched in fp8 is written with its dtype and scores as the search did.
  const std::string out = test::temp_dir() + "/resnet50_fp8.plan.json";
  const test::Run plan = test::run_gpusim("plan " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-h100-sxm --dim "
                                          "input:0=8 --dtype fp8 --tiles library --out " + out);
  INFO(plan.out);
  REQUIRE(plan.rc == 0);
  CHECK_THAT(test::file_bytes(out), Catch::Contains("\"dtype\": \"fp8\""));
  const test::Run scored = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-h100-sxm "
                                            "--dim input:0=8 --plan " + out);
  INFO(scored.out);
  CHECK(scored.rc == 0);
}

// What a user runs: a decode step of the bundled tiny decoder (one token over 300 cached ones),
// its attention fused and the keys split over groups (flash-decoding, combined in the kernel), on
// Vulkan (lavapipe in CI) against the CPU reference. The decoder's RMSNorm weights are ones, so the
// logits are not all zero and the check compares something.
TEST_CASE("a decode step of the tiny decoder runs with its attention keys split and matches the reference", "[llm][cli]") {
  if (test::device("vulkan") == nullptr) return;  // devices.h warned why
  const std::string tiny = test::source_dir() + "/models/tiny_llama_decoder.onnx";
  const std::string dims =
      " --dim batch_size=1 --dim sequence_length=1 --dim total_sequence_length=301 --dim past_sequence_length=300";
  const std::string plan = (fs::temp_directory_path() / "gpusim_tiny_decode_plan.json").string();
  test::Run r = test::run_gpusim("plan " + tiny + dims + " --gpu nvidia-h100-sxm --dtype fp16 --out " + plan);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  nlohmann::json p;
  {
    std::ifstream in(plan);
    p = nlohmann::json::parse(in);
  }
  int split = 0;
  for (auto& k : p["kernels"]) {
    const auto& f = k["fusions"];
    if (std::find(f.begin(), f.end(), "attention") == f.end()) continue;
    k["tile"]["split_k"] = 4;  // 300 keys in blocks of 32: four shares, the last shorter
    ++split;
  }
  REQUIRE(split == 2);  // one attention a layer
  std::ofstream(plan) << p.dump();
  r = test::run_gpusim("run " + tiny + dims + " --backend vulkan --check --repeat 1 --plan " + plan);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("check    logits: relative L2 error") && Catch::Contains("PASS"));
  CHECK_THAT(r.out, !Catch::Contains("logits [1, 1, 1024] fp16: min 0, max 0"));
  // The plan ran as written: both attentions in four shares.
  r = test::run_gpusim("predict " + tiny + dims + " --gpu nvidia-h100-sxm --dtype fp16 --json --plan " + plan);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  int shares = 0;
  const nlohmann::json predicted = nlohmann::json::parse(r.out);
  for (const auto& k : predicted["kernels"]) shares += k["class"] == "attention" && k["tile"]["split_k"] == 4;
  CHECK(shares == 2);
}
