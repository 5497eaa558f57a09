// Fuzz target: a GPU profile's YAML through load, validation and a prediction with it.
#include <cstdint>
#include <string_view>

#include "edges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpusim::edges::profile_yaml(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
