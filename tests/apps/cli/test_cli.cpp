// The gpusim program: --help on every command, inspect's text and JSON output, exit codes.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include <new>
#include <stdexcept>

#include "firewall.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/devices.h"
#include "support/onnx_builder.h"
#include "exit_codes.h"
#include "support/run_cli.h"
#include "support/skip.h"

namespace {

using gpusim::test::Run;
using gpusim::test::run_gpusim;

std::string model(const std::string& name) { return gpusim::test::source_dir() + "/models/" + name; }

}  // namespace

TEST_CASE("--help works on the program and every command", "[cli]") {
  const Run top = run_gpusim("--help");
  CHECK(top.rc == 0);
  CHECK_THAT(top.out, Catch::Contains("inspect"));
  CHECK_THAT(top.out, Catch::Contains("ops"));
  for (const char* cmd : {"inspect", "ops", "predict", "compare", "profiles"}) {
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

TEST_CASE("predict prints the breakdown and writes a trace", "[cli][predict]") {
  const std::string trace = gpusim::test::temp_dir() + "/vae.trace.json";
  const Run r = run_gpusim("predict " + model("sd15_vae_decoder_512.onnx") +
                           " --gpu nvidia-rtx-3060 --dtype fp16 --dim batch=1 --trace " + trace);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("gpu      NVIDIA GeForce RTX 3060 12GB (nvidia-rtx-3060), fp16"));
  CHECK_THAT(r.out, Catch::Contains("Conv [mma]"));
  CHECK_THAT(r.out, Catch::Contains("by bound"));
  std::ifstream f(trace);
  REQUIRE(f);
  const auto j = nlohmann::json::parse(f);
  CHECK(j["traceEvents"].size() > 200);
}

TEST_CASE("predict --json follows schema gpusim.predict/1", "[cli][predict]") {
  const Run r = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-a100-40gb --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "gpusim.predict/1");
  for (const char* key : {"model", "gpu", "dtype", "total_us", "kernels_us", "launch_bound_us", "kernel_count",
                          "peak_memory_bytes", "weight_bytes", "fits_in_memory", "energy_j", "kernels", "transfers",
                          "notes"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  const auto& k = j["kernels"][0];
  for (const char* key : {"name", "op_type", "class", "time_us", "share", "bound", "compute_us", "dram_us", "l2_us",
                          "ctas", "waves", "occupancy", "tile", "matrix_units", "achieved_tflops", "achieved_gbps"}) {
    INFO(key);
    CHECK(k.contains(key));
  }
  CHECK(j["kernel_count"].get<size_t>() == j["kernels"].size());
}

TEST_CASE("predict --runtime paces launches by a framework's host time, and an unknown one is named",
          "[cli][predict][runtime]") {
  const std::string m = model("bert_base_seq128.onnx") + " --gpu nvidia-t4 --dim batch=1 --json";
  const Run own = run_gpusim("predict " + m);
  const Run eager = run_gpusim("predict " + m + " --runtime pytorch-eager");
  REQUIRE(own.rc == 0);
  REQUIRE(eager.rc == 0);
  const auto a = nlohmann::json::parse(own.out), b = nlohmann::json::parse(eager.out);
  CHECK(a["runtime"] == "gpusim");
  CHECK(b["runtime"] == "pytorch-eager");
  // Hundreds of op calls at tens of microseconds each: PyTorch eager is host-bound on BERT-base.
  CHECK(b["host_us"].get<double>() > 20.0 * b["kernel_count"].get<double>());
  CHECK(b["total_us"].get<double>() >= b["host_us"].get<double>());
  CHECK(b["total_us"].get<double>() > a["total_us"].get<double>());
  // And the kernels it launches: GELU's five exported nodes one kernel, Linear's MatMul and bias one.
  CHECK(b["kernel_count"].get<int>() < a["kernel_count"].get<int>());
  CHECK(b["kernels_us"].get<double>() < a["kernels_us"].get<double>());
  bool gelu = false;
  for (const auto& k : b["kernels"]) gelu = gelu || (k["fusions"].size() == 1 && k["fusions"][0] == "gelu" && k["nodes"].size() == 5);
  CHECK(gelu);
  const Run bad = run_gpusim("predict " + m + " --runtime tensorflow");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("gpusim predict: --runtime: runtime \"tensorflow\" is unknown; known runtimes: "
                                      "cuda-graph, gpusim"));
  // The tile space follows the runtime unless --tiles names one: gpusim's executor runs generated
  // kernels, PyTorch calls vendor libraries.
  CHECK(a["tiles"].get<std::string>().rfind("generated (codegen", 0) == 0);
  CHECK(b["tiles"] == "library (the cost model's whole menu)");
  const Run lib = run_gpusim("predict " + m + " --tiles library");
  REQUIRE(lib.rc == 0);
  CHECK(nlohmann::json::parse(lib.out)["tiles"] == b["tiles"]);
  const Run badt = run_gpusim("predict " + m + " --tiles menu");
  CHECK(badt.rc == 2);
  CHECK_THAT(badt.out, Catch::Contains("gpusim predict: --tiles: \"menu\" is not a tile space; use generated (the "
                                       "kernels gpusim's code generator builds"));
  // TF32 is off unless asked (PyTorch's matmul default): asked, an Ampere card's fp32 GEMMs are
  // priced as TF32 on the matrix units and marked; a card without TF32 keeps them on the vector units.
  const std::string a100 = model("bert_base_seq128.onnx") + " --gpu nvidia-a100-40gb --dim batch=1";
  const Run off = run_gpusim("predict " + a100);
  const Run on = run_gpusim("predict " + a100 + " --allow-tf32");
  REQUIRE(off.rc == 0);
  REQUIRE(on.rc == 0);
  CHECK_THAT(off.out, Catch::Contains("fp32 GEMM and convolution kernels run in full fp32 on the vector units"));
  CHECK_THAT(on.out, Catch::Contains("[tf32]") && Catch::Contains("TF32 allowed:") && Catch::Contains("[tf32] = fp32 on the matrix units as TF32"));
  const Run onj = run_gpusim("predict " + a100 + " --allow-tf32 --json");
  const Run offj = run_gpusim("predict " + a100 + " --json");
  REQUIRE(onj.rc == 0);
  REQUIRE(offj.rc == 0);
  CHECK(nlohmann::json::parse(onj.out)["kernels_us"].get<double>() < nlohmann::json::parse(offj.out)["kernels_us"].get<double>());
  // The library menu too: a framework with TF32 allowed (cuBLAS's TF32 kernels).
  const Run lib32 = run_gpusim("predict " + a100 + " --tiles library --allow-tf32 --json");
  REQUIRE(lib32.rc == 0);
  const auto lib32_doc = nlohmann::json::parse(lib32.out);
  int lib_tf32 = 0;
  for (const auto& k : lib32_doc["kernels"]) lib_tf32 += k["tf32"].get<bool>();
  CHECK(lib_tf32 > 0);
  // A plan made with TF32 says so, and prices so when read back.
  const std::string plan_file = gpusim::test::temp_dir() + "/tf32.plan.json";
  const Run planned = run_gpusim("plan " + a100 + " --tiles library --allow-tf32 --scheduler eager --out " + plan_file);
  REQUIRE(planned.rc == 0);
  CHECK(nlohmann::json::parse(gpusim::test::file_bytes(plan_file))["allow_tf32"] == true);
  const Run replay = run_gpusim("predict " + a100 + " --plan " + plan_file + " --json");
  REQUIRE(replay.rc == 0);
  CHECK(nlohmann::json::parse(replay.out)["kernels_us"].get<double>() ==
        Approx(lib32_doc["kernels_us"].get<double>()).epsilon(1e-6));
  const Run t4 = run_gpusim("predict " + model("bert_base_seq128.onnx") + " --gpu nvidia-t4 --dim batch=1 --allow-tf32 --json");
  REQUIRE(t4.rc == 0);
  const auto t4_doc = nlohmann::json::parse(t4.out);
  REQUIRE(t4_doc["kernels"].size() > 0);
  for (const auto& k : t4_doc["kernels"]) CHECK_FALSE(k["tf32"].get<bool>());
  const Run badm = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend null --matrix-path tensor");
  CHECK(badm.rc == 2);
  CHECK_THAT(badm.out, Catch::Contains("--matrix-path \"tensor\" is not a path to choose; use none"));
  CHECK_THAT(off.out, Catch::Contains("(TF32 off); --allow-tf32 prices them on the matrix units as TF32"));
  const Run badp = run_gpusim("plan " + model("bert_base_seq128.onnx") + " --gpu nvidia-t4 --dim batch=1 --tiles menu");
  CHECK(badp.rc == 2);
  CHECK_THAT(badp.out, Catch::Contains("gpusim plan: --tiles: \"menu\" is not a tile space"));
}

TEST_CASE("compare ranks GPUs and bad arguments are named", "[cli][predict]") {
  const Run r = run_gpusim("compare " + model("bert_base_seq128.onnx") +
                           " --gpus nvidia-t4,nvidia-h100-sxm --dtype fp16 --dim batch=1 --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["gpus"].size() == 2);
  CHECK(j["gpus"][1]["total_us"].get<double>() < j["gpus"][0]["total_us"].get<double>());
  const Run bad_gpu = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-rtx-9999");
  CHECK(bad_gpu.rc == 1);
  CHECK_THAT(bad_gpu.out, Catch::Contains("no GPU profile named \"nvidia-rtx-9999\"; closest: nvidia-rtx-"));
  const Run bad_dtype = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-t4 --dtype fp4");
  CHECK(bad_dtype.rc == 2);
  CHECK_THAT(bad_dtype.out, Catch::Contains("--dtype \"fp4\" is not supported; expected fp32, fp16, bf16, int8 or fp8"));
  // fp8 is a type, but not the T4's (Turing has no fp8 matrix units).
  const Run t4_fp8 = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-t4 --dtype fp8 --tiles library");
  CHECK(t4_fp8.rc == 2);
  CHECK_THAT(t4_fp8.out, Catch::Contains("Tesla T4 (nvidia-t4) has no fp8 matrix units"));
}

TEST_CASE("compare --gpus all compares every profile, as dojo --gpu all takes them", "[cli][predict]") {
  const Run list = run_gpusim("profiles list --json");
  REQUIRE(list.rc == 0);
  size_t loadable = 0;
  const auto profiles = nlohmann::json::parse(list.out);
  for (const auto& p : profiles.at("profiles")) loadable += p.value("valid", false) ? 1 : 0;
  const Run r = run_gpusim("compare " + model("resnet50.onnx") + " --gpus all --dtype fp16 --json");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpus"].size() == loadable);
  CHECK(loadable > 30);
}

TEST_CASE("run executes a model on the CPU reference and times every node", "[cli][run]") {
  const Run r = run_gpusim("run " + model("resnet50.onnx") + " --repeat 1 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "gpusim.run/1");
  CHECK(j["outputs"][0]["shape"] == nlohmann::json::array({1, 1000}));
  CHECK(j["nodes"].size() > 100);
  CHECK(j["total_us"].get<double>() > 0);
  bool seeded = false;
  for (const auto& n : j["notes"]) seeded = seeded || n.get<std::string>().find("filled from seed") != std::string::npos;
  CHECK(seeded);  // a shape-only model: the run says its weights and input came from the seed
  const Run bad = run_gpusim("run " + model("resnet50.onnx") + " --backend metal");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("--backend \"metal\" is not a backend; choose cpu, null, vulkan, cuda or hip"));
}

TEST_CASE("run feeds inputs from .pb files and reproduces an ONNX test graph", "[cli][run]") {
  const std::string root = gpusim::test::onnx_testdata_dir();
  if (root.empty()) {
    SKIPPED("../shared/onnx-testdata not found");
    return;
  }
  const std::string dir = root + "/pytorch-operator/test_operator_add_broadcast";
  const Run r = run_gpusim("run " + dir + "/model.onnx --input " + dir + "/test_data_set_0/input_0.pb --input " + dir +
                           "/test_data_set_0/input_1.pb --repeat 1 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["notes"].empty());  // weights and inputs all given
}

// main()'s firewall, the same template: a bug thrown past a command exits 70 (EX_SOFTWARE) with a
// message, never terminate(); a parse error keeps CLI11's codes; a command's own code passes through.
TEST_CASE("the gpusim program's exception firewall turns anything thrown into exit 70", "[cli][errors]") {
  auto no_parse_errors = [](const std::exception&) { return -1; };
  CHECK(gpusim::cli::firewall([] { return 3; }, no_parse_errors) == 3);
  CHECK(gpusim::cli::firewall([]() -> int { throw std::out_of_range("vector::at"); }, no_parse_errors) == 70);
  CHECK(gpusim::cli::firewall([]() -> int { throw std::bad_alloc(); }, no_parse_errors) == 70);
  CHECK(gpusim::cli::firewall([]() -> int { throw 42; }, no_parse_errors) == 70);
  auto usage = [](const std::exception& e) { return std::string(e.what()) == "usage" ? 2 : -1; };
  CHECK(gpusim::cli::firewall([]() -> int { throw std::runtime_error("usage"); }, usage) == 2);
  CHECK(gpusim::cli::firewall([]() -> int { throw std::runtime_error("other"); }, usage) == 70);
}

TEST_CASE("a misspelt command or option is named with the closest one", "[cli][errors]") {
  const Run cmd = run_gpusim("prdict " + model("resnet50.onnx"));
  CHECK(cmd.rc == 2);
  CHECK_THAT(cmd.out, Catch::Contains("gpusim: \"prdict\" is not a command; did you mean \"predict\"? (commands: "));
  const Run far = run_gpusim("xyzzy");
  CHECK(far.rc == 2);
  CHECK_THAT(far.out, Catch::Contains("gpusim: \"xyzzy\" is not a command (commands: inspect, ops, predict"));
  const Run opt = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-t4 --dtyp fp16");
  CHECK(opt.rc == 2);
  CHECK_THAT(opt.out, Catch::Contains("gpusim predict: unknown option \"--dtyp\"; did you mean \"--dtype\"? "
                                      "(`gpusim predict --help` lists the options)"));
  const Run nested = run_gpusim("truth stats --db x.db --dbb y");
  CHECK(nested.rc == 2);
  CHECK_THAT(nested.out, Catch::Contains("gpusim truth stats: unknown option \"--dbb\"; did you mean \"--db\"?"));
}

TEST_CASE("predict takes a GPU by display name or short form", "[cli][predict]") {
  const Run by_short = run_gpusim("predict " + model("resnet50.onnx") + " --gpu \"RTX 3060\" --json");
  REQUIRE(by_short.rc == 0);
  const Run by_id = run_gpusim("predict " + model("resnet50.onnx") + " --gpu nvidia-rtx-3060 --json");
  REQUIRE(by_id.rc == 0);
  CHECK(by_short.out == by_id.out);
  const Run ambiguous = run_gpusim("predict " + model("resnet50.onnx") + " --gpu a100");
  CHECK(ambiguous.rc == 1);
  CHECK_THAT(ambiguous.out, Catch::Contains("no GPU profile named \"a100\", and it matches 4 profiles: nvidia-a100-40gb, "
                                            "nvidia-a100-80gb, nvidia-a100-pcie-40gb, nvidia-a100-pcie-80gb; name one"));
}

TEST_CASE("compare takes GPU lists with spaces and run refuses a zero repeat with the range", "[cli][errors]") {
  const Run spaced = run_gpusim("compare " + model("mobilenet_v2.onnx") + " --gpus \"nvidia-t4, nvidia-l4\" --json");
  REQUIRE(spaced.rc == 0);
  CHECK(nlohmann::json::parse(spaced.out)["gpus"].size() == 2);
  const Run repeat = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend cpu --repeat 0");
  CHECK(repeat.rc == 2);
  CHECK_THAT(repeat.out, Catch::Contains("--repeat: Value 0 not in range 1 to 10000"));
}

// Issue 16.3: a printed suggestion runs as printed. plan --out prints the predict command that scores
// the plan, with the --dim and --dtype the graph needs and a path with a space quoted.
TEST_CASE("the predict command plan --out prints runs as printed", "[cli][plan]") {
  const std::string dir = gpusim::test::temp_dir() + "/plan hint";
  std::remove((dir + "/p.json").c_str());
  REQUIRE(std::system(("mkdir -p '" + dir + "'").c_str()) == 0);
  const Run r = run_gpusim("plan " + model("bert_base_seq128.onnx") + " --gpu a100-40gb --dim batch=2 --dtype fp16 --out '" +
                           dir + "/p.json'");
  REQUIRE(r.rc == 0);
  const std::string marker = "score it with:\n  ";
  const auto at = r.out.find(marker);
  REQUIRE(at != std::string::npos);
  const std::string hint = r.out.substr(at + marker.size(), r.out.find('\n', at + marker.size()) - at - marker.size());
  INFO(hint);
  REQUIRE(hint.rfind("gpusim predict ", 0) == 0);
  CHECK_THAT(hint, Catch::Contains("--dim batch=2") && Catch::Contains("--dtype fp16") &&
                       Catch::Contains("--plan '" + dir + "/p.json'"));
  const Run p = run_gpusim(hint.substr(std::string("gpusim ").size()));
  INFO(p.out);
  CHECK(p.rc == 0);
  CHECK_THAT(p.out, Catch::Contains("plan from the greedy scheduler"));
  CHECK_THAT(p.out, !Catch::Contains("the plan was made for"));
}

// Issue 16.6: what the hardware or the plan cannot do is refused or said, never silently priced.
TEST_CASE("bf16 on a GPU without it is refused and a plan used elsewhere is noted", "[cli][predict][errors]") {
  for (const char* gpu : {"t4", "v100", "gtx-1080-ti"}) {
    INFO(gpu);
    const Run r = run_gpusim("predict " + model("resnet50.onnx") + " --gpu " + gpu + " --dtype bf16");
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Catch::Contains("has no bf16 arithmetic") && Catch::Contains("use --dtype fp16 or --dtype fp32"));
  }
  CHECK(run_gpusim("predict " + model("resnet50.onnx") + " --gpu a100-40gb --dtype bf16").rc == 0);

  const std::string plan = gpusim::test::temp_dir() + "/bert_b2_fp16.json";
  REQUIRE(run_gpusim("plan " + model("bert_base_seq128.onnx") + " --gpu a100-40gb --dim batch=2 --dtype fp16 --out " +
                     plan).rc == 0);
  const Run r = run_gpusim("predict " + model("bert_base_seq128.onnx") + " --gpu l4 --dim batch=4 --dtype fp32 --plan " + plan);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("the plan was made for nvidia-a100-40gb, not nvidia-l4"));
  CHECK_THAT(r.out, Catch::Contains("--dtype fp32 overrides the plan's fp16"));
  CHECK_THAT(r.out, Catch::Contains("input \"input_ids\" is [4, 128] here but [2, 128] in the plan"));
  const Run bf = run_gpusim("predict " + model("bert_base_seq128.onnx") + " --gpu t4 --dim batch=2 --dtype bf16 --plan " + plan);
  CHECK(bf.rc == 2);
  CHECK_THAT(bf.out, Catch::Contains("Tesla T4 (nvidia-t4) has no bf16 arithmetic"));
}

TEST_CASE("calibrate refuses a --base of another device before measuring", "[cli][calibrate][vulkan]") {
  if (!gpusim::test::device("vulkan")) return;  // says why
  const Run probe = run_gpusim("calibrate --backend vulkan --base nvidia-a100-40gb --quick --out " +
                               gpusim::test::temp_dir() + "/wrong-base.yaml");
  INFO(probe.out);
  CHECK(probe.rc == 2);
  CHECK_THAT(probe.out, Catch::Contains("--base nvidia-a100-40gb is another device") &&
                            Catch::Contains("whose datasheet profile is lavapipe") &&
                            Catch::Contains("--force-base"));
  std::ifstream written(gpusim::test::temp_dir() + "/wrong-base.yaml");
  CHECK_FALSE(written.good());
}

// Issue 16.4: out-of-range arguments are refused naming the flag and the range; a zero dim is taken
// where the model still computes something and refused where it empties every output.
TEST_CASE("plan search sizes and zero dims are refused with the allowed range", "[cli][errors]") {
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--top 0", "--top 0 is out of range; give an integer from 1 to 100"},
           {"--scheduler random --samples 0", "--samples 0 is out of range; give an integer from 1 to 100000"},
           {"--scheduler beam --beam-width -1", "--beam-width -1 is out of range; give an integer from 1 to 256"},
           {"--memory-budget-gb -3", "--memory-budget-gb -3 is negative"}}) {
    INFO(args);
    const Run r = run_gpusim("plan " + model("resnet50.onnx") + " --gpu t4 " + args);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Catch::Contains(want));
  }
  const Run zero = run_gpusim("predict " + model("bert_base_seq128.onnx") + " --gpu t4 --dim batch=0");
  CHECK(zero.rc == 2);
  CHECK_THAT(zero.out, Catch::Contains("--dim batch=0 leaves every output empty (\"last_hidden_state\" is [0, 128, 768])"));
}

