// The host that drives the GPU: its CPU, operating system and driver model, and how they scale a
// runtime's per-call host time (runtime.h).
//
// A framework runtime's host figures (runtimes/pytorch-eager.yaml's op_us, ...) were fitted on the
// hosts that measured them. The same GPU behind a slower CPU, or under Windows' display driver model
// (WDDM), which queues each launch through the OS's GPU scheduler, waits longer for every call. A
// host profile (schema gpusim.host/1, runtimes/hosts/NAME.yaml) says which host a prediction is for;
// the host model (runtimes/hosts/_model.yaml, schema gpusim.host-model/1) says how much that changes
// each call, every coefficient with the data that fitted it:
//
//   per-call host time = the runtime's figure x (reference single-thread score / the host's)^exponent
//                        x the driver model's factor
//
// Device-side figures (a runtime's launch latency, llama.cpp's gap between kernels, CUDA-graph
// replay, gpusim's executor) do not scale: only runtimes whose file says `host_scaled: true`.
//
//   auto dirs = gpusim::default_host_dirs();
//   auto host = gpusim::find_host("windows", dirs);  // or "os=windows,single_thread=2200"
//   auto rt = gpusim::on_host(*gpusim::find_runtime("pytorch-eager", gpusim::default_runtime_dirs()), *host,
//                             *gpusim::load_host_model(dirs));
#pragma once

#include "gpusim/export.h"

#include <map>
#include <string>
#include <vector>

#include "gpusim/result.h"
#include "gpusim/runtime.h"

namespace gpusim {

struct GPUSIM_API HostProfile {
  std::string name;         // "windows", or the description it was made from ("os=windows,...")
  std::string description;
  std::string source_path;  // the YAML it came from ("" when described inline)
  std::string cpu;          // the CPU's name as its vendor writes it ("" when not named)
  // The CPU's single-thread speed as its Geekbench 6 single-core score (browser.geekbench.com); 0 when not
  // known: the host model's reference is assumed, and a prediction says so.
  double single_thread = 0;
  std::string os;            // linux, windows or macos
  std::string driver_model;  // linux, wddm, tcc (Windows' compute-only mode) or macos
  std::string framework;     // the framework the figures are about, where known ("torch 2.4")
  std::map<std::string, std::string> sources;  // figure -> where it comes from
};

struct GPUSIM_API HostModel {
  std::string source_path;
  std::string default_host;             // the host a prediction assumes when none is named
  double reference_single_thread = 0;   // the hosts the runtimes' figures were fitted on
  double cpu_exponent = 1;              // how per-call time follows single-thread speed
  std::map<std::string, double> driver_factor;  // per driver model; linux is 1
  std::string fit;                      // the command that fitted it
  std::map<std::string, std::string> sources;
};

// $GPUSIM_HOST_PATH (colon-separated), <user config>/hosts, then each runtime directory's hosts/
// (the installed runtimes/hosts).
GPUSIM_API std::vector<std::string> default_host_dirs();
GPUSIM_API Result<HostProfile> load_host(const std::string& path);
// The first runtimes/hosts/_model.yaml in `dirs`.
GPUSIM_API Result<HostModel> load_host_model(const std::vector<std::string>& dirs);
GPUSIM_API Result<HostModel> load_host_model_file(const std::string& path);
// Host profile names in `dirs` (the _model file is not one).
GPUSIM_API std::vector<std::string> list_hosts(const std::vector<std::string>& dirs);
// A host profile's name, a path to one (.yaml), or a description: comma-separated key=value pairs
// (os, driver, single_thread, cpu, framework), optionally after a profile's name whose figures they
// change ("windows,single_thread=2200"). Errors name the value, the nearest names and the fix.
GPUSIM_API Result<HostProfile> find_host(const std::string& name_or_spec, const std::vector<std::string>& dirs);
// How many times the reference host's per-call time this host takes.
GPUSIM_API double host_factor(const HostProfile& host, const HostModel& model);
// `rt` with its host figures (op_us, class_us, default_us, extra_kernel_us) scaled to `host`, and
// rt.host naming it. A runtime whose figures are device time is returned unchanged except for
// rt.host and a note in rt.host_note saying the host changes nothing.
GPUSIM_API RuntimeModel on_host(RuntimeModel rt, const HostProfile& host, const HostModel& model);

}  // namespace gpusim
