// gpusim run MODEL --backend cpu|vulkan|cuda|hip [--device N] [--plan plan.json | --gpu NAME]
//                  [--dtype fp32|fp16] [--allow-tf32] [--matrix-path none|portable] [--check] [--repeat N]
//                  [--json] [--input FILE.pb]... [--dim k=v]...
// Runs a model for real. Inputs come from .pb files or the seed; weights a shape-only file lacks
// come from the seed, which the run says. The cpu backend is the reference (fp64 accumulation) and
// times every node. A device backend runs a plan — the given one, or the eager plan — through
// codegen, times every kernel with device timers (one warm-up, then the median of --repeat runs)
// and prints, per kernel, the simulator's prediction for the profile (--gpu, or the profile whose
// name matches the device), the measured time and the error. --check compares every output with
// the CPU reference (relative L2 error per output) and exits 1 when one fails.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "commands.h"
#include "common.h"
#include "run_setup.h"
#include "gpusim/gpusim.h"
#include "hw/atomic_file.h"

namespace gpusim::cli {

namespace {

using Args = RunArgs;

void print_outputs(const RunReport& r) {
  for (const OutputSummary& o : r.outputs) {
    fmt::print("output   {} {} {}: min {:.6g}, max {:.6g}, mean {:.6g}\n", o.name, shape_str(o.shape),
               dtype_name(o.dtype), o.min, o.max, o.mean);
  }
}

void print_notes(const RunReport& r) {
  if (r.notes.empty()) return;
  fmt::print("\nnotes\n");
  for (const auto& n : r.notes) fmt::print("  - {}\n", say(n));
}

void print_cpu(const Args& a, const RunReport& r) {
  fmt::print("model    {}\nbackend  cpu reference (fp64 accumulation), {} timed runs after a warm-up\n", a.model,
             r.repeat);
  fmt::print("total    {:.3f} ms (median per node, summed)\n", r.total_us / 1e3);
  print_outputs(r);
  fmt::print("\n{:>12} {:>7}  {:<22} {}\n", "measured_us", "share", "op", "node");
  for (size_t k = 0; k < std::min<size_t>(r.kernels.size(), 15); ++k) {
    const KernelReport& n = r.kernels[k];
    fmt::print("{:>12.1f} {:>6.1f}%  {:<22} {}\n", n.measured_us, r.total_us > 0 ? 100 * n.measured_us / r.total_us : 0,
               n.op_type, n.name);
  }
  print_notes(r);
}

void print_device(const Args& a, const RunReport& r) {
  fmt::print("model    {}\nbackend  {} device {}: {} ({}, driver {})\n", a.model, a.backend, a.device, r.device_name,
             r.device_arch, r.device_driver);
  // "eager", "given" (the --plan file), each with ", tuned" after --tune.
  std::string source = r.plan_source;
  if (source.rfind("given", 0) == 0) source.replace(0, 5, a.plan);
  fmt::print("plan     {} kernels ({}), {}; {} timed runs after a warm-up\n", r.plan_kernels, source, r.dtype, r.repeat);
  fmt::print("measured {:.3f} ms (median per kernel, summed)", r.total_us / 1e3);
  if (r.predicted_us) {
    fmt::print("; predicted {:.3f} ms of kernel time on {} ({:+.1f}%)", *r.predicted_us / 1e3, *r.gpu,
               r.total_us > 0 ? 100 * (*r.predicted_us - r.total_us) / r.total_us : 0.0);
  }
  fmt::print("\ncompile  {} kernels compiled, {} from the cache; {:.0f} ms (the driver's pipeline builds included)\n",
             r.compiled, r.cache_hits, r.compile_ms);
  print_outputs(r);
  for (const OutputCheck& c : r.checks) {
    if (std::isnan(c.relative_l2)) {  // (-1 in --json)
      fmt::print("check    {}: holds NaN or inf where the CPU reference does not (or differs in shape) FAIL\n",
                 c.output);
      continue;
    }
    fmt::print("check    {}: relative L2 error {:.3g} (tolerance {:.0e}) {}\n", c.output, c.relative_l2, c.tolerance,
               c.pass ? "PASS" : "FAIL");
  }
  std::vector<const KernelReport*> order;
  for (const KernelReport& k : r.kernels) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(), [](const auto* x, const auto* y) { return x->measured_us > y->measured_us; });
  fmt::print("\n{:>5} {:>12} {:>12} {:>8}  {:<14} {:<28} {}\n", "#", "predicted_us", "measured_us", "error", "class",
             "op", "node");
  for (const KernelReport* k : order) {
    const std::string p = k->predicted_us ? fmt::format("{:.1f}", *k->predicted_us) : "-";
    const std::string e = k->predicted_us && k->measured_us > 0
                              ? fmt::format("{:+.0f}%", 100 * (*k->predicted_us - k->measured_us) / k->measured_us)
                              : "-";
    const std::string op = k->op_type.size() > 28 ? k->op_type.substr(0, 25) + "..." : k->op_type;
    fmt::print("{:>5} {:>12} {:>12.1f} {:>8}  {:<14} {:<28} {}{}\n", k->plan_kernel, p, k->measured_us, e,
               k->cls + (k->fused_as_planned ? "" : "*"), op, k->name, k->device ? "" : " [host]");
  }
  print_notes(r);
}

}  // namespace

