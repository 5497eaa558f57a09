// Fuzz target: ONNX bytes through import, shape inference, the summary and the eager prediction.
#include <cstdint>
#include <string_view>

#include "edges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpusim::edges::onnx(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
