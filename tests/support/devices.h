// Test support: the device backends this build has, opened once per test process. A backend whose
// driver or device is missing is left out with a WARN saying why, so device tests skip loudly.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace gpusim::test {

struct OpenDevice {
  std::string backend;
  std::unique_ptr<backend::Backend> dev;
};

inline std::vector<OpenDevice>& devices() {
  static std::vector<OpenDevice> open = [] {
    std::vector<OpenDevice> out;
    for (const std::string& b : backend::built_backends()) {
      auto d = backend::open(b, 0);
      if (d) {
        out.push_back({b, std::move(*d)});
      } else {
        WARN("backend " << b << " skipped: " << d.error().message);
      }
    }
    if (out.empty()) WARN("no device backend is available: device tests ran nothing");
    return out;
  }();
  return open;
}

// The devices present, then the null backend (backends/null): what executor-logic tests loop over,
// so the logic (units, host fallbacks, notes, launches, the memory plan) is checked on every
// machine, with or without a device. The null device computes nothing: compare outputs with the
// reference only where computes() says so.
inline std::vector<OpenDevice*> logic_devices() {
  static OpenDevice null_device = [] {
    auto d = backend::open("null", 0);
    REQUIRE(d);
    return OpenDevice{"null", std::move(*d)};
  }();
  std::vector<OpenDevice*> out;
  for (auto& d : devices()) out.push_back(&d);
  out.push_back(&null_device);
  return out;
}
inline bool computes(const OpenDevice& d) { return d.backend != "null"; }

// The named backend's device, or nullptr (with a WARN saying why).
inline backend::Backend* device(const std::string& name) {
  for (auto& d : devices()) {
    if (d.backend == name) return d.dev.get();
  }
  WARN("backend " << name << " is not available here: skipped");
  return nullptr;
}

}  // namespace gpusim::test