std::optional<Program> open_program(const RunArgs& a, std::string_view command, int& rc,
                                    std::vector<HostBuffer>& buffers) {
  const std::string who(command);
  const Session session({a.profile_dirs, {}});
  warn_profile_dirs(session.profile_dirs());
  CompileOptions co;
  co.backend = a.backend;
  co.device = a.device;
  co.seed = a.seed;
  co.allow_tf32 = a.allow_tf32;
  co.matrix_path = a.matrix_path;
  if (a.backend != "cpu" && !a.dtype.empty()) {
    auto dtype = parse_dtype(a.dtype);
    if (!dtype) {
      fmt::print(stderr, "{}: {}\n", who, say(dtype.error()));
      rc = 2;
      return std::nullopt;
    }
    co.dtype = *dtype;
  }
  if (auto ok = check_compile_options(co); !ok) {  // a bad --backend or --dtype: a bad argument
    fmt::print(stderr, "{}: {}\n", who, say(ok.error()));
    rc = 2;
    return std::nullopt;
  }
  auto m = session.open_model(a.model, {a.dims});
  if (!m) {
    fmt::print(stderr, "{}: {}\n", who, say(m.error()));
    rc = exit_code(m.error());
    return std::nullopt;
  }
  // No --dtype: the model's own float type, as predict uses (fp16 stays fp16; kernels store fp32
  // or fp16, so a bf16 model runs in fp32, saying so).
  if (a.backend != "cpu" && a.dtype.empty()) {
    const DType own = graph_float_type(m->graph());
    co.dtype = own == DType::kFloat16 ? DType::kFloat16 : DType::kFloat32;
    if (own != co.dtype) {
      fmt::print(stderr, "{}: the model computes in {}; kernels store fp32 or fp16, so it runs in fp32 "
                         "(--dtype fp16 for half storage)\n", who, dtype_name(own));
    }
  }
  for (const std::string& f : a.inputs) {
    auto t = read_tensor_buffer(f);
    if (!t) {
      fmt::print(stderr, "{}: {}\n", who, say(t.error()));
      rc = 1;
      return std::nullopt;
    }
    buffers.push_back(std::move(*t));
  }
  if (a.backend != "cpu") {
    if (!a.gpu.empty()) {
      auto p = session.gpu(a.gpu);
      if (!p) {
        fmt::print(stderr, "{}: {}\n", who, say(p.error()));
        rc = 1;
        return std::nullopt;
      }
      co.gpu = std::move(*p);
    }
    if (!a.plan.empty()) {
      auto plan = session.load_plan_file(*m, a.plan);
      if (!plan) {
        fmt::print(stderr, "{}: {}\n", who, say(plan.error()));
        rc = 1;
        return std::nullopt;
      }
      co.plan = std::move(*plan);
    }
  }
  auto prog = session.compile(*m, co);
  if (!prog) {
    fmt::print(stderr, "{}: {}\n", who, say(prog.error()));
    rc = 1;  // the options were checked above: what fails here is the device, the plan or the model
    return std::nullopt;
  }
  return std::move(*prog);
}

