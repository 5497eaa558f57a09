// Weight formats, llama.cpp's file types and the llama-family model description
// (include/gpusim/llm.h; core/llm/README.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpusim/llm.h"

#include "base/files.h"

namespace gpusim {
namespace {

// ggml/src/ggml-common.h: block sizes and bytes. dequant_ops (instructions a weight, before its
// multiply-add; core/llm/README.md): a nibble is a shift and a mask; an offset or minimum one more;
// the 5th bit of Q5 two (extract, or); K-quants unpack 6-bit sub-block scales and minimums, about
// one more a weight amortized over their 16- or 32-weight sub-blocks; a plain int8 only converts.
const std::vector<BlockFormat>& formats() {
  static const std::vector<BlockFormat> f = {
      {GgmlType::kF32, "f32", 1, 4, 0.0},      {GgmlType::kF16, "f16", 1, 2, 0.0},
      {GgmlType::kBF16, "bf16", 1, 2, 0.0},    {GgmlType::kQ4_0, "q4_0", 32, 18, 2.0},
      {GgmlType::kQ4_1, "q4_1", 32, 20, 2.0},  {GgmlType::kQ5_0, "q5_0", 32, 22, 4.0},
      {GgmlType::kQ5_1, "q5_1", 32, 24, 4.0},  {GgmlType::kQ8_0, "q8_0", 32, 34, 1.0},
      {GgmlType::kQ2_K, "q2_k", 256, 84, 3.0}, {GgmlType::kQ3_K, "q3_k", 256, 110, 4.0},
      {GgmlType::kQ4_K, "q4_k", 256, 144, 3.0}, {GgmlType::kQ5_K, "q5_k", 256, 176, 5.0},
      {GgmlType::kQ6_K, "q6_k", 256, 210, 4.0},
  };
  return f;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string upper(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}

Error bad(const std::string& source, const std::string& field, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", source, field, why));
}

// The checks every description passes, whichever format it came in.
Status check_spec(const LlmSpec& s, const std::string& source) {
  // Limits well past any published decoder (Llama-3-405B: 126 layers, width 16384, FFN 53248, 128
  // heads, vocab 128256), which keep every product of them the model forms inside 64 bits.
  struct Field {
    const char* name;
    int64_t value, max;
  };
  for (const Field& f : {Field{"layers", s.layers, 1024}, Field{"hidden", s.hidden, 1 << 17}, Field{"ffn", s.ffn, 1 << 19},
                         Field{"heads", s.heads, 1024}, Field{"kv_heads", s.kv_heads, 1024},
                         Field{"head_dim", s.head_dim, 4096}, Field{"vocab", s.vocab, 1 << 22},
                         Field{"context", s.context, 1 << 24}}) {
    if (f.value < 1 || f.value > f.max) {
      return bad(source, f.name, fmt::format("{} is out of range; expected a whole number from 1 to {}", f.value, f.max));
    }
  }
  if (s.heads % s.kv_heads != 0) {
    return bad(source, "kv_heads",
               fmt::format("{} does not divide heads ({}); grouped-query attention shares each KV head among a whole "
                           "number of query heads",
                           s.kv_heads, s.heads));
  }
  if (s.architecture != "llama") {
    return bad(source, "architecture",
               fmt::format("\"{}\" is not modelled; expected llama (Llama 1-3, Mistral and other llama-family decoders)",
                           s.architecture));
  }
  return Ok{};
}

Result<LlmSpec> from_yaml(const std::string& text, const std::string& source) {
  YAML::Node n;
  try {
    n = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not YAML ({})", source, e.what()));
  }
  if (!n.IsMap()) return bad(source, "(document)", "is not a mapping; expected a gpusim.llm/1 document");
  const std::string schema = n["schema"] ? n["schema"].as<std::string>("") : "";
  if (schema != "gpusim.llm/1") {
    return bad(source, "schema", fmt::format("\"{}\" is not gpusim.llm/1 (a language model's description)", schema));
  }
  static const char* kKnown[] = {"schema", "name", "architecture", "layers", "hidden", "ffn", "heads", "kv_heads",
                                 "head_dim", "vocab", "context", "tied_embeddings", "source", "notes"};
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>("");
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return key == k; }) == std::end(kKnown)) {
      return bad(source, key, "is not a field of gpusim.llm/1; expected name, architecture, layers, hidden, ffn, heads, "
                              "kv_heads, head_dim, vocab, context, tied_embeddings, source");
    }
  }
  LlmSpec s;
  s.name = n["name"] ? n["name"].as<std::string>("") : "";
  if (n["architecture"]) s.architecture = n["architecture"].as<std::string>("");
  auto whole = [&](const char* key, int64_t& v, bool required) -> Status {
    if (!n[key]) {
      if (required) return bad(source, key, "is missing; a gpusim.llm/1 document gives it");
      return Ok{};
    }
    int64_t x = 0;
    if (!n[key].IsScalar() || !YAML::convert<int64_t>::decode(n[key], x)) {
      return bad(source, key, fmt::format("\"{}\" is not a whole number", n[key].IsScalar() ? n[key].Scalar() : "(not a scalar)"));
    }
    if (!required && x < 1) return bad(source, key, fmt::format("{} is out of range; give a whole number from 1, or leave it out", x));
    v = x;
    return Ok{};
  };
  for (auto [key, field, required] : {std::tuple{"layers", &s.layers, true}, std::tuple{"hidden", &s.hidden, true},
                                      std::tuple{"ffn", &s.ffn, true}, std::tuple{"heads", &s.heads, true},
                                      std::tuple{"kv_heads", &s.kv_heads, false}, std::tuple{"head_dim", &s.head_dim, false},
                                      std::tuple{"vocab", &s.vocab, true}, std::tuple{"context", &s.context, false}}) {
    if (Status st = whole(key, *field, required); !st) return st.error();
  }
  if (n["tied_embeddings"]) {
    bool b = false;
    if (!YAML::convert<bool>::decode(n["tied_embeddings"], b)) {
      return bad(source, "tied_embeddings", fmt::format("\"{}\" is not true or false", n["tied_embeddings"].Scalar()));
    }
    s.tied_embeddings = b;
  }
  return s;
}

