// What `gpusim run` and `gpusim tune` share: their arguments, opening and compiling the model for a
// backend (with the same defaults and messages), and autotuning a compiled program.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/gpusim.h"

namespace gpusim::cli {

struct RunArgs {
  std::string model, backend = "cpu", plan, gpu, dtype;
  std::vector<std::string> dims, inputs, profile_dirs;
  int device = 0;
  uint64_t seed = 1;
  int repeat = 3;
  bool json = false, check = false, quiet = false, progress = false;
  bool allow_tf32 = false;
  std::string matrix_path;  // "" the device's own
  std::string trace;        // run --trace: the measured kernels as Chrome trace-event JSON
  // Tuning (gpusim tune, gpusim run --tune).
  bool tune = false;
  int top_k = 8;
  double budget_s = 0;
  std::string store;  // "" the default tuning store, "off" none
  bool no_cache = false;
};

// The model compiled for a.backend (its inputs read into `buffers`); on failure the message is
// printed as `command: ...` and `rc` set (2 a bad argument, 1 otherwise).
std::optional<Program> open_program(const RunArgs& a, std::string_view command, int& rc,
                                    std::vector<HostBuffer>& buffers);

// --top-k, --budget-s, --store, --no-cache.
void add_tune_options(CLI::App& cmd, RunArgs& a);

// Tunes `prog` as `a` says, printing the report (a progress line on stderr while it runs); returns
// 0, or the exit code after printing the error.
int tune_program(Program& prog, const RunArgs& a, std::string_view command, TuneReport* out = nullptr);

}  // namespace gpusim::cli
