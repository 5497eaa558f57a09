// The gpusim program: --help on every command, inspect's text and JSON output, exit codes.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/onnx_builder.h"

namespace {

struct Run {
  int rc;
  std::string out;  // stdout and stderr together
};

Run run_gpusim(const std::string& args) {
  const std::string cmd = std::string(GPUSIM_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string model(const std::string& name) { return gpusim::test::source_dir() + "/models/" + name; }

}  // namespace

TEST_CASE("--help works on the program and every command", "[cli]") {
  const Run top = run_gpusim("--help");
  CHECK(top.rc == 0);
  CHECK_THAT(top.out, Catch::Contains("inspect"));
  CHECK_THAT(top.out, Catch::Contains("ops"));
  for (const char* cmd : {"inspect", "ops"}) {
    INFO(cmd);
    const Run r = run_gpusim(std::string(cmd) + " --help");
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Catch::Contains("Usage"));
  }
}

TEST_CASE("inspect prints MACs and FLOPs and parameters and classes", "[cli]") {
  const Run r = run_gpusim("inspect " + model("resnet50.onnx"));
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("MACs         4.09 G"));
  CHECK_THAT(r.out, Catch::Contains("parameters   25.5 M"));
  CHECK_THAT(r.out, Catch::Contains("conv"));
  CHECK_THAT(r.out, Catch::Contains("largest tensors"));
}

TEST_CASE("inspect --json follows schema gpusim.inspect/1", "[cli]") {
  const Run r = run_gpusim("inspect " + model("bert_base_seq128.onnx") + " --dim batch=2 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "gpusim.inspect/1");
  for (const char* key : {"model", "opset", "nodes", "folded_nodes", "macs", "flops", "flops_by_kind", "bytes_read",
                          "bytes_written", "params", "constants", "activations", "inputs", "outputs", "by_class", "op_types",
                          "largest_tensors", "notes"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  CHECK(j["inputs"][0]["shape"] == nlohmann::json::array({2, 128}));
  int64_t class_macs = 0, class_flops = 0;
  for (const auto& [cls, t] : j["by_class"].items()) {
    class_macs += t["macs"].get<int64_t>();
    class_flops += t["flops"].get<int64_t>();
  }
  CHECK(class_macs == j["macs"].get<int64_t>());
  CHECK(class_flops == j["flops"].get<int64_t>());
  const auto& k = j["flops_by_kind"];
  CHECK(k["fma"].get<int64_t>() + k["transcendental"].get<int64_t>() + k["compare"].get<int64_t>() ==
        j["flops"].get<int64_t>());
  CHECK(j["by_class"]["gemm"]["macs"].get<int64_t>() > 0);
}

TEST_CASE("inspect exits non-zero with the message on bad input", "[cli]") {
  const Run missing = run_gpusim("inspect /nonexistent.onnx");
  CHECK(missing.rc == 1);
  CHECK_THAT(missing.out, Catch::Contains("gpusim inspect: /nonexistent.onnx: cannot open"));
  const Run bad_dim = run_gpusim("inspect " + model("resnet50.onnx") + " --dim batch");
  CHECK(bad_dim.rc == 2);
  CHECK_THAT(bad_dim.out, Catch::Contains("--dim \"batch\": no name before '='"));
  const Run symbolic = run_gpusim("inspect " + model("gpt2_prefill_seq512.onnx"));
  CHECK(symbolic.rc == 1);
  CHECK_THAT(symbolic.out, Catch::Contains("set it with --dim batch=N"));
  const Run usage = run_gpusim("inspect");
  CHECK(usage.rc != 0);
  CHECK_THAT(usage.out, Catch::Contains("model is required"));
}

TEST_CASE("ops lists the catalog", "[cli]") {
  const Run r = run_gpusim("ops --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  bool conv = false;
  for (const auto& op : j["ops"]) conv = conv || (op["op"] == "Conv" && op["class"] == "conv");
  CHECK(conv);
}
