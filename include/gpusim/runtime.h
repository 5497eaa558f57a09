// The runtime that launches kernels, and the host-side time it adds — a setting of its own, never
// folded into a GPU's efficiencies.
//
// A framework in eager mode (PyTorch) spends tens of microseconds of host time per op call
// (argument checks, dispatch, allocation) before the kernel is launched; timed back to back with
// device events around each call, a trivial op measures that floor, and an op whose kernels take
// longer than the host's loop hides it. A CUDA graph replays kernels with a short gap each; gpusim's
// own executor is timed per kernel on the device (no host time at all).
//
// Runtimes are YAML files (schema gpusim.runtime/1) in runtimes/ — the figures with the data and
// command that produced them; `gpusim` and `cuda-graph` are also built in.
//
//   auto rt = gpusim::find_runtime("pytorch-eager", gpusim::default_runtime_dirs());
//   double us = rt->op_time_us("add", "elementwise", kernel_us, 1);
#pragma once

#include "gpusim/export.h"

#include <map>
#include <string>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/patterns.h"
#include "gpusim/result.h"

namespace gpusim {

// How a runtime turns a graph into the kernels it launches (lowering.h applies it). Every rule is
// data in the runtime's YAML (`lowering:`), each with the reason it holds.
struct GPUSIM_API RuntimeLowering {
  // Node groups the runtime always runs as one kernel: an activation the exporter decomposed
  // (erf-GELU as five nodes), a GEMM with its bias as an epilogue, fused attention. No node may be
  // matched by two of them.
  std::vector<Pattern> kernels;
  // Producer/consumer fusions a compiler applies wherever they match, transitively (inductor fuses
  // pointwise chains and reductions with their prologues and epilogues): each is a two-step chain.
  std::vector<Pattern> fuse;
  // Data movement the runtime runs as strided views: folded into every kernel that reads it (index
  // math), or a copy kernel where some reader needs its operand contiguous.
  struct Views {
    std::vector<std::string> ops;          // op types that are views (Transpose, Split, Slice, Expand)
    std::vector<NodeSelector> readers;     // readers that take a strided operand
    std::vector<std::string> reader_fusions;  // kernels of these patterns' fusions take one too ("attention")
    // With layout nhwc, 4-D transposes between NCHW and NHWC order are free: channels-last memory
    // already has that order.
    bool channels_last_free = false;
  };
  Views views;
  // Kernels the runtime adds around a node: "bias" (a convolution's bias added by a kernel of its
  // own), "layout" (the input and weight converted to NHWC before, the output back to NCHW after).
  struct Insert {
    std::string name;
    std::string what;             // "bias" or "layout"
    NodeSelector on;              // the nodes it applies to
    std::string layout;           // only with this --layout ("" = any)
    std::vector<DType> dtypes;    // only when the node computes in one of these (empty = any)
    // layout: which of the node's tensors are converted ("input", "weight", "output"); all three
    // when not given.
    std::vector<std::string> convert;
    std::string why;
    std::string origin;
  };
  std::vector<Insert> inserts;
  // torch.autocast: which ops compute in the autocast type (their float inputs cast to it first,
  // a kernel each), which in fp32 (inputs cast up), which in the widest of their inputs' types
  // (cast inside the kernel); any other op computes in its first float input's type.
  struct Autocast {
    std::vector<std::string> lower, fp32, promote;
    bool present = false;
  };
  Autocast autocast;
  // How a compiler picks the memory format of a graph asked for in NCHW (inductor's
  // decide_layout_opt, torch/_inductor/graph.py, for inference): the whole graph runs channels-last
  // when its convolutions' FLOPs, each weighed by the measured cost of channels-last for its kind
  // of convolution, come to no more than their plain sum, and the graph has at least one
  // convolution per `nodes_per_conv` nodes; else it stays NCHW and the NCHW inserts apply.
  struct LayoutOptimization {
    bool present = false;
    double nodes_per_conv = 300;
    // Cost of channels-last against NCHW (below 1: faster) for a grouped convolution (groups > 1,
    // more than one input channel a group), a small one (at most 64 output and 64 input channels a
    // group), one with at least twice the input channels a group as outputs and a window wider
    // than 1, and any other.
    double grouped = 1, small = 1, in_out = 1, other = 1;
    std::string why;
  };
  LayoutOptimization layout_optimization;
  // A runtime that picks its own memory formats (TensorRT's builder: channel-vectorized NHWC for
  // its convolutions, whatever the exporter's NCHW): 4-D activations run in `use` ("nhwc" or
  // "nchw") whatever layout was asked; the graph's own format is only that of its inputs and outputs.
  struct FixedLayout {
    std::string use;  // "" = the layout asked for (or layout_optimization's choice)
    std::string why;
  };
  FixedLayout layout;
  // Half-precision main loops that accumulate in half precision (TensorRT's fp16 tactics,
  // xmma_..._f16f16_f16f16_f16: the fp16-accumulate peak, twice the fp32-accumulate one on GeForce
  // cards). The classes it applies to ("conv", "gemm"); empty: fp32 accumulation, as cuDNN and
  // cuBLAS calls from PyTorch ask.
  struct HalfAccumulate {
    std::vector<std::string> classes;
    std::string why;
  };
  HalfAccumulate half_accumulate;
  // The kernels launch in the graph's node order, or as a compiler schedules them (same thing here).
  bool empty() const {
    return kernels.empty() && fuse.empty() && views.ops.empty() && inserts.empty() && !autocast.present &&
           !layout_optimization.present && layout.use.empty() && half_accumulate.classes.empty();
  }
};

struct GPUSIM_API RuntimeModel {
  std::string name;         // "pytorch-eager", "cuda-graph", "gpusim"
  std::string description;
  std::string source_path;  // the YAML it came from ("" when built in)
  // Host time of one op call (the framework's dispatch up to the kernel launch and back), per op
  // as records name it ("add", "linear"; ONNX op types for graphs), else per op class, else the
  // default. Microseconds.
  std::map<std::string, double> op_us;
  std::map<std::string, double> class_us;
  double default_us = 0;
  // Each kernel after an op's first: its launch on the host, microseconds.
  double extra_kernel_us = 0;
  // The device's time from a launch reaching it to the kernel running (added to device time when
  // the host is ahead).
  double launch_latency_us = 0;
  // How an op's host time and its kernels' device time combine. Back to back, the host prepares
  // call i+1 while the GPU runs call i: "overlap" gives max(host, kernels + launch latency);
  // "serial" gives their sum (a host that waits for each op); "device" reports device time alone.
  std::string combine = "device";
  // Kernels replayed from a recorded graph (the built-in cuda-graph): the host launches the whole
  // graph once (the profile's launch overhead), then the device dispatches kernel after kernel,
  // default_us apart at most and never slower than gpusim's executor launching them one by one.
  // In YAML, `replay: true` (torch.compile's reduce-overhead mode records its kernels in CUDA graphs).
  bool replay = false;
  // The runtime file it `extends:` (its lowering and figures, each key given replacing the parent's);
  // "" when none.
  std::string extends;
  // Which kernels it launches (empty: one per node, as gpusim's executor and the eager plan do).
  RuntimeLowering lowering;
  // What it runs: "graphs" (an ONNX graph's kernels: gpusim, cuda-graph, PyTorch) or
  // "language-models" (llama.cpp's generations of a described model, which never run an ONNX graph).
  std::string workload = "graphs";
  // The GPU vendors it runs on (profiles' `vendor`: nvidia, amd, intel, apple); empty: any.
  std::vector<std::string> vendors;
  // Its host figures (op_us, class_us, default_us, extra_kernel_us) are the host's time per call, so a
  // host profile scales them (host.h); false: they are device time (llama.cpp's gaps, graph replay).
  bool host_scaled = false;
  // The host profile applied (on_host in host.h): its name, how many times the reference host's
  // per-call time it takes, and what a prediction should say about it. "" before one is applied.
  std::string host;
  double host_factor = 1;
  std::string host_note;