TEST_CASE("a zero dim that leaves outputs with elements is taken", "[import]") {
  // y = Concat(past [1, P, 4], x [1, 2, 4]) on axis 1: past length 0 is the first decode step.
  gpusim::test::OnnxBuilder b(17);
  b.input("past", onnx::TensorProto::FLOAT, {int64_t{1}, std::string("past_len"), int64_t{4}});
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 4});
  b.node("Concat", {"past", "x"}, {"y"}).i("axis", 1);
  b.output("y");
  const Run r = run_gpusim("predict " + b.write("past_kv.onnx") + " --gpu t4 --dim past_len=0");
  INFO(r.out);
  CHECK(r.rc == 0);
}

// Issue 16.7 and 16.8: plan marks plans over the memory, fails when none fits, shows the shapes and
// dtype it planned for, and lists decisions by time saved, 20 unless --all.
TEST_CASE("plan marks what does not fit and exits 3 and its header and decision list say what was planned",
          "[cli][plan]") {
  const Run over = run_gpusim("plan " + model("sd15_unet_64x64.onnx") + " --gpu rtx-4060 --dim batch=16");
  INFO(over.out);
  CHECK(over.rc == 3);
  CHECK_THAT(over.out, Catch::Contains("GB!") && Catch::Contains("! over the 8 GB of nvidia-rtx-4060's memory"));
  CHECK_THAT(over.out, Catch::Contains("gpusim plan: no plan fits: the best needs") &&
                           Catch::Contains("even with weights offloaded"));
  CHECK_THAT(over.out, Catch::Contains("and the plan still needs") && !Catch::Contains("so the plan fits"));
  CHECK_THAT(over.out, Catch::Contains("inputs   sample [16, 4, 64, 64], timestep [16], encoder_hidden_states [16, 77, 768]"));

  const Run fits = run_gpusim("plan " + model("resnet50.onnx") + " --gpu t4 --dtype fp16");
  CHECK(fits.rc == 0);
  CHECK_THAT(fits.out, Catch::Contains("gpu      Tesla T4 (nvidia-t4), fp16") && !Catch::Contains("GB!"));
  CHECK_THAT(fits.out, Catch::Contains("the 20 that save most; --all lists every one"));
  const auto listed = [](const std::string& out) {
    size_t n = 0;
    for (size_t at = out.find("\n  - "); at != std::string::npos; at = out.find("\n  - ", at + 1)) ++n;
    return n;
  };
  CHECK(listed(fits.out) == 20);
  const Run all = run_gpusim("plan " + model("resnet50.onnx") + " --gpu t4 --dtype fp16 --all");
  CHECK(all.rc == 0);
  CHECK(listed(all.out) > 20);
  CHECK_THAT(all.out, !Catch::Contains("--all lists every one"));
}