// A Hugging Face config.json of a llama-family model.
Result<LlmSpec> from_json(const std::string& text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(ErrorCode::kParse, fmt::format("{}: not a JSON object", source));
  const std::string type = j.value("model_type", std::string());
  static const char* kLlama[] = {"llama", "mistral", "qwen2", "qwen3", "granite", "internlm2", "yi"};
  if (std::find_if(std::begin(kLlama), std::end(kLlama), [&](const char* t) { return type == t; }) == std::end(kLlama)) {
    return bad(source, "model_type",
               fmt::format("\"{}\" is not a llama-family decoder gpusim models; expected llama, mistral, qwen2, qwen3", type));
  }
  LlmSpec s;
  s.name = j.value("_name_or_path", std::string());
  auto whole = [&](const char* key, int64_t& v, bool required) -> Status {
    if (!j.contains(key) || j.at(key).is_null()) {
      if (required) return bad(source, key, "is missing; a config.json of a decoder gives it");
      return Ok{};
    }
    if (!j.at(key).is_number_integer()) return bad(source, key, fmt::format("{} is not a whole number", j.at(key).dump()));
    const int64_t x = j.at(key).get<int64_t>();
    if (!required && x < 1) return bad(source, key, fmt::format("{} is out of range; give a whole number from 1, or leave it out", x));
    v = x;
    return Ok{};
  };
  for (auto [key, field, required] :
       {std::tuple{"num_hidden_layers", &s.layers, true}, std::tuple{"hidden_size", &s.hidden, true},
        std::tuple{"intermediate_size", &s.ffn, true}, std::tuple{"num_attention_heads", &s.heads, true},
        std::tuple{"num_key_value_heads", &s.kv_heads, false}, std::tuple{"head_dim", &s.head_dim, false},
        std::tuple{"vocab_size", &s.vocab, true}, std::tuple{"max_position_embeddings", &s.context, false}}) {
    if (Status st = whole(key, *field, required); !st) return st.error();
  }
  if (j.contains("tie_word_embeddings") && j.at("tie_word_embeddings").is_boolean()) {
    s.tied_embeddings = j.at("tie_word_embeddings").get<bool>();
  }
  return s;
}

bool ends_with(const std::string& s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

const std::vector<BlockFormat>& block_formats() { return formats(); }

const BlockFormat& block_format(GgmlType t) {
  for (const BlockFormat& f : formats()) {
    if (f.type == t) return f;
  }
  return formats().front();
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  const std::string l = lower(name);
  for (const BlockFormat& f : formats()) {
    if (f.name == l) return f.type;
  }
  return std::nullopt;
}

int64_t ggml_bytes(GgmlType t, int64_t rows, int64_t row_elements) {
  const BlockFormat& f = block_format(t);
  const int64_t blocks = (row_elements + f.block_elements - 1) / f.block_elements;
  return rows * blocks * f.block_bytes;
}

const std::vector<std::string>& llm_file_types() {
  static const std::vector<std::string> t = {"F32",    "F16",    "BF16",   "Q8_0",   "Q6_K",   "Q5_K_M", "Q5_K_S",
                                             "Q5_1",   "Q5_0",   "Q4_K_M", "Q4_K_S", "Q4_1",   "Q4_0",   "Q3_K_L",
                                             "Q3_K_M", "Q3_K_S", "Q2_K"};
  return t;
}

std::optional<std::string> llm_file_type(std::string_view name) {
  const std::string u = upper(name);
  for (const std::string& t : llm_file_types()) {
    if (t == u) return t;
  }
  return std::nullopt;
}

int64_t LlmSpec::parameters() const {
  const int64_t hd = head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0);
  const int64_t per_layer = hidden * heads * hd * 2 + hidden * kv_heads * hd * 2 + 3 * hidden * ffn + 2 * hidden;
  return layers * per_layer + vocab * hidden * (tied_embeddings ? 1 : 2) + hidden;
}

