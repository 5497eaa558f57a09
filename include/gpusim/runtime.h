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

#include <map>
#include <string>
#include <vector>

#include "gpusim/result.h"

namespace gpusim {

struct RuntimeModel {
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

  double host_us(const std::string& op, const std::string& op_class, int kernels) const;
  double op_time_us(const std::string& op, const std::string& op_class, double kernels_us, int kernels) const;
};

// The framework ops measurements and runtimes/*.yaml name (PyTorch's: "add", "linear", "ln"), each
// with the ONNX op that computes it ("Add", "Gemm", "LayerNormalization"). Scalar variants
// ("addu") are not listed: they share their op's kernel.
const std::map<std::string, std::string>& framework_ops();

// $GPUSIM_RUNTIME_PATH (colon-separated), <user config>/runtimes, then the installed runtimes/
// (include/gpusim/data_dirs.h).
std::vector<std::string> default_runtime_dirs();
// A built-in name, a NAME.yaml in `dirs`, or a path to a YAML file. Errors name the file, the key,
// the value and the fix.
Result<RuntimeModel> find_runtime(const std::string& name_or_path, const std::vector<std::string>& dirs);
Result<RuntimeModel> load_runtime(const std::string& path);
std::vector<std::string> list_runtimes(const std::vector<std::string>& dirs);

}  // namespace gpusim
