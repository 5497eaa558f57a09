// The executor: runs a plan for real on a device backend. Each plan kernel becomes generated
// source (codegen) compiled by the backend; its buffers are the graph's tensors (views share their
// root's buffer); weights, constants and inputs are uploaded once; every kernel is timed with the
// device's timers over a warm-up and `repeat` timed runs.
//
// What does not run on the device, and says so in `notes`:
//   - nodes folded at import (shape arithmetic) and constants: computed on the host once;
//   - a fused plan kernel that codegen has no generator for runs as one kernel per node
//     (`fused_as_planned` false on its timing);
//   - a node no generator covers (random, string and sequence ops, ...) runs on the host CPU
//     reference with its inputs downloaded and its outputs uploaded (`device` false).
//
// Buffers stay in their own dtype on the run path: the caller's inputs and the weights go to the
// device as they are (converted only where the device stores another type: fp32 given for fp16
// storage, int64 for the int32 the kernels use), and outputs come back as bytes of the output's
// dtype. Only what the host computes (host fallbacks, folded and seeded values) and the CPU
// reference hold values in fp64.
//
// Usage:
//   auto dev = gpusim::backend::open("vulkan");
//   gpusim::exec::RunOptions o;  o.weights = &weights;
//   auto r = gpusim::exec::run_plan(**dev, graph, plan, {x.view()}, o);   // x a HostBuffer
//   for (auto& k : r->kernels) fmt::print("{} {:.1f} us\n", k.name, k.measured_us);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "codegen.h"
#include "gpusim/plan.h"
#include "reference.h"

namespace gpusim::exec {

struct RunOptions {
  const std::map<std::string, TensorData>* weights = nullptr;  // from read_model_tensors
  uint64_t seed = 1;   // inputs and weights not given (the same values the CPU reference uses)
  int repeat = 3;      // timed runs after one warm-up
  bool poison = true;  // fill every buffer a kernel writes with NaN / INT_MAX before the warm-up
  bool fp16_storage = false;  // store floats as fp16 (computed in fp32); set for fp16 plans
  // Host memory the run may hold (cpu::RunOptions::max_host_bytes; 0: half the machine's). On a
  // CPU device (lavapipe) its buffers are host memory too: buffers and host copies together may
  // take 85 % of twice this.
  int64_t max_host_bytes = 0;
  // The matrix units fp16 GEMM-like kernels use; unset: codegen::matrix_path_for(the device).
  std::optional<codegen::MatrixPath> matrix;
  // fp32 GEMM-like kernels as TF32 where the matrix path has it (codegen::target_options).
  bool allow_tf32 = false;
  // Called before every run after the warm-up, with the device idle (calibration flushes the
  // caches here); an error stops the run.
  std::function<Status()> before_timed_run;
  // For a progress line: called as kernels compile ("compile", plan kernels lowered of all) and
  // as each run goes ("warm-up" with run 0, "timed run" with runs 1..repeat; units done of all).
  // Keep it cheap: it runs between launches.
  std::function<void(std::string_view phase, int run, int done, int total)> progress;
};

struct KernelTiming {
  int plan_kernel = 0;       // index into Plan::kernels; -1 for the reference's nodes
  int node = -1;             // the reference's: the node it timed (Graph::nodes)
  std::string name;          // the first node's name
  std::string op_type;       // op types, "+"-joined when fused
  std::string cls;           // generator class, or "host"
  bool device = true;        // false: ran on the host reference
  bool fused_as_planned = true;
  int launches = 0;          // device kernels it took
  double measured_us = 0;    // median over the timed runs (sum of its launches)
  double min_us = 0, max_us = 0;
  std::vector<double> samples_us;  // every timed run, in run order
};

// A graph output as a run returns it: a device's bytes in the output's own dtype, or where no
// device buffer holds it (the reference's values, a host node's, a string or a sequence) the host value.
struct Output {
  std::optional<HostBuffer> buffer;
  cpu::HostTensor host;  // when !buffer

  const Shape& shape() const { return buffer ? buffer->shape : host.shape; }
  DType dtype() const { return buffer ? buffer->dtype : host.dtype; }
  // Host values either way (a buffer decoded to fp64 / int64), for checks and summaries.
  cpu::HostTensor values() const;
};

struct RunResult {
  std::vector<Output> outputs;           // graph outputs, in order
  std::vector<KernelTiming> kernels;     // one per plan kernel, in plan order
  double total_us = 0;                   // sum of the kernels' medians
  backend::CompileStats compile;
  std::vector<std::string> notes;
};

// Runs `plan` (valid for `g`) on `dev`. Inputs in graph-input order (missing ones from the seed),
// each of its input's shape; a float input may come in another float type (it converts on upload).
// The views must stay valid for the call.
Result<RunResult> run_plan(backend::Backend& dev, const Graph& g, const Plan& plan,
                           const std::vector<ConstTensorView>& inputs, const RunOptions& opts);

// What runs a compiled program, behind one interface: a device backend (run_plan: generated
// kernels in plan order, timed by the device's timers; buffers in their own dtype) or the CPU
// reference (node by node in fp64, each node timed on the host clock; it alone decodes the inputs
// whole). The Program holds one and calls it the same way whichever it is.
class Executor {
 public:
  virtual ~Executor() = default;
  // A warm-up and opts.repeat timed runs; repeat 0: one run, for its outputs. The reference's
  // "kernels" are its nodes that took time (plan_kernel -1, device false, class "host"), the
  // slowest first.
  virtual Result<RunResult> run(const Graph& g, const Plan& plan, const std::vector<ConstTensorView>& inputs,
                                const RunOptions& opts) = 0;
  virtual const backend::DeviceInfo& info() const = 0;
  // The backend, for what only a device does (tuning); nullptr for the reference.
  virtual backend::Backend* device() = 0;
  // Whether its outputs are the reference's own (checking them against it compares nothing).
  virtual bool is_reference() const = 0;
  // What a run's progress counts in a phase: "kernels" compiled, "launches" or the reference's "nodes".
  virtual std::string_view progress_units(std::string_view phase) const = 0;
};
std::unique_ptr<Executor> device_executor(std::unique_ptr<backend::Backend> dev);
std::unique_ptr<Executor> reference_executor();

// Relative L2 error ||a - b|| / max(||b||, tiny) of two tensors of equal shape (b the reference);
// NaN where shapes differ or `a` holds a NaN the reference does not.
double relative_l2(const cpu::HostTensor& a, const cpu::HostTensor& b);
double relative_l2(const Output& a, const cpu::HostTensor& b);

}  // namespace gpusim::exec
