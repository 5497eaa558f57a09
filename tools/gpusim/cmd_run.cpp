// gpusim run MODEL --backend cpu [--input FILE.pb]... [--dim k=v]... [--seed N] [--repeat N] [--json]
// Runs a model for real. Today the CPU reference is the backend that exists (issue 5 adds Vulkan,
// CUDA and HIP, and --check against this reference); inputs come from .pb files or the seed, and
// weights a shape-only file lacks come from the seed, which the run says. Every node is timed:
// one warm-up run, then the median of --repeat runs.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "format.h"
#include "gpusim/tensor_data.h"
#include "reference.h"

namespace gpusim::cli {

void add_run(CLI::App& app, int& rc) {
  struct Args {
    std::string model, backend = "cpu";
    std::vector<std::string> dims, inputs;
    uint64_t seed = 1;
    int repeat = 3;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "Run a model for real on a backend and time every kernel");
  cmd->add_option("model", a->model, "The .onnx file")->required();
  cmd->add_option("--backend", a->backend, "cpu (the reference; vulkan, cuda and hip are coming)");
  cmd->add_option("--input", a->inputs, "A serialized TensorProto (.pb) per graph input, in order (repeatable)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--seed", a->seed, "Fills inputs and missing weights (default 1)");
  cmd->add_option("--repeat", a->repeat, "Timed runs after one warm-up (default 3); times are medians");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.run/1)");
  cmd->callback([a, &rc] {
    if (a->backend != "cpu") {
      fmt::print(stderr, "gpusim run: --backend \"{}\" is not available in this build; available: cpu (the Vulkan, "
                         "CUDA and HIP backends are the next part of the execution work)\n",
                 a->backend);
      rc = 2;
      return;
    }
    auto g = load_model(a->model, a->dims);
    if (!g) {
      fmt::print(stderr, "gpusim run: {}\n", g.error().message);
      rc = exit_code(g.error());
      return;
    }
    std::vector<cpu::HostTensor> inputs;
    for (const std::string& f : a->inputs) {
      auto t = read_tensor_file(f);
      if (!t) {
        fmt::print(stderr, "gpusim run: {}\n", t.error().message);
        rc = 1;
        return;
      }
      inputs.push_back(cpu::from_data(*t));
    }
    auto weights = read_model_tensors(a->model);
    if (!weights) {
      fmt::print(stderr, "gpusim run: {}\n", weights.error().message);
      rc = 1;
      return;
    }
    cpu::RunOptions opts;
    opts.weights = &*weights;
    opts.seed = a->seed;
    const int repeat = std::max(1, a->repeat);
    std::vector<std::vector<double>> times(g->nodes.size());
    Result<cpu::RunResult> r = make_error(ErrorCode::kInvalidArgument, "");
    for (int i = 0; i <= repeat; ++i) {  // run 0 is the warm-up
      r = cpu::run_reference(*g, inputs, opts);
      if (!r) {
        fmt::print(stderr, "gpusim run: {}\n", r.error().message);
        rc = 1;
        return;
      }
      if (i == 0) continue;
      for (size_t n = 0; n < times.size(); ++n) times[n].push_back(r->node_us[n]);
    }
    std::vector<double> median(times.size());
    double total = 0;
    for (size_t n = 0; n < times.size(); ++n) {
      std::sort(times[n].begin(), times[n].end());
      median[n] = times[n][times[n].size() / 2];
      total += median[n];
    }
    if (static_cast<size_t>(g->inputs.size()) > inputs.size()) {
      r->notes.push_back(fmt::format("{} inputs filled from seed {}", g->inputs.size() - inputs.size(), a->seed));
    }
    nlohmann::json outs = nlohmann::json::array();
    for (size_t k = 0; k < r->outputs.size(); ++k) {
      const cpu::HostTensor& o = r->outputs[k];
      double lo = 0, hi = 0, sum = 0;
      const int64_t n = o.is_sequence || o.is_string() ? 0 : o.elements();
      for (int64_t e = 0; e < n; ++e) {
        const double v = o.real(e);
        lo = e == 0 ? v : std::min(lo, v);
        hi = e == 0 ? v : std::max(hi, v);
        sum += v;
      }
      outs.push_back({{"name", g->tensor(g->outputs[k]).name}, {"shape", o.shape},
                      {"dtype", std::string(dtype_name(o.dtype))}, {"min", lo}, {"max", hi},
                      {"mean", n > 0 ? sum / static_cast<double>(n) : 0.0}});
    }
    std::vector<size_t> order(times.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return median[x] > median[y]; });
    if (a->json) {
      nlohmann::json nodes = nlohmann::json::array();
      for (size_t i : order) {
        if (median[i] <= 0) continue;
        nodes.push_back({{"node", g->nodes[i].name}, {"op_type", g->nodes[i].op_type}, {"measured_us", median[i]}});
      }
      fmt::print("{}\n", nlohmann::json{{"schema", "gpusim.run/1"}, {"model", a->model}, {"backend", a->backend},
                                        {"repeat", repeat}, {"total_us", total}, {"outputs", outs}, {"nodes", nodes},
                                        {"notes", r->notes}}
                             .dump(2));
      rc = 0;
      return;
    }
    fmt::print("model    {}\nbackend  cpu reference (fp64 accumulation), {} timed runs after a warm-up\n", a->model,
               repeat);
    fmt::print("total    {:.3f} ms (median per node, summed)\n", total / 1e3);
    for (const auto& o : outs) {
      fmt::print("output   {} {} {}: min {:.6g}, max {:.6g}, mean {:.6g}\n", o["name"].get<std::string>(),
                 o["shape"].dump(), o["dtype"].get<std::string>(), o["min"].get<double>(), o["max"].get<double>(),
                 o["mean"].get<double>());
    }
    fmt::print("\n{:>12} {:>7}  {:<22} {}\n", "measured_us", "share", "op", "node");
    for (size_t k = 0; k < std::min<size_t>(order.size(), 15); ++k) {
      const size_t i = order[k];
      fmt::print("{:>12.1f} {:>6.1f}%  {:<22} {}\n", median[i], total > 0 ? 100 * median[i] / total : 0,
                 g->nodes[i].op_type, g->nodes[i].name);
    }
    if (!r->notes.empty()) {
      fmt::print("\nnotes\n");
      for (const auto& n : r->notes) fmt::print("  - {}\n", n);
    }
    rc = 0;
  });
}

}  // namespace gpusim::cli
