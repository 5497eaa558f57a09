// Fuzz target: a plan document through parse, validation and prediction (gpusim predict --plan).
#include <cstdint>
#include <string_view>

#include "edges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpusim::edges::plan_json(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
