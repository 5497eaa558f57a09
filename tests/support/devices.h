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

// The named backend's device, or nullptr (with a WARN saying why).
inline backend::Backend* device(const std::string& name) {
  for (auto& d : devices()) {
    if (d.backend == name) return d.dev.get();
  }
  WARN("backend " << name << " is not available here: skipped");
  return nullptr;
}

}  // namespace gpusim::test
