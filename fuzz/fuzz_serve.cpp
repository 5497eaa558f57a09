// Fuzz target: gpusim serve's POST routes answered in-process (Service::answer). Every answer must
// be a 2xx or a 4xx JSON error: a 5xx means an exception reached the service's firewall, a bug here.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "edges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string a = gpusim::edges::serve_request(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!a.empty() && a[0] == '5') {
    std::fprintf(stderr, "fuzz_serve: %s\n", a.c_str());
    std::abort();
  }
  return 0;
}