TEST_CASE("compare's shares add up and run reconciles its prediction with predict's", "[cli][run][vulkan]") {
  const Run cmp = run_gpusim("compare " + model("mobilenet_v2.onnx") + " --gpus nvidia-t4,nvidia-a10");
  INFO(cmp.out);
  REQUIRE(cmp.rc == 0);
  CHECK_THAT(cmp.out, Catch::Contains("dram%") && Catch::Contains("l2%") && Catch::Contains("latency%"));
  const Run cmpj = run_gpusim("compare " + model("mobilenet_v2.onnx") + " --gpus nvidia-t4 --json");
  REQUIRE(cmpj.rc == 0);
  const auto g = nlohmann::json::parse(cmpj.out)["gpus"][0];
  INFO(g.dump());
  const double shares = g["compute_share"].get<double>() + g["dram_share"].get<double>() +
                        g["l2_share"].get<double>() + g["latency_share"].get<double>();
  CHECK(shares == Approx(1.0).margin(1e-6));

  if (!gpusim::test::device("vulkan")) return;  // says why
  // An fp16 model runs in fp16 unless told otherwise, as predict prices it.
  gpusim::test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT16, {64, 128});
  b.initializer("w", onnx::TensorProto::FLOAT16, {128, 256});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  const std::string half = b.write("half_matmul.onnx");
  const Run r = run_gpusim("run " + half + " --backend vulkan --gpu t4 --repeat 1 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["dtype"] == "fp16");
  const Run r32 = run_gpusim("run " + half + " --backend vulkan --gpu t4 --repeat 1 --dtype fp32 --json");
  REQUIRE(r32.rc == 0);
  CHECK(nlohmann::json::parse(r32.out)["dtype"] == "fp32");

  // The eager run takes codegen's tiles, as `gpusim predict` prices them (one target): its
  // predicted figure is predict's, with nothing to reconcile.
  const Run mb = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend vulkan --gpu t4 --repeat 1");
  INFO(mb.out);
  REQUIRE(mb.rc == 0);
  const Run mp = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu t4 --json");
  REQUIRE(mp.rc == 0);
  CHECK_THAT(mb.out, Catch::Contains(fmt::format("predicted {:.3f} ms of kernel time on nvidia-t4",
                                                 nlohmann::json::parse(mp.out)["kernels_us"].get<double>() / 1e3)) &&
                         !Catch::Contains("prices the eager plan"));
  // A plan ranked over the whole tile menu (--tiles library), whose tiles codegen does not all
  // generate: the note gives predict --plan's figure, to the digit.
  const std::string plan = gpusim::test::temp_dir() + "/mb_plan.json";
  REQUIRE(run_gpusim("plan " + model("mobilenet_v2.onnx") + " --gpu t4 --tiles library --out " + plan).rc == 0);
  const Run pp = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu t4 --plan " + plan + " --json");
  REQUIRE(pp.rc == 0);
  const double predicted_ms = nlohmann::json::parse(pp.out)["kernels_us"].get<double>() / 1e3;
  const Run rp = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend vulkan --gpu t4 --repeat 1 --plan " + plan);
  INFO(rp.out);
  REQUIRE(rp.rc == 0);
  CHECK_THAT(rp.out, Catch::Contains(fmt::format("`gpusim predict --plan` prices the plan's own tiles: {:.3f} ms",
                                                 predicted_ms)));
  // A default plan holds only generated tiles: it runs as priced, nothing to reconcile.
  const std::string generated = gpusim::test::temp_dir() + "/mb_generated_plan.json";
  REQUIRE(run_gpusim("plan " + model("mobilenet_v2.onnx") + " --gpu t4 --out " + generated).rc == 0);
  const Run rg = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend vulkan --gpu t4 --repeat 1 --plan " +
                            generated);
  REQUIRE(rg.rc == 0);
  CHECK_THAT(rg.out, !Catch::Contains("prices the plan's own tiles") && !Catch::Contains("does not build as asked"));
}