namespace {

int run(const Args& a) {
  int rc = 0;
  std::vector<HostBuffer> buffers;
  std::optional<Program> prog = open_program(a, "gpusim run", rc, buffers);
  if (!prog) return rc;
  if (a.tune) {
    if (a.backend == "cpu") {
      fmt::print(stderr, "gpusim run: --tune needs a device backend (vulkan, cuda or hip); the cpu backend is the "
                         "reference and has nothing to tune\n");
      return 2;
    }
    if (int t = tune_program(*prog, a, "gpusim run"); t != 0) return t;
  }
  std::vector<ConstTensorView> views;
  for (const HostBuffer& b : buffers) views.push_back(b.view());
  TimingOptions to;
  to.repeat = a.repeat;
  to.check = a.check;
  ProgressLine line("gpusim run", !a.quiet, a.progress);
  if (line.enabled()) {  // called between launches: format only the lines shown
    to.progress = [&line](const Progress& p) {
      if (!line.due(p.phase, p.run)) return;
      const std::string phase = p.phase == "timed run" ? fmt::format("timed run {}/{}", p.run, p.runs)
                                : p.phase == "check"   ? std::string("check (CPU reference)")
                                                       : std::string(p.phase);
      line.show(fmt::format("{} {}/{} {}", phase, p.done, p.total, p.unit));
    };
  }
  auto r = prog->time(views, to);
  line.clear();
  if (!r) {
    fmt::print(stderr, "gpusim run: {}\n", say(r.error()));
    return 1;
  }
  if (!a.trace.empty()) {
    if (auto w = write_file_atomic(a.trace, run_trace(*r)); !w) {
      fmt::print(stderr, "gpusim run: --trace {}: cannot write the trace file ({})\n", a.trace, say(w.error()));
      return 1;
    }
  }
  if (a.json) {
    fmt::print("{}\n", run_document(*r));
  } else if (a.backend == "cpu") {
    print_cpu(a, *r);
  } else {
    print_device(a, *r);
  }
  if (!r->check_passed()) {
    if (!a.json) {
      fmt::print(stderr, "gpusim run: --check failed: an output differs from the CPU reference beyond tolerance\n");
    }
    return 1;
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "Run a model for real on a backend, time every kernel, compare with predictions");
  cmd->add_option("model", a->model, "The .onnx file")->required();
  cmd->add_option("--backend", a->backend,
                  "cpu (the reference), vulkan, cuda or hip; null (no device: launches recorded, timers from "
                  "$GPUSIM_NULL_LATENCY_US, outputs zero) to test the executor's logic");
  cmd->add_option("--device", a->device, "Device index within the backend (default 0)");
  cmd->add_option("--plan", a->plan, "Run this plan (JSON from gpusim plan --out) instead of the eager one");
  cmd->add_option("--gpu", a->gpu, "Profile for predictions and tiles (default: the one matching the device)");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directories of GPU profiles");
  cmd->add_option("--dtype", a->dtype, "fp32 or fp16: the float type kernels store (default: the model's own; fp32 for a bf16 model)");
  cmd->add_flag("--allow-tf32", a->allow_tf32,
                "fp32 GEMMs and convolutions on the matrix units as TF32 where the device's path has them (CUDA "
                "sm_80 and newer); --check then allows 1e-2");
  cmd->add_option("--matrix-path", a->matrix_path,
                  "GEMM-like kernels' main loop: none (SIMT) or portable (the matrix kernels computed by each warp's "
                  "threads, on any device: checks them on lavapipe); default: the device's own");
  cmd->add_option("--input", a->inputs, "A serialized TensorProto (.pb) per graph input, in order (repeatable)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--seed", a->seed, "Fills inputs and missing weights (default 1)");
  cmd->add_option("--repeat", a->repeat, "Timed runs after one warm-up (default 3); times are medians")
      ->check(CLI::Range(1, TimingOptions::kMaxRepeat));
  cmd->add_flag("--check", a->check, "Compare every output with the CPU reference; exit 1 on a mismatch");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.run/1)");
  cmd->add_option("--trace", a->trace,
                  "Write the measured kernels as Chrome trace-event JSON (Perfetto): each kernel's median end to end, "
                  "beside its prediction when a profile priced it");
  cmd->add_flag("--quiet", a->quiet, "No progress line (by default one is drawn on stderr when it is a terminal)");
  cmd->add_flag("--progress", a->progress, "Progress on stderr even when it is not a terminal (a line per phase and "
                                             "every 5 s)");
  cmd->add_flag("--tune", a->tune, "Autotune the plan on the device first (as gpusim tune does), then run the tuned plan");
  add_tune_options(*cmd, *a);
  cmd->callback([a, &rc] { rc = run(*a); });
}

}  // namespace gpusim::cli