  double host_us(const std::string& op, const std::string& op_class, int kernels) const;
  double op_time_us(const std::string& op, const std::string& op_class, double kernels_us, int kernels) const;
};

// The framework ops measurements and runtimes/*.yaml name (PyTorch's: "add", "linear", "ln"), each
// with the ONNX op that computes it ("Add", "Gemm", "LayerNormalization"). Scalar variants
// ("addu") are not listed: they share their op's kernel.
GPUSIM_API const std::map<std::string, std::string>& framework_ops();

// $GPUSIM_RUNTIME_PATH (colon-separated), <user config>/runtimes, then the installed runtimes/
// (include/gpusim/data_dirs.h).
GPUSIM_API std::vector<std::string> default_runtime_dirs();
// A built-in name, a NAME.yaml in `dirs`, or a path to a YAML file. Errors name the file, the key,
// the value and the fix.
GPUSIM_API Result<RuntimeModel> find_runtime(const std::string& name_or_path, const std::vector<std::string>& dirs);

// The writer beside the reader: a runtime's host-time figures (name, description, combine,
// default_us, extra_kernel_us, launch_latency_us, class_us, op_us) as a gpusim.runtime/1 document,
// with `fit` (the command that fitted them) and `sources` (figure -> where it comes from). Its
// lowering rules are the hand-written part of a file: with_lowering_of keeps them.
GPUSIM_API std::string runtime_to_yaml(const RuntimeModel& r, const std::string& fit,
                                       const std::map<std::string, std::string>& sources);
// `fitted` (runtime_to_yaml's) followed by everything from the `lowering:` section on of the file
// at `path` as written (the rules and their comments); `fitted` alone when there is none.
GPUSIM_API std::string runtime_yaml_with_lowering_of(const std::string& path, const std::string& fitted);
GPUSIM_API Result<RuntimeModel> load_runtime(const std::string& path);
GPUSIM_API std::vector<std::string> list_runtimes(const std::vector<std::string>& dirs);

}  // namespace gpusim