TEST_CASE("run draws progress on stderr when asked and --quiet silences it", "[cli][run]") {
  const Run r = run_gpusim("run " + model("mobilenet_v2.onnx") + " --repeat 2 --progress --check");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  // Not a terminal: a line per phase, before the results.
  CHECK_THAT(r.out, Catch::Contains("gpusim run: warm-up 0/") && Catch::Contains(" nodes [") &&
                        Catch::Contains("gpusim run: timed run 1/2 0/") && Catch::Contains("gpusim run: timed run 2/2"));
  const Run quiet = run_gpusim("run " + model("mobilenet_v2.onnx") + " --repeat 1 --progress --quiet");
  REQUIRE(quiet.rc == 0);
  CHECK_THAT(quiet.out, !Catch::Contains("gpusim run: warm-up"));
  const Run piped = run_gpusim("run " + model("mobilenet_v2.onnx") + " --repeat 1");
  REQUIRE(piped.rc == 0);
  CHECK_THAT(piped.out, !Catch::Contains("gpusim run: warm-up"));  // stderr is not a terminal here
  if (!gpusim::test::device("vulkan")) return;  // says why
  const Run dev = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend vulkan --repeat 1 --progress --check");
  INFO(dev.out);
  REQUIRE(dev.rc == 0);
  CHECK_THAT(dev.out, Catch::Contains("gpusim run: compile 0/") && Catch::Contains(" kernels [") &&
                          Catch::Contains(" launches [") && Catch::Contains("gpusim run: check (CPU reference) 0/"));
}

TEST_CASE("profiles validate lists every problem and answers --json", "[cli][profiles]") {
  const std::string dir = gpusim::test::temp_dir() + "/validate-cli";
  std::filesystem::create_directories(dir);
  std::string text = gpusim::test::file_bytes(gpusim::test::source_dir() + "/gpu_profiles/nvidia/nvidia-t4.yaml");
  REQUIRE(!text.empty());
  const auto swap = [&text](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("name: nvidia-t4", "name: broken-t4");
  swap("warp_size: 32", "warp_size: 48");
  swap("tdp_w: 70", "tdp_w: -70");
  const std::string bad = dir + "/broken-t4.yaml";
  std::ofstream(bad) << text;
  const Run r = run_gpusim("profiles validate " + bad);
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("FAIL " + bad + ": 2 problems") && Catch::Contains("compute.warp_size: \"48\"") &&
                        Catch::Contains("power.tdp_w: -70 is negative"));
  const Run j = run_gpusim("profiles validate " + bad + " nvidia-t4 --json");
  INFO(j.out);
  CHECK(j.rc == 1);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["schema"] == "gpusim.profiles-validate/1");
  CHECK(doc["invalid"] == 1);
  CHECK(doc["profiles"][0]["problems"].size() == 2);
  CHECK(doc["profiles"][1]["valid"] == true);
  const Run ok = run_gpusim("profiles validate nvidia-t4 --json");
  CHECK(ok.rc == 0);
}

TEST_CASE("gpusim --version prints the version and the commit built", "[cli]") {
  const Run v = run_gpusim("--version");
  INFO(v.out);
  REQUIRE(v.rc == 0);
  CHECK_THAT(v.out, Catch::StartsWith("gpusim 0.1.0 (commit "));
  // The commit is the source tree's own (refreshed at every build), or "unknown" outside a checkout.
  const std::string src = gpusim::test::source_dir();
  if (!std::filesystem::exists(src + "/.git")) {
    CHECK_THAT(v.out, Catch::Contains("(commit unknown)"));
    return;
  }
  std::string head;
  if (FILE* p = popen(("git -C '" + src + "' rev-parse --short=12 HEAD 2>/dev/null").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p) != nullptr) head = buf;
    pclose(p);
  }
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  if (head.empty()) {
    SKIPPED("git cannot read " << src << "'s HEAD here");
    return;
  }
  CHECK_THAT(v.out, Catch::Contains(head));
}

