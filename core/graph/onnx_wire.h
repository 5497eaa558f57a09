// Internal: reads an ONNX file's protobuf wire format and returns a copy of the ModelProto without
// the payload of large tensors (initializers, Constant attributes), so a multi-gigabyte model is
// imported without holding its weights: their bytes are skipped (seeked over), never read into
// memory. Tensor dims, dtypes and small tensors (shape constants) are kept.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpusim/result.h"

namespace gpusim::detail {

// Tensor data fields longer than this are dropped, except a node attribute's tensor (a Constant's
// value) up to kKeepConstantBytes, while all those kept stay within kKeepConstantTotalBytes.
inline constexpr int64_t kStripDataBytes = 4096;
inline constexpr int64_t kKeepConstantBytes = int64_t{16} << 20;
inline constexpr int64_t kKeepConstantTotalBytes = int64_t{64} << 20;

struct StrippedModel {
  std::string bytes;           // a serialized ModelProto, weight payloads removed
  int64_t file_bytes = 0;      // size of the file on disk
  int64_t stripped_bytes = 0;  // payload bytes skipped
  int64_t stripped_tensors = 0;
  int64_t nodes = 0;           // NodeProtos, subgraphs' and functions' included
};

// Errors (kIo, kParse) name the file, the byte offset and the field path where reading stopped.
Result<StrippedModel> read_model_stripped(const std::string& path);
// The same from bytes in memory; `name` stands for the file in messages.
Result<StrippedModel> read_model_stripped_bytes(std::string_view bytes, const std::string& name);

}  // namespace gpusim::detail
