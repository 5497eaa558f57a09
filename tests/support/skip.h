// A test that cannot run here (no device, no driver, data absent) says so and is reported by ctest
// as "skipped", not "passed": SKIPPED() prints the marker ctest's SKIP_REGULAR_EXPRESSION matches
// (tests/CMakeLists.txt) and a Catch warning with the reason. The caller returns after it.
//   if (!dev) { SKIPPED("no Vulkan device: " << dev.error().message); return; }
#pragma once

#include <catch2/catch.hpp>

#include <iostream>

#define SKIPPED(reason)                                              \
  do {                                                               \
    std::cout << "gpusim-test-skipped: " << reason << std::endl;     \
    WARN("skipped: " << reason);                                     \
  } while (0)