TEST_CASE("every command's help states its exit codes as the README's table does", "[cli][docs]") {
  const std::string readme = gpusim::test::file_bytes(gpusim::test::source_dir() + "/README.md");
  REQUIRE(!readme.empty());
  const Run top = run_gpusim("--help");
  REQUIRE(top.rc == 0);
  const size_t list = top.out.find("Subcommands:");
  REQUIRE(list != std::string::npos);
  int commands = 0;
  for (size_t at = top.out.find("\n  ", list); at != std::string::npos; at = top.out.find("\n  ", at + 1)) {
    const size_t start = at + 3, end = top.out.find(' ', start);
    const std::string cmd = top.out.substr(start, end - start);
    if (cmd.empty()) continue;
    ++commands;
    const Run help = run_gpusim(cmd + " --help");
    INFO(cmd << ":\n" << help.out);
    const size_t from = help.out.find("Exit codes: "), to = help.out.find("; 70 an internal error");
    REQUIRE(from != std::string::npos);
    REQUIRE(to != std::string::npos);
    std::string text;  // CLI11 may wrap the footer: join its lines
    for (char c : help.out.substr(from + 12, to - from - 12)) {
      if (c == '\n') c = ' ';
      if (!(c == ' ' && !text.empty() && text.back() == ' ')) text += c;
    }
    CHECK_THAT(readme, Catch::Contains("| `gpusim " + cmd + "` | " + text + " |"));
  }
  CHECK(commands == static_cast<int>(gpusim::cli::exit_codes().size()));  // every command, each in exit_codes.h
}

TEST_CASE("the README links only to files in the repository, and they exist", "[docs]") {
  const std::string src = gpusim::test::source_dir();
  const std::string readme = gpusim::test::file_bytes(src + "/README.md");
  REQUIRE(!readme.empty());
  int links = 0;
  for (size_t at = readme.find("]("); at != std::string::npos; at = readme.find("](", at + 2)) {
    const size_t end = readme.find(')', at);
    REQUIRE(end != std::string::npos);
    std::string target = readme.substr(at + 2, end - at - 2);
    INFO("link target: " << target);
    CHECK(target.find("://") == std::string::npos);
    CHECK_FALSE(target.starts_with("../"));
    CHECK_FALSE(target.starts_with("/"));
    target = target.substr(0, target.find('#'));
    CHECK(std::filesystem::exists(src + "/" + target));
    ++links;
  }
  CHECK(links > 10);
}

TEST_CASE("a plan made for another GPU runs with the tiles this device builds and names the GPU it was made for",
          "[cli][run][vulkan]") {
  if (!gpusim::test::device("vulkan")) return;  // says why
  // T4's tiles use up to 48 KiB of shared memory a block; lavapipe allows 32 KiB: codegen fits
  // them to the device (the capability query), and the run is priced for the tiles that run.
  const std::string plan = gpusim::test::temp_dir() + "/resnet_t4_fp16.json";
  REQUIRE(run_gpusim("plan " + model("resnet50.onnx") + " --gpu t4 --dtype fp16 --out " + plan).rc == 0);
  const Run r = run_gpusim("run " + model("resnet50.onnx") + " --backend vulkan --repeat 1 --plan " + plan);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("does not build as asked on llvmpipe") &&
                        Catch::Contains("The plan was made for nvidia-t4; this run tiles for lavapipe") &&
                        Catch::Contains("gpusim plan MODEL --gpu lavapipe"));
}

TEST_CASE("a tensor larger than a kernel argument may bind runs on the host, saying so", "[run][vulkan]") {
  if (!gpusim::test::device("vulkan")) return;  // says why
  // 40 M floats (160 MB) gathered by two ids: over lavapipe's 128 MiB maxStorageBufferRange.
  gpusim::test::OnnxBuilder b(17);
  b.input("ids", onnx::TensorProto::INT64, {2});
  b.initializer("table", onnx::TensorProto::FLOAT, {40000000, 1});
  b.node("Gather", {"table", "ids"}, {"rows"});
  b.node("Relu", {"rows"}, {"y"});
  b.output("y");
  const std::string m = b.write("big_gather.onnx");
  const Run r = run_gpusim("run " + m + " --backend vulkan --repeat 1 --check");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("PASS") && Catch::Contains("binds at most"));
}

TEST_CASE("a model too big for the device's memory is refused before anything is allocated", "[run][vulkan]") {
  if (!gpusim::test::device("vulkan")) return;  // says why
  // 8 G floats (32 GB) of activations: past any machine CI runs on, for lavapipe's host-memory buffers.
  gpusim::test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {1, 8192, 8192, 128});
  b.node("Relu", {"x"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  const Run r = run_gpusim("run " + b.write("huge_relu.onnx") + " --backend vulkan --repeat 1");
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("needs at least 68.7 GB of host copies of its weights and inputs (fp64)") &&
                        Catch::Contains("make the inputs smaller (--dim)"));
}

TEST_CASE("file arguments read regular files only: a directory, /dev/zero or a FIFO is refused at once", "[cli][errors][security]") {
  const std::string dir = gpusim::test::temp_dir();
  const std::string fifo = dir + "/cli_fifo";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // gpusim serve --token-file: was exit 70 on a directory, a read until memory ran out on
  // /dev/zero and a hang on a FIFO; now exit 2 naming what the path is, before anything listens.
  const Run d = run_gpusim("serve --port 0 --token-file " + dir);
  CHECK(d.rc == 2);
  CHECK_THAT(d.out, Catch::Contains("--token-file " + dir + ": is a directory, not a regular file; give the token file "
                                    "as a file"));
  const Run z = run_gpusim("serve --port 0 --token-file /dev/zero");
  CHECK(z.rc == 2);
  CHECK_THAT(z.out, Catch::Contains("/dev/zero: is a character device, not a regular file"));
  const Run f = run_gpusim("serve --port 0 --token-file " + fifo);
  CHECK(f.rc == 2);
  CHECK_THAT(f.out, Catch::Contains(fifo + ": is a FIFO (named pipe), not a regular file"));
  // predict's --plan and run's --input.
  const Run pz = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu t4 --plan /dev/zero");
  CHECK(pz.rc == 1);
  CHECK_THAT(pz.out, Catch::Contains("/dev/zero: is a character device, not a regular file; give the plan as a file"));
  const Run pf = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu t4 --plan " + fifo);
  CHECK(pf.rc == 1);
  CHECK_THAT(pf.out, Catch::Contains(fifo + ": is a FIFO (named pipe), not a regular file"));
  const Run in = run_gpusim("run " + model("mobilenet_v2.onnx") + " --backend cpu --input " + fifo);
  CHECK(in.rc != 0);
  CHECK_THAT(in.out, Catch::Contains(fifo + ": is a FIFO (named pipe), not a regular file"));
  // The model itself and a profile path.
  const Run m = run_gpusim("predict " + fifo + " --gpu t4");
  CHECK(m.rc != 0);
  CHECK_THAT(m.out, Catch::Contains("is a FIFO (named pipe), not an .onnx file"));
  const Run g = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu /dev/zero");
  CHECK(g.rc != 0);
  CHECK_THAT(g.out, Catch::Contains("/dev/zero: is a character device, not a regular file"));
  std::filesystem::remove(fifo);
}

TEST_CASE("plan and tune check --out before the work starts", "[cli][errors]") {
  const Run p = run_gpusim("plan " + model("mobilenet_v2.onnx") + " --gpu t4 --out /nonexistent-gpusim-dir/plan.json");
  CHECK(p.rc == 2);
  CHECK_THAT(p.out, Catch::Contains("gpusim plan: --out /nonexistent-gpusim-dir/plan.json: the directory "
                                    "/nonexistent-gpusim-dir does not exist; create it or pick another --out"));
  CHECK_THAT(p.out, !Catch::Contains("plan 1"));
  const Run d = run_gpusim("plan " + model("mobilenet_v2.onnx") + " --gpu t4 --out " + gpusim::test::temp_dir());
  CHECK(d.rc == 2);
  CHECK_THAT(d.out, Catch::Contains("is a directory; give a file name"));
  const Run t = run_gpusim("tune " + model("mobilenet_v2.onnx") + " --backend vulkan --out /nonexistent-gpusim-dir/t.json");
  CHECK(t.rc == 2);
  CHECK_THAT(t.out, Catch::Contains("gpusim tune: --out /nonexistent-gpusim-dir/t.json: the directory"));
}

