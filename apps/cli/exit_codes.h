// What each command's exit code means: shown as the footer of `gpusim COMMAND --help`, and the
// README's "Exit codes" table repeats it word for word (a test compares them). Every command also
// exits 2 on a bad argument (an unknown option, a value out of range) and 70 on an internal error
// (a bug, reported with a message; firewall.h).
#pragma once

#include <map>
#include <string>

namespace gpusim::cli {

inline const std::map<std::string, std::string>& exit_codes() {
  static const std::map<std::string, std::string> codes = {
      {"inspect", "0 imported; 1 the model cannot be imported (the message names the file, node or field); 2 bad "
                  "arguments"},
      {"ops", "0 listed"},
      {"predict", "0 predicted (also when the model does not fit: the output says DOES NOT FIT); 1 the model, GPU "
                  "profile or plan cannot be loaded, or the trace cannot be written; 2 bad arguments (an unknown "
                  "--dtype or --runtime, bf16 on a GPU without bf16)"},
      {"compare", "0 predicted on every GPU (with `--runtimes`, every runtime ranked); 1 the model or a GPU profile cannot be loaded (before any row is "
                  "printed); 2 bad arguments"},
      {"report", "0 the report written; 1 the model or a GPU profile cannot be loaded, or the report cannot be "
                 "written; 2 bad arguments"},
      {"plan", "0 planned and the best plan fits; 1 the model or GPU profile cannot be loaded, or --out cannot be "
               "written; 2 bad arguments (a search size out of range); 3 no plan fits the device memory or "
               "--memory-budget-gb, even with weights offloaded (the table marks each with !)"},
      {"run", "0 ran, and with --check every output is within tolerance; 1 the model, an input, the plan or the "
              "device failed, or --check found an output beyond tolerance; 2 bad arguments (an unknown backend or "
              "dtype, --repeat out of range)"},
      {"tune", "0 tuned (and the tuned plan timed), or the cache described or cleared; 1 the model, plan, device or "
               "store failed, or --out cannot be written; 2 bad arguments (no model, the cpu backend, --top-k or "
               "--budget-s out of range, no profile to rank with)"},
      {"calibrate", "0 measured (or, with --refit, fitted again) and the profile written; 1 no device, a --base "
                    "that cannot be loaded, a failed measurement or fit, --refit raw data that cannot be read, or the "
                    "profile cannot be written (nothing half-written is left); 2 bad arguments (not a device backend, "
                    "a --base of another device without --force-base, --refit with --backend)"},
      {"validate", "0 validated (and no figure worse than --check-against); 1 the measurements cannot be read, "
                   "nothing was validated (every record skipped), a file cannot be written, or a figure is worse than "
                   "--check-against; 2 bad arguments"},
      {"truth", "0 imported or counted; 1 the store or a measurement file cannot be read or written; 2 bad arguments"},
      {"profiles", "0 listed or shown, every profile validated; 1 a profile cannot be loaded or is invalid (validate "
                   "lists every problem); 2 bad arguments (a --dir that is not a directory)"},
      {"serve", "0 stopped by SIGTERM or SIGINT after answering what was in flight; 1 the address cannot be bound or "
                "the service cannot start; 2 bad arguments"},
      {"codegen", "0 every kernel compiled and reported (a flagged mismatch is a finding, not a failure); 1 the model "
                   "or GPU profile cannot be loaded, the compiler (NVRTC, hiprtc, libshaderc) is absent or does not "
                   "know the architecture, a kernel does not compile, or --sources or --db cannot be written; 2 bad arguments "
                   "(a --dtype other than fp32 or fp16, an --arch not sm_XY, gfxNNN or spirv, an NVIDIA or AMD GPU "
                   "with no CUDA or AMD architecture, spirv for a GPU whose kernels use wmma or MFMA)"},
      {"dojo", "0 every shard asked for written or already complete; 1 a model, GPU profile or the store cannot be "
               "loaded, a plan cannot be predicted, or --out cannot be written (complete shards stay); 2 bad "
               "arguments (a --shard not I/N, a value out of range)"},
  };
  return codes;
}

}  // namespace gpusim::cli
