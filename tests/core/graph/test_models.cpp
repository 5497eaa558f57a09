// The bundled shape-only models (models/) and the extra test models (tests/data/models/) import with
// every shape static, ONNX's shape inference agrees, and MAC counts match torchvision's published
// figures within 2%.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpusim/graph_summary.h"
#include "gpusim/onnx_import.h"
#include "support/data_cases.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;

namespace {

gpusim::Graph import_model(const fs::path& p) {
  gpusim::ImportOptions opts;
  // The transformer and diffusion exports keep a symbolic batch.
  auto probe = gpusim::import_onnx(p.string(), opts);
  if (!probe && probe.error().message.find("`dims batch=N`") != std::string::npos) {
    opts.dims["batch"] = 1;
    probe = gpusim::import_onnx(p.string(), opts);
  }
  INFO(p.string());
  if (!probe) FAIL(probe.error().message);
  return std::move(*probe);
}

void check_static(const gpusim::Graph& g) {
  for (const auto& t : g.tensors) {
    INFO(t.name);
    if (!t.is_sequence) CHECK(gpusim::shape_elements(t.shape).has_value());
    CHECK(t.dtype != gpusim::DType::kUndefined);
  }
  for (const auto& note : g.notes) {
    INFO(note);
    CHECK(note.find("disagrees") == std::string::npos);
  }
}

}  // namespace

TEST_CASE("every bundled model imports shape-only with static shapes", "[models]") {
  const fs::path dir = fs::path(gpusim::test::source_dir()) / "models";
  const std::vector<std::string> expected = {"resnet50.onnx",         "mobilenet_v2.onnx",       "vit_b_16.onnx",
                                             "bert_base_seq128.onnx", "gpt2_prefill_seq512.onnx", "sd15_unet_64x64.onnx",
                                             "sd15_vae_decoder_512.onnx"};
  for (const auto& name : expected) {
    INFO(name);
    REQUIRE(fs::exists(dir / name));
    CHECK(fs::file_size(dir / name) < 8'000'000);  // shape-only: no weight data
    const gpusim::Graph g = import_model(dir / name);
    check_static(g);
    CHECK(gpusim::summarize(g).macs > 0);
  }
}

TEST_CASE("bundled models' MACs match the published figures within 2%", "[models]") {
  const fs::path dir = fs::path(gpusim::test::source_dir()) / "models";
  // torchvision's published GMACs ("GFLOPS" in its docs) at 224x224.
  const std::map<std::string, double> published = {
      {"resnet50.onnx", 4.09}, {"mobilenet_v2.onnx", 0.30}, {"vit_b_16.onnx", 17.56}};
  for (const auto& [name, gmacs] : published) {
    INFO(name);
    const auto s = gpusim::summarize(import_model(dir / name));
    CHECK(static_cast<double>(s.macs) / 1e9 == Approx(gmacs).epsilon(0.02));
  }
  // Transformers: 2 x params x tokens style counts, checked against closed forms.
  {
    const auto s = gpusim::summarize(import_model(dir / "bert_base_seq128.onnx"));
    // 12 layers x (4 x 768^2 + 2 x 768 x 3072) x 128 tokens + attention 12 x 2 x 128^2 x 768
    const double want = 12.0 * (4 * 768.0 * 768 + 2 * 768.0 * 3072) * 128 + 12.0 * 2 * 128 * 128 * 768;
    CHECK(static_cast<double>(s.macs) == Approx(want).epsilon(0.02));
    CHECK(static_cast<double>(s.params) / 1e6 == Approx(109.5).epsilon(0.02));
  }
}

namespace {
// The published MACs of tests/data/models, by model file name.
const nlohmann::json& published_macs() {
  static const nlohmann::json j = [] {
    std::ifstream f(fs::path(gpusim::test::source_dir()) / "tests" / "data" / "models" / "published_macs.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

// One test case per model file: it imports with static shapes, and where torchvision (or the
// model's source) publishes its MACs, gpusim's count is within 2% of them.
const int model_cases = gpusim::test::file_cases(
    "tests/data/models", ".onnx", "extra model imports and its MACs match the published figure", "[models]",
    [](const fs::path& model) {
      const gpusim::Graph g = import_model(model);
      check_static(g);
      for (const auto& [name, entry] : published_macs()["models"].items()) {
        const std::string file = entry.contains("model") ? entry["model"].get<std::string>() : name + ".onnx";
        if (file != model.filename().string()) continue;
        INFO(name);
        const double want = entry["gmacs"].get<double>();
        const double got = static_cast<double>(gpusim::summarize(g).macs) / 1e9;
        CHECK(got == Approx(want).epsilon(0.02));
      }
    });
}  // namespace

TEST_CASE("every published MACs figure names a model file that is there", "[models]") {
  const fs::path dir = fs::path(gpusim::test::source_dir()) / "tests" / "data" / "models";
  CHECK(model_cases >= 25);
  int checked = 0;
  for (const auto& [name, entry] : published_macs()["models"].items()) {
    INFO(name);
    const fs::path model = entry.contains("model") ? dir / entry["model"].get<std::string>() : dir / (name + ".onnx");
    CHECK(fs::exists(model));
    ++checked;
  }
  CHECK(checked >= 25);
}
