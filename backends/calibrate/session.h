// The state one calibration run shares between its parts: the device and its timer, the base
// profile and its device model, the measurement discipline, the time budget and progress, and
// what has been measured so far. Internal to backends/calibrate/ (calibrate.h is the public face).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "device_timer.h"
#include "executor.h"
#include "graphs.h"
#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_cost.h"
#include "observation.h"

namespace gpusim::calibrate {

struct Session {
  // The base profile's device model; everything else starts empty or default.
  Session(DeviceTimer& t, const GpuProfile& b) : timer(t), base(b), model(make_device(b)) {}

  DeviceTimer& timer;
  const GpuProfile& base;
  DeviceModel model;  // of the base profile: sizes buffers, picks tiles
  bool quick = false;
  Discipline disc;
  // The matrix microbenchmark's path and GEMM sizes; unset / empty: the device's path
  // (codegen::matrix_path_for) and the default sizes. Tests run the portable path small.
  std::optional<codegen::MatrixPath> matrix;
  std::vector<int64_t> matrix_sizes;
  std::function<void(double, const std::string&)> progress;  // fraction done, what runs now
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  std::vector<Figure> figures;
  std::vector<Observation> observations;
  std::vector<Curve> curves;
  std::vector<std::string> notes;

  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  backend::Backend& dev() { return timer.device(); }
  // The last-level cache the base profile describes (L2 plus Infinity Cache / SLC), bytes.
  double cache_bytes() const { return model.l2_size_bytes + model.llc_size_bytes; }
  // Thread groups that fill the device at 256 threads each (two per resident slot).
  uint32_t full_groups() const;
  Figure& add_figure(Figure f) {
    figures.push_back(std::move(f));
    return figures.back();
  }
};

// The microbenchmarks (microbench.cpp), each adding figures, observations and curves.
Status bench_dram(Session& s);          // read, write and copy bandwidth, buffers far larger than the caches
Status bench_cache_sweep(Session& s);   // read bandwidth against footprint: L2 bandwidth and size
Status bench_shared(Session& s);        // shared-memory bandwidth
Status bench_barrier(Session& s);       // group barrier cost per warp
Status bench_latency(Session& s);       // pointer chase in L1-, L2- and DRAM-sized footprints
Status bench_fma(Session& s);           // FMA throughput per dtype
Status bench_matrix(Session& s);        // fp16 GEMMs on the device's matrix path (not measured where codegen has none)
Status bench_launch(Session& s);        // launch overhead a + b * CTAs, the shortest kernel
Status bench_host_link(Session& s);     // upload and download bandwidth and latency against size
Status bench_occupancy(Session& s);     // copy bandwidth against thread groups in flight

// The codegen kernels (kernels.cpp): GEMMs, convolutions, reductions and elementwise chains of
// several sizes run through the executor; every other one of each class is held out of the fit.
Status bench_codegen_kernels(Session& s);

// Runs one-kernel graph `c` through the executor as `gpusim run` runs it: the base model's best
// tile among those codegen generates, caches flushed before every timed run, the session's
// repeats; `o` carries the seed, storage and matrix path. `work` and `tile` receive what the
// simulator prices.
Result<exec::RunResult> run_kernel_graph(Session& s, const OneKernelGraph& c, exec::RunOptions o, KernelWork* work,
                                         TileConfig* tile);

}  // namespace gpusim::calibrate