TEST_CASE("run --tune says the plan is tuned and gives one predicted figure", "[cli][vulkan]") {
  if (!gpusim::test::device("vulkan")) return;  // says why
  gpusim::test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {64, 128});
  b.initializer("w", onnx::TensorProto::FLOAT, {128, 256});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  const std::string m = b.write("tune_print_matmul.onnx");
  const std::string db = gpusim::test::temp_dir() + "/tune_print.db";
  const Run r = run_gpusim("run " + m + " --backend vulkan --gpu t4 --tune --top-k 2 --store " + db + " --repeat 1");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("kernels (eager, tuned), fp32"));
  // The header's predicted figure is the one the note compares with, after tuning too.
  const auto at = r.out.find("; predicted ");
  REQUIRE(at != std::string::npos);
  const std::string header_ms = r.out.substr(at + 12, r.out.find(' ', at + 12) - at - 12);
  const auto note = r.out.find("against ");
  if (note != std::string::npos) CHECK(r.out.substr(note + 8, header_ms.size()) == header_ms);
}

TEST_CASE("compare --runtimes ranks the runtimes on one GPU and reproduces the seed's TensorRT against PyTorch",
          "[cli][predict][runtimes]") {
  // The seed's measurements (an RTX 3060 under Windows 11): MobileNetV2 6.9 ms in PyTorch eager, 1 ms in
  // TensorRT-RTX; the SD 1.5 VAE decoder in fp16, 72 ms against 33 ms (0.46).
  const Run mb = run_gpusim("compare " + model("mobilenet_v2.onnx") +
                            " --gpu nvidia-rtx-3060 --host windows --runtimes all --json");
  REQUIRE(mb.rc == 0);
  const auto j = nlohmann::json::parse(mb.out);
  CHECK(j["schema"] == "gpusim.compare-runtimes/1");
  CHECK(j["gpu"] == "nvidia-rtx-3060");
  const auto& rows = j["batches"][0]["runtimes"];
  std::map<std::string, double> ms;
  double last = 0;
  for (const auto& r : rows) {
    ms[r["runtime"].get<std::string>()] = r["total_us"].get<double>() / 1e3;
    CHECK(r["total_us"].get<double>() >= last);  // fastest first
    last = r["total_us"].get<double>();
  }
  for (const char* rt : {"pytorch-eager", "torch-compile", "torch-compile-reduce-overhead", "torch-compile-max-autotune",
                         "cuda-graph", "gpusim", "gpusim-plan", "tensorrt", "onnxruntime-cuda"}) {
    CHECK(ms.count(rt) == 1);
  }
  CHECK(ms.count("pytorch-eager-rocm") == 0);  // an AMD runtime, skipped and said
  CHECK(ms.count("llamacpp-cuda") == 0);       // language models only, skipped and said
  CHECK(j["skipped"].size() == 6);
  CHECK(ms["tensorrt"] < ms["pytorch-eager"]);
  CHECK(ms["tensorrt"] > 0.5);
  CHECK(ms["tensorrt"] < 2.0);
  CHECK_THAT(j["batches"][0]["verdict"].get<std::string>(), Catch::Contains(" is fastest, "));
  const Run vae = run_gpusim("compare " + model("sd15_vae_decoder_512.onnx") +
                             " --gpu nvidia-rtx-3060 --host windows --dtype fp16 --runtimes tensorrt,pytorch-eager "
                             "--batches 1 --json");
  REQUIRE(vae.rc == 0);
  const auto v = nlohmann::json::parse(vae.out)["batches"][0]["runtimes"];
  REQUIRE(v.size() == 2);
  CHECK(v[0]["runtime"] == "tensorrt");
  const double ratio = v[0]["total_us"].get<double>() / v[1]["total_us"].get<double>();
  CHECK(ratio > 0.35);
  CHECK(ratio < 0.6);
  // Batch sizes: every input's leading axis; throughput grows with it.
  const Run batches = run_gpusim("compare " + model("mobilenet_v2.onnx") +
                                 " --gpu nvidia-rtx-3060 --runtimes tensorrt,torch-compile --batches 1,16 --json");
  REQUIRE(batches.rc == 0);
  const auto b = nlohmann::json::parse(batches.out)["batches"];
  REQUIRE(b.size() == 2);
  CHECK(b[1]["batch"] == 16);
  CHECK(b[1]["runtimes"][0]["items_per_s"].get<double>() > b[0]["runtimes"][0]["items_per_s"].get<double>());
  const Run text = run_gpusim("compare " + model("mobilenet_v2.onnx") + " --gpu nvidia-rtx-3060 --runtimes all --all");
  REQUIRE(text.rc == 0);
  CHECK_THAT(text.out, Catch::Contains("fastest first") && Catch::Contains("not compared:") &&
                           Catch::Contains("pytorch-eager-rocm: runtime \"pytorch-eager-rocm\" runs on amd GPUs") &&
                           Catch::Contains("gpusim's own generated kernels are priced here"));
}

TEST_CASE("compare --runtimes: what does not apply is refused, naming it", "[cli][predict][runtimes][errors]") {
  const std::string m = model("mobilenet_v2.onnx");
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {m + " --runtimes all", "--runtimes compares runtimes on one GPU: give it with --gpu G"},
           {m + " --gpus nvidia-t4,nvidia-l4 --runtimes all", "--gpus names several"},
           {m + " --gpu nvidia-t4", "--gpu, --batches and --all go with --runtimes"},
           {m, "give --gpus (several GPUs side by side) or --gpu G --runtimes LIST"},
           {m + " --gpu nvidia-t4 --runtimes all --runtime tensorrt", "--runtime does not apply with --runtimes"},
           {m + " --gpu nvidia-t4 --runtimes all --tiles library",
            "--tiles does not apply with --runtimes: each runtime is priced in its own"},
           {m + " --gpu nvidia-t4 --runtimes llamacpp-cuda", "runtime \"llamacpp-cuda\" runs language-models"},
           {m + " --gpu nvidia-t4 --runtimes all,tensorrt", "\"all\" stands alone"},
           {m + " --gpu amd-mi300x --runtimes tensorrt", "runtime \"tensorrt\" runs on nvidia GPUs; amd-mi300x is amd"},
           {m + " --gpu nvidia-t4 --runtimes tensorrtx", "runtime \"tensorrtx\" is unknown; known runtimes:"},
           {"llama-2-7b --gpu nvidia-t4 --runtimes all", "--runtimes ranks the runtimes that run an ONNX graph"}}) {
    INFO(args);
    const Run r = run_gpusim("compare " + args);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Catch::Contains(want));
  }
  // A batch of 0 is the model's error (exit 1 or 2 as the importer says), naming --batches.
  const Run zero = run_gpusim("compare " + m + " --gpu nvidia-t4 --runtimes all --batches 0");
  CHECK(zero.rc != 0);
  CHECK_THAT(zero.out, Catch::Contains("--batches 0: `batch` 0 is not a batch size; give 1 or more"));
}