Result<LlmSpec> parse_llm_spec(const std::string& text, const std::string& source) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  Result<LlmSpec> r = first != std::string::npos && text[first] == '{' ? from_json(text, source) : from_yaml(text, source);
  if (!r) return r;
  LlmSpec s = std::move(*r);
  s.source_path = source;
  if (s.kv_heads == 0) s.kv_heads = s.heads;
  if (s.head_dim == 0 && s.heads > 0) {
    // Without head_dim each head is hidden / heads wide, which must come out whole.
    if (s.hidden % s.heads != 0) {
      return bad(source, "hidden",
                 fmt::format("{} is not a multiple of heads ({}), so a head's width (head_dim) is not {} / {}; give "
                             "head_dim, or correct hidden or heads",
                             s.hidden, s.heads, s.hidden, s.heads));
    }
    s.head_dim = s.hidden / s.heads;
  }
  if (s.name.empty()) {
    std::string stem = source.substr(source.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find('.'));
    s.name = stem;
  }
  if (Status st = check_spec(s, source); !st) return st.error();
  return s;
}

Result<LlmSpec> load_llm_spec(const std::string& path) {
  // A description or config.json is a few kilobytes: 16 MiB bounds /dev/zero and its kind.
  auto text = base::read_regular_file(path, 16 << 20, "the model description");
  if (!text) return text.error();
  return parse_llm_spec(*text, path);
}

std::vector<std::string> default_llm_dirs() { return search_dirs("GPUSIM_LLM_PATH", "llm", "llm"); }

Result<LlmSpec> find_llm_spec(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  if (name_or_path.find('/') != std::string::npos || ends_with(name_or_path, ".yaml") || ends_with(name_or_path, ".json")) {
    return load_llm_spec(name_or_path);
  }
  std::vector<std::string> known;
  for (const std::string& d : dirs) {
    const std::string path = d + "/" + name_or_path + ".yaml";
    if (std::ifstream(path).good()) return load_llm_spec(path);
  }
  return make_error(ErrorCode::kNotFound,
                    fmt::format("no model description \"{}\" ({}.yaml) in {}; the bundled ones are in models/llm "
                                "(llama-2-7b, llama-3-8b, llama-3-70b), or give a path",
                                name_or_path, name_or_path, dirs.empty() ? std::string("no directory") : fmt::format("{}", fmt::join(dirs, ", "))));
}

bool is_llm_spec_file(const std::string& path) {
  if (!(ends_with(path, ".yaml") || ends_with(path, ".yml") || ends_with(path, ".json"))) return false;
  auto f = base::RegularFile::open(path, "the model description");
  if (!f) return false;
  const std::string head = f->read(0, 4096);
  if (ends_with(path, ".json")) return head.find("\"model_type\"") != std::string::npos;
  return head.find("gpusim.llm/1") != std::string::npos;
}

namespace {

// llama.cpp's use_more_bits (src/llama-quant.cpp): the first and last eighth of the layers and every
// third between them.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// A K-quant over rows whose length is no multiple of 256 falls back as llama.cpp's quantizer does.
GgmlType fit_rows(GgmlType t, int64_t row_elements) {
  if (row_elements % block_format(t).block_elements == 0) return t;
  switch (t) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K: return GgmlType::kQ5_0;
    case GgmlType::kQ5_K: return GgmlType::kQ5_1;
    case GgmlType::kQ6_K: return GgmlType::kQ8_0;
    default: return GgmlType::kF16;  // 32-blocks over a row no multiple of 32
  }
}

}  // namespace

