// The null backend: a device with no device. Buffers live in host memory (uploads and downloads
// round-trip; a launch computes nothing, so outputs stay zero), compile() checks the capability
// query and records the kernel, launch() records it, and the timers answer from a latency table.
// The executor's logic (plan to kernels, uploads, launch order, timers, downloads, reports) then
// runs and is tested with no GPU, no driver and no lavapipe: `gpusim run MODEL --backend null`.
//
// The table: kernel-name prefix -> microseconds (the longest matching prefix wins), else
// Options::default_us. From the environment for the CLI: GPUSIM_NULL_LATENCY_US="gemm=7.5,ew_=0.5".
//
// Usage:
//   gpusim::backend::null::Options o;
//   o.latency_us = {{"gemm", 7.5}};
//   o.journal = std::make_shared<gpusim::backend::null::Journal>();
//   auto dev = gpusim::backend::null::make(o);       // or backend::open("null", 0)
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"

namespace gpusim::backend::null {

// What the device saw, shared with whoever holds it after the device has moved into a Program.
struct Journal {
  std::mutex mu;
  std::vector<std::string> compiled;  // kernel names, in compile order
  std::vector<std::string> launched;  // kernel names, in launch order
  int uploads = 0, downloads = 0;
};

struct Options {
  std::map<std::string, double> latency_us;  // kernel-name prefix -> us
  double default_us = 1.0;
  Language language = Language::kCudaCpp;   // the source codegen emits for it
  std::shared_ptr<Journal> journal;          // optional
};

// "gemm=7.5,ew_=0.5" -> the table; an error naming the entry that is not PREFIX=MICROSECONDS.
Result<std::map<std::string, double>> parse_latency_table(const std::string& text);

std::unique_ptr<Backend> make(Options o = {});

// One device, index 0, its table from $GPUSIM_NULL_LATENCY_US.
Result<std::vector<DeviceInfo>> list_devices();
Result<std::unique_ptr<Backend>> open(int index);

}  // namespace gpusim::backend::null