TEST_CASE("compare of generations: llama-bench's pp and tg columns, joules a token and value at the user's prices",
          "[cli][predict][llm]") {
  const Run text = run_gpusim("compare llama-2-7b --gpus nvidia-rtx-3060,nvidia-rtx-4090 --weights Q4_0 --prompt 512 "
                              "--generate 128 --price nvidia-rtx-3060=329,nvidia-rtx-4090=1599");
  REQUIRE(text.rc == 0);
  CHECK_THAT(text.out, Catch::Contains("pp512 t/s") && Catch::Contains("tg128 t/s") && Catch::Contains("J/token") &&
                           Catch::Contains("t/s per $1000 ($329)"));
  const Run j = run_gpusim("compare llama-2-7b --gpus nvidia-rtx-3060,nvidia-h100-sxm --weights Q4_0 --prompt 64 "
                           "--generate 16 --price nvidia-rtx-3060=329 --price nvidia-h100-sxm=2.49/h --json");
  REQUIRE(j.rc == 0);
  const auto rows = nlohmann::json::parse(j.out)["gpus"];
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) {
    CHECK(r["energy_j"].get<double>() > 0);
    CHECK(r["decode_j_per_token"].get<double>() > 0);
    CHECK(r["prefill_j_per_token"].get<double>() > 0);
  }
  const auto& bought = rows[0]["value"];
  CHECK(bought["per"] == "purchase");
  CHECK(bought["decode_tokens_per_s_per_kusd"].get<double>() ==
        Approx(rows[0]["decode_tokens_per_s"].get<double>() / 0.329));
  const auto& rented = rows[1]["value"];
  CHECK(rented["per"] == "hour");
  CHECK(rented["decode_tokens_per_usd"].get<double>() == Approx(rows[1]["decode_tokens_per_s"].get<double>() * 3600 / 2.49));
  CHECK(rented["usd_per_million_tokens"].get<double>() == Approx(1e6 / rented["decode_tokens_per_usd"].get<double>()));
  // The single generation's document has each phase's energy, adding up to the whole.
  const Run one = run_gpusim("predict llama-2-7b --gpu nvidia-rtx-4090 --weights Q4_0 --prompt 64 --generate 16 --json");
  REQUIRE(one.rc == 0);
  const auto g = nlohmann::json::parse(one.out);
  CHECK(g["energy_j"].get<double>() ==
        Approx(g["prefill"]["energy_j"].get<double>() + g["decode"]["energy_j"].get<double>()));
  CHECK(g["decode"]["j_per_token"].get<double>() == Approx(g["decode"]["energy_j"].get<double>() / 16));
  // Prices that do not apply are refused, naming them.
  const Run bad = run_gpusim("compare llama-2-7b --gpus nvidia-rtx-3060 --price nvidia-rtx-3060=cheap");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("price \"nvidia-rtx-3060=cheap\": \"cheap\" is not a number of dollars") &&
                          Catch::Contains("GPU=USD/h"));
  const Run other = run_gpusim("compare llama-2-7b --gpus nvidia-rtx-3060 --price nvidia-t4=1000");
  CHECK(other.rc == 2);
  CHECK_THAT(other.out, Catch::Contains("\"nvidia-t4\" is not one of the GPUs compared (nvidia-rtx-3060)"));
  const Run graph = run_gpusim("compare " + model("mobilenet_v2.onnx") + " --gpus nvidia-t4 --price nvidia-t4=1000");
  CHECK(graph.rc == 2);
  CHECK_THAT(graph.out, Catch::Contains("--price applies to a generation's value"));
}