Result<std::vector<LlmTensor>> llm_weights(const LlmSpec& spec, const std::string& file_type) {
  const std::optional<std::string> ft = llm_file_type(file_type);
  if (!ft) {
    std::string all;
    for (const std::string& t : llm_file_types()) all += (all.empty() ? "" : ", ") + t;
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("weights \"{}\" is not a llama.cpp file type gpusim models; expected one of {}", file_type, all));
  }
  const std::string& f = *ft;
  GgmlType base = GgmlType::kF16;
  if (f == "F32") base = GgmlType::kF32;
  else if (f == "BF16") base = GgmlType::kBF16;
  else if (f == "Q8_0") base = GgmlType::kQ8_0;
  else if (f == "Q6_K") base = GgmlType::kQ6_K;
  else if (f == "Q5_K_M" || f == "Q5_K_S") base = GgmlType::kQ5_K;
  else if (f == "Q5_1") base = GgmlType::kQ5_1;
  else if (f == "Q5_0") base = GgmlType::kQ5_0;
  else if (f == "Q4_K_M" || f == "Q4_K_S") base = GgmlType::kQ4_K;
  else if (f == "Q4_1") base = GgmlType::kQ4_1;
  else if (f == "Q4_0") base = GgmlType::kQ4_0;
  else if (f.rfind("Q3_K", 0) == 0) base = GgmlType::kQ3_K;
  else if (f == "Q2_K") base = GgmlType::kQ2_K;
  const bool quantized = block_format(base).block_elements > 1;
  const int64_t n = spec.layers;
  const int64_t gqa = spec.heads / std::max<int64_t>(1, spec.kv_heads);
  // llama.cpp's LLM_TYPE_70B: 80 layers of width 8192.
  const bool is_70b = spec.layers == 80 && spec.hidden == 8192;

  std::vector<LlmTensor> out;
  auto add = [&](std::string name, int layer, int64_t rows, int64_t cols, GgmlType t) {
    LlmTensor x;
    x.name = std::move(name);
    x.layer = layer;
    x.rows = rows;
    x.row_elements = cols;
    x.type = rows == 1 ? GgmlType::kF32 : fit_rows(t, cols);
    x.bytes = ggml_bytes(x.type, rows, cols);
    out.push_back(std::move(x));
  };
  // The output projection (or the tied embedding that serves as one): Q6_K unless the file is Q8_0.
  const GgmlType output_type = quantized && base != GgmlType::kQ8_0 ? GgmlType::kQ6_K : base;
  add("token_embd.weight", -1, spec.vocab, spec.hidden, spec.tied_embeddings ? output_type : base);
  const int64_t q_out = spec.heads * spec.head_dim, kv_out = spec.kv_heads * spec.head_dim;
  for (int64_t i = 0; i < n; ++i) {
    const int L = static_cast<int>(i);
    auto nm = [&](const char* t) { return fmt::format("blk.{}.{}.weight", i, t); };
    add(nm("attn_norm"), L, 1, spec.hidden, GgmlType::kF32);
    add(nm("attn_q"), L, q_out, spec.hidden, base);
    add(nm("attn_k"), L, kv_out, spec.hidden, base);
    GgmlType v = base, down = base, o = base;
    if (f == "Q2_K") {
      v = gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
      down = GgmlType::kQ3_K;
      o = GgmlType::kQ3_K;
    } else if (f == "Q3_K_M") {
      v = i < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      down = i < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      o = GgmlType::kQ4_K;
    } else if (f == "Q3_K_L") {
      v = GgmlType::kQ5_K;
      down = GgmlType::kQ5_K;
      o = GgmlType::kQ5_K;
    } else if (f == "Q4_K_M" || f == "Q5_K_M") {
      if (use_more_bits(i, n)) v = down = GgmlType::kQ6_K;
    } else if (f == "Q4_K_S") {
      if (i < 4) v = GgmlType::kQ5_K;
      if (i < n / 8) down = GgmlType::kQ5_K;
    }
    // 70B: eight query heads share each attn_v, so it gets more bits for almost no size.
    if (is_70b && (v == GgmlType::kQ3_K || v == GgmlType::kQ4_K)) v = GgmlType::kQ5_K;
    add(nm("attn_v"), L, kv_out, spec.hidden, v);
    add(nm("attn_output"), L, spec.hidden, q_out, o);
    add(nm("ffn_norm"), L, 1, spec.hidden, GgmlType::kF32);
    add(nm("ffn_gate"), L, spec.ffn, spec.hidden, base);
    add(nm("ffn_up"), L, spec.ffn, spec.hidden, base);
    add(nm("ffn_down"), L, spec.hidden, spec.ffn, down);
  }
  add("output_norm.weight", -1, 1, spec.hidden, GgmlType::kF32);
  if (!spec.tied_embeddings) add("output.weight", -1, spec.vocab, spec.hidden, output_type);
  return out;
}

}  // namespace gpusim
