// Every graph in the ONNX project's test data (../shared/onnx-testdata) imports with all shapes
// known, and the output shapes gpusim infers equal the dims of the expected outputs stored beside
// each model. Skipped, saying so, where the data is absent (a user's fresh clone has no ../shared).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "gpusim/graph_summary.h"
#include "gpusim/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/skip.h"

namespace fs = std::filesystem;

namespace {

std::optional<onnx::TensorProto> read_tensor(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  onnx::TensorProto t;
  if (!f || !t.ParseFromIstream(&f)) return std::nullopt;
  return t;
}

}  // namespace

TEST_CASE("every ONNX test-data graph imports and its output shapes match the expected outputs", "[testdata]") {
  const std::string root = gpusim::test::onnx_testdata_dir();
  if (root.empty()) {
    SKIPPED("../shared/onnx-testdata not found (set GPUSIM_ONNX_TESTDATA to its path)");
    return;
  }
  int models = 0, outputs_checked = 0;
  for (const char* suite : {"simple", "pytorch-converted", "pytorch-operator"}) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(root) / suite)) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      const fs::path model = dir / "model.onnx";
      const fs::path data = dir / "test_data_set_0";
      INFO(model.string());
      // Feed the dims of the stored inputs, as a user would with --dim.
      gpusim::ImportOptions opts;
      const auto names = gpusim::test::graph_input_names(model.string());
      for (size_t i = 0; i < names.size(); ++i) {
        auto t = read_tensor(data / fmt::format("input_{}.pb", i));
        if (!t) continue;
        for (int a = 0; a < t->dims_size(); ++a) opts.dims[fmt::format("{}:{}", names[i], a)] = t->dims(a);
      }
      auto g = gpusim::import_onnx(model.string(), opts);
      INFO((g ? std::string() : g.error().message));
      REQUIRE(g);
      ++models;
      for (const auto& note : g->notes) {
        INFO(note);
        CHECK(note.find("disagrees") == std::string::npos);
      }
      for (size_t i = 0; i < g->outputs.size(); ++i) {
        const gpusim::Tensor& out = g->tensor(g->outputs[i]);
        if (out.is_sequence) continue;
        auto expected = read_tensor(data / fmt::format("output_{}.pb", i));
        if (!expected) continue;
        const gpusim::Shape want(expected->dims().begin(), expected->dims().end());
        INFO("output " << out.name);
        CHECK(gpusim::shape_str(out.shape) == gpusim::shape_str(want));
        CHECK(static_cast<int>(out.dtype) == expected->data_type());
        ++outputs_checked;
      }
    }
  }
  CHECK(models == 140);
  CHECK(outputs_checked >= 140);
}

TEST_CASE("the light model-zoo graphs import with their published MAC counts", "[testdata]") {
  const std::string root = gpusim::test::onnx_testdata_dir();
  if (root.empty()) {
    SKIPPED("../shared/onnx-testdata not found (set GPUSIM_ONNX_TESTDATA to its path)");
    return;
  }
  // GMACs at 224x224 for the architectures these files hold (VGG-19 and ResNet-50 as torchvision
  // publishes them; the Caffe AlexNet and Inception v1 and SqueezeNet 1.1 differ from torchvision's).
  const std::map<std::string, double> gmacs = {
      {"light_resnet50.onnx", 4.09}, {"light_vgg19.onnx", 19.63}, {"light_squeezenet.onnx", 0.35}};
  for (const auto& e : fs::directory_iterator(fs::path(root) / "light")) {
    if (e.path().extension() != ".onnx") continue;
    INFO(e.path().string());
    auto g = gpusim::import_onnx(e.path().string());
    INFO((g ? std::string() : g.error().message));
    REQUIRE(g);
    const auto s = gpusim::summarize(*g);
    CHECK(s.macs > 0);
    CHECK(s.params > 1000000);  // weights built by ConstantOfShape count as parameters
    if (auto it = gmacs.find(e.path().filename().string()); it != gmacs.end()) {
      CHECK(static_cast<double>(s.macs) / 1e9 == Approx(it->second).epsilon(0.02));
    }
  }
}