TEST_CASE("report writes one self-contained page with the roofline, timeline, top costs and comparisons",
          "[cli][report]") {
  const std::string out = gpusim::test::temp_dir() + "/report.html";
  const Run r = run_gpusim("report " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 --runtime pytorch-eager "
                           "--runtimes pytorch-eager,tensorrt --gpus nvidia-t4,nvidia-l4 -o " + out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("2 runtimes, 2 GPUs"));
  const std::string html = gpusim::test::file_bytes(out);
  for (const char* id : {"id=\"roofline\"", "id=\"timeline\"", "id=\"runtimes\"", "id=\"gpus\"", "id=\"top-costs\"",
                         "id=\"notes\"", "<!DOCTYPE html>", "class=\"launch\""}) {
    CHECK_THAT(html, Catch::Contains(id));
  }
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://www.w3.org/2000/svg") != std::string::npos);
  CHECK(html.find("src=\"http") == std::string::npos);
  const Run p = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 --runtime pytorch-eager --json");
  REQUIRE(p.rc == 0);
  const size_t kernels = nlohmann::json::parse(p.out)["kernels"].size();
  size_t circles = 0;
  for (size_t at = html.find("<circle class=\"kernel\""); at != std::string::npos;
       at = html.find("<circle class=\"kernel\"", at + 1)) {
    ++circles;
  }
  CHECK(circles == kernels);
  // What does not apply, or cannot be done, is refused.
  const Run json = run_gpusim("report " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 -o " + out + " --json");
  CHECK(json.rc == 2);
  CHECK_THAT(json.out, Catch::Contains("--json does not apply: a report is an HTML page"));
  const Run llm = run_gpusim("report llama-2-7b --gpu nvidia-t4 -o " + out);
  CHECK(llm.rc == 2);
  CHECK_THAT(llm.out, Catch::Contains("a report draws an ONNX graph's kernels"));
  const Run nowhere = run_gpusim("report " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 -o /no/such/dir/r.html");
  CHECK(nowhere.rc == 1);
  CHECK_THAT(nowhere.out, Catch::Contains("--out /no/such/dir/r.html: cannot write it"));
  const Run bad_rt = run_gpusim("report " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 -o " + out +
                                " --runtimes llamacpp-cuda");
  CHECK(bad_rt.rc == 2);
  CHECK_THAT(bad_rt.out, Catch::Contains("--runtimes: runtime \"llamacpp-cuda\" runs language-models"));
}

TEST_CASE("a prediction's trace has a host track: each launch, or a replayed graph's one", "[cli][predict][trace]") {
  const std::string eager = gpusim::test::temp_dir() + "/eager_trace.json";
  const Run e = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 --runtime pytorch-eager --trace " +
                           eager);
  REQUIRE(e.rc == 0);
  const auto t = nlohmann::json::parse(gpusim::test::file_bytes(eager))["traceEvents"];
  int host = 0;
  bool named = false;
  double last_end = 0;
  for (const auto& ev : t) {
    const int tid = ev.value("tid", 0);  // the process's name has no thread
    if (tid == 3 && ev["ph"] == "M") named = ev["args"]["name"] == "host (pytorch-eager)";
    if (tid == 3 && ev["ph"] == "X") {
      ++host;
      CHECK(ev["ts"].get<double>() >= last_end - 1e-6);  // calls one after another
      last_end = ev["ts"].get<double>() + ev["dur"].get<double>();
    }
  }
  CHECK(named);
  CHECK(host > 50);
  const std::string graph = gpusim::test::temp_dir() + "/graph_trace.json";
  const Run g = run_gpusim("predict " + model("mobilenet_v2.onnx") + " --gpu nvidia-t4 --runtime cuda-graph --trace " + graph);
  REQUIRE(g.rc == 0);
  int launches = 0;
  const auto replayed = nlohmann::json::parse(gpusim::test::file_bytes(graph));  // kept: the loop reads into it
  for (const auto& ev : replayed["traceEvents"]) {
    launches += ev.value("tid", 0) == 3 && ev["ph"] == "X";
  }
  CHECK(launches == 1);
}

TEST_CASE("run --trace writes the measured kernels end to end, beside their predictions", "[cli][run][trace]") {
  gpusim::test::OnnxBuilder b(17);
  b.input("x", 1, {64, 64});
  b.input("w", 1, {64, 64});
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  b.node("Relu", {"y"}, {"z"}, "relu");
  b.output("z");
  const std::string path = b.write("run_trace.onnx");
  const std::string trace = gpusim::test::temp_dir() + "/run_trace.json";
  // The null backend: no device, the executor's launches recorded and priced (--gpu).
  const Run r = run_gpusim("run " + path + " --backend null --gpu nvidia-t4 --repeat 1 --quiet --trace " + trace);
  REQUIRE(r.rc == 0);
  const auto t = nlohmann::json::parse(gpusim::test::file_bytes(trace));
  int measured = 0, predicted = 0;
  double end = 0;
  for (const auto& ev : t["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    if (ev["tid"] == 1) {
      ++measured;
      CHECK(ev["ts"].get<double>() == Approx(end).margin(1e-9));  // end to end
      end += ev["dur"].get<double>();
      CHECK(ev["args"].contains("measured_us"));
    } else if (ev["tid"] == 2) {
      ++predicted;
    }
  }
  CHECK(measured >= 1);
  CHECK(predicted == measured);
  const Run bad = run_gpusim("run " + path + " --backend cpu --repeat 1 --quiet --trace /no/such/dir/t.json");
  CHECK(bad.rc == 1);
  CHECK_THAT(bad.out, Catch::Contains("--trace /no/such/dir/t.json: cannot write the trace file"));
}

namespace {

// The long option names a command's --help lists ("--dtype", "--out"), --help itself aside.
std::vector<std::string> help_options(const std::string& cmd) {
  const Run h = run_gpusim(cmd + " --help");
  std::vector<std::string> out;
  std::istringstream in(h.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  -", 0) != 0) continue;
    const size_t at = line.find("--");
    if (at == std::string::npos) continue;
    const size_t end = line.find_first_of(" ,", at);
    const std::string name = line.substr(at, end - at);
    if (name != "--help") out.push_back(name);
  }
  return out;
}

}  // namespace

// Issue 57: every option either acts (the output changes, a note included) or is refused naming it.
// Each option a command lists has a probe here: a new option without one fails this test.
TEST_CASE("every option of predict, compare, report, inspect and plan acts or is refused", "[cli][options]") {
  const std::string m = model("mobilenet_v2.onnx");
  const std::string dir = gpusim::test::temp_dir() + "/option_walk";
  std::filesystem::create_directories(dir + "/profiles");
  {
    std::ofstream(dir + "/profiles/my-a10.yaml") << "schema: gpusim.profile/1\nname: my-a10\nextends: nvidia-a10\n"
                                                    "memory:\n  dram: {bandwidth_gbps: 300}\n";
  }
  REQUIRE(run_gpusim("plan " + m + " --gpu nvidia-a10 --out " + dir + "/plan.json").rc == 0);
  struct Probe {
    std::string args;     // appended to the command's base
    bool refused = false; // else: acts
    std::string says = "";  // what the refusal names ("" = the option itself)
  };
  // Per command: the base invocation and each option's probe.
  struct Command {
    std::string head;
    std::vector<std::pair<std::string, std::string>> defaults;  // flag, value: unless a probe gives the flag
    std::map<std::string, Probe> probes;
  };
  // The options every model command takes (add_common), then each command's own.
  const std::map<std::string, Probe> common = {
      {"--dtype", {"--dtype fp16"}},
      {"--dim", {"--dim input:0=2"}},
      {"--json", {"--json"}},
      {"--runtime", {"--runtime pytorch-eager"}},
      {"--host", {"--host windows"}},  // under gpusim's executor: a note says it changes nothing
      {"--layout", {"--layout nhwc", true}},
      {"--autocast", {"--autocast fp16", true}},
      {"--skip-pattern", {"--skip-pattern sdpa", true}},
      {"--on-device", {"--on-device"}},
      {"--tiles", {"--tiles library"}},
      {"--allow-tf32", {"--allow-tf32"}}};
  const std::map<std::string, Probe> generation = {
      {"--prompt", {"--prompt 8", true, "past_key_values"}},
      {"--generate", {"--generate 8", true, "past_key_values"}},
      {"--batch", {"--batch 2", true}},
      {"--ubatch", {"--ubatch 64", true}},
      {"--weights", {"--weights Q4_0", true}},
      {"--backend", {"--backend cuda", true}},
      {"--flash-attn", {"--flash-attn", true}},
      {"--cuda-prompt", {"--cuda-prompt mmq", true}}};
  auto with = [&](std::map<std::string, Probe> own, bool generations) {
    for (const auto& [k, v] : common) own.emplace(k, v);  // a command's own probe wins
    if (generations) {
      for (const auto& [k, v] : generation) own.emplace(k, v);
    }
    return own;
  };
  const std::string runtimes_only = "--gpu, --batches and --all go with --runtimes";
  const std::map<std::string, Command> commands = {
      {"predict",
       {"predict " + m,
        {{"--gpu", "nvidia-a10"}},
        with({{"--profiles", {"--profiles " + dir + "/profiles --gpu my-a10"}},
              {"--gpu", {"--gpu nvidia-t4"}},
              {"--trace", {"--trace " + dir + "/t.json"}},
              {"--all", {"--all"}},
              {"--plan", {"--plan " + dir + "/plan.json"}}},
             true)}},
      {"compare",
       {"compare " + m,
        {{"--gpus", "nvidia-a10,nvidia-t4"}},
        with({{"--profiles", {"--profiles " + dir + "/profiles --gpus my-a10,nvidia-t4"}},
              {"--gpus", {"--gpus nvidia-t4"}},
              {"--gpu", {"--gpu nvidia-t4", true, runtimes_only}},
              {"--all", {"--all", true, runtimes_only}},
              {"--runtimes", {"--runtimes all", true, "--gpus names several"}},
              {"--batches", {"--batches 2", true, runtimes_only}},
              {"--price", {"--price nvidia-t4=100", true}}},
             true)}},
      {"report",
       {"report " + m,
        {{"--gpu", "nvidia-a10"}, {"-o", dir + "/r.html"}},
        with({{"--profiles", {"--profiles " + dir + "/profiles --gpu my-a10"}},
              {"--json", {"--json", true}},
              {"--gpu", {"--gpu nvidia-t4"}},
              {"--out", {"-o " + dir + "/other.html"}},
              {"--runtimes", {"--runtimes tensorrt"}},
              {"--gpus", {"--gpus nvidia-t4"}}},
             false)}},
      {"inspect",
       {"inspect " + m,
        {},
        {{"--dim", {"--dim input:0=2"}},
         {"--json", {"--json"}},
         {"--runtime", {"--runtime pytorch-eager"}},
         {"--layout", {"--layout nhwc", true}},
         {"--autocast", {"--autocast fp16", true}},
         {"--skip-pattern", {"--skip-pattern sdpa", true}}}}},
      {"plan",
       {"plan " + m,
        {{"--gpu", "nvidia-a10"}},
        {{"--gpu", {"--gpu nvidia-t4"}},
         {"--objective", {"--objective energy"}},
         {"--scheduler", {"--scheduler eager"}},
         {"--top", {"--top 1"}},
         {"--beam-width", {"--beam-width 2", true}},
         {"--samples", {"--samples 4", true}},
         {"--seed", {"--seed 2", true}},
         {"--memory-budget-gb", {"--memory-budget-gb 0.05"}},
         {"--out", {"--out " + dir + "/plan2.json"}},
         {"--dtype", {"--dtype fp16"}},
         {"--dim", {"--dim input:0=2"}},
         {"--profiles", {"--profiles " + dir + "/profiles --gpu my-a10"}},
         {"--json", {"--json"}},
         {"--all", {"--all"}},
         {"--tiles", {"--tiles library"}},
         {"--allow-tf32", {"--allow-tf32"}}}}},
  };
  for (const auto& entry : commands) {
    const std::string& cmd = entry.first;  // not a structured binding: lambdas below capture it (clang 14)
    const Command& c = entry.second;
    // The command with a probe's arguments, and the defaults the probe does not give itself.
    auto line = [&](const std::string& args) {
      std::string l = c.head;
      const std::string padded = " " + args + " ";
      for (const auto& [flag, value] : c.defaults) {
        if (padded.find(" " + flag + " ") == std::string::npos) l += " " + flag + " " + value;
      }
      return l + (args.empty() ? "" : " " + args);
    };
    // The page a report writes is its output, beside its one-line summary.
    auto output = [&](const Run& r) {
      if (cmd != "report") return r.out;
      const bool other = r.out.find("other.html") != std::string::npos;
      return r.out + gpusim::test::file_bytes(dir + (other ? "/other.html" : "/r.html"));
    };
    const Run b = run_gpusim(line(""));
    REQUIRE(b.rc == 0);
    const std::string base_out = output(b);
    for (const std::string& opt : help_options(cmd)) {
      INFO(cmd << " " << opt);
      const auto it = c.probes.find(opt);
      if (it == c.probes.end()) {
        FAIL_CHECK(cmd << " lists " << opt << " and this test has no probe for it: add one that shows it acts or is "
                                              "refused");
        continue;
      }
      const Probe& p = it->second;
      const Run r = run_gpusim(line(p.args));
      INFO(r.out);
      if (p.refused) {
        CHECK(r.rc != 0);
        CHECK_THAT(r.out, Catch::Contains(p.says.empty() ? opt : p.says));
      } else {
        CHECK(r.rc == 0);
        CHECK(output(r) != base_out);
      }
    }
  }
}
