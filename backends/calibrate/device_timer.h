// Timing kernels on a backend for calibration: compile a dialect kernel, fill buffers with
// non-zero random data, flush the caches (a write over a buffer larger than the last-level cache),
// and time one launch with the device's timers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend.h"
#include "codegen.h"
#include "gpusim/result.h"

namespace gpusim::calibrate {

class DeviceTimer {
 public:
  // `flush_bytes`: size of the buffer written between timed runs that need cold caches.
  DeviceTimer(backend::Backend& dev, uint64_t flush_bytes);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  backend::Backend& device() { return dev_; }
  backend::Language language() const { return lang_; }

  Result<backend::KernelHandle> compile(const codegen::Kernel& k);
  // A buffer of `count` 32-bit values: floats uniform in [0.5, 1.5) (never zero), or, for
  // `ints`, the given values.
  Result<backend::Buffer> floats(uint64_t count, uint64_t seed);
  Result<backend::Buffer> ints(const std::vector<int32_t>& values);
  Result<backend::Buffer> scratch(uint64_t bytes);  // contents unspecified (written by a kernel)
  // Writes the flush buffer (untimed) so the next launch starts with cold caches.
  Status flush();
  // One launch timed with the device's timers, in microseconds.
  Result<double> time(backend::KernelHandle k, std::array<uint32_t, 3> groups, const std::vector<backend::Buffer>& args,
                      bool cold = false);
  // Wall-clock microseconds for `count` untimed launches back to back (enqueue to synchronize).
  Result<double> wall(backend::KernelHandle k, std::array<uint32_t, 3> groups, const std::vector<backend::Buffer>& args,
                      int count);

 private:
  backend::Backend& dev_;
  backend::Language lang_;
  std::vector<backend::Buffer> owned_;
  backend::Buffer flush_buf_{};
  backend::KernelHandle flush_kernel_ = 0;
  uint32_t flush_groups_ = 1;
  bool flush_ready_ = false;
  uint64_t flush_bytes_ = 0;
};

}  // namespace gpusim::calibrate
