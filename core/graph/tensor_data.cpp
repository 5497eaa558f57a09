// Reading tensor payloads (the importer never does): full ModelProto parse, external data
// resolved beside the model, values decoded by element type.
#include "gpusim/tensor_data.h"

#include "base/files.h"
#include "raw_decode.h"

#include <onnx/onnx_pb.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpusim {
namespace {

using detail::bf16_to_double;
using detail::half_to_double;

// Decodes raw little-endian bytes of `n` elements.
Status decode_raw(const std::string& raw, int64_t n, TensorData& t, const std::string& where) {
  if (t.dtype == DType::kString || dtype_bits(t.dtype) < 8) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: raw data of type {} is not supported", where,
                                                           dtype_name(t.dtype)));
  }
  if (!detail::decode_raw(raw, t.dtype, n, t.reals, t.ints)) {
    return make_error(ErrorCode::kInvalidModel, fmt::format("{}: {} bytes of data do not hold {} elements of {}", where,
                                                            raw.size(), n, dtype_name(t.dtype)));
  }
  return Ok{};
}

// Decodes a TensorProto; `dir` resolves external data. Returns false (no error) when the data is
// simply absent (shape-only files, a missing external file).
// `dir`: where external data files lie; nullptr for a model from memory (they are not read).
Result<bool> decode(const onnx::TensorProto& p, const std::filesystem::path* dir, TensorData& t,
                    const std::string& where) {
  auto dt = dtype_from_onnx(p.data_type());
  if (!dt) return make_error(ErrorCode::kInvalidModel, fmt::format("{}: data type {} is not an ONNX type", where, p.data_type()));
  t.dtype = *dt;
  t.shape.assign(p.dims().begin(), p.dims().end());
  const auto n = shape_elements(t.shape);
  if (!n) return make_error(ErrorCode::kShape, fmt::format("{}: dims {} are invalid", where, shape_str(t.shape)));
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset" || kv.key() == "length") {
        const std::string& v = kv.value();
        int64_t x = 0;
        const bool digits = !v.empty() && v.size() <= 18 && v.find_first_not_of("0123456789") == std::string::npos;
        if (digits) x = std::stoll(v);
        if (!digits) {
          return make_error(ErrorCode::kInvalidModel,
                            fmt::format("{}: its external_data {} \"{}\" is not a byte count", where, kv.key(), v.substr(0, 32)));
        }
        (kv.key() == "offset" ? offset : length) = x;
      }
    }
    if (dir == nullptr) return false;
    // Only a file of the model's own folder, links resolved, and only a regular one (as the importer).
    const std::filesystem::path file = *dir / location;
    if (location.empty() || std::filesystem::path(location).is_absolute() || !base::resolves_inside(*dir, file)) {
      return false;
    }
    auto f = base::RegularFile::open(file.string(), "external data file");
    if (!f) return false;
    const int64_t bytes = length >= 0 ? length : *n * std::max(1, dtype_bits(t.dtype) / 8);
    if (bytes > f->size() || offset > f->size() - bytes) return false;
    const std::string raw = f->read(offset, bytes);
    if (static_cast<int64_t>(raw.size()) != bytes) return false;
    if (auto s = decode_raw(raw, *n, t, where); !s) return s.error();
    return true;
  }
  if (p.has_raw_data()) {
    if (auto s = decode_raw(p.raw_data(), *n, t, where); !s) return s.error();
    return true;
  }
  auto fits = [&](int64_t got) { return got == *n; };
  switch (t.dtype) {
    case DType::kFloat32: case DType::kComplex64:
      if (!fits(p.float_data_size())) return *n == 0;
      t.reals.assign(p.float_data().begin(), p.float_data().end());
      break;
    case DType::kFloat64:
      if (!fits(p.double_data_size())) return *n == 0;
      t.reals.assign(p.double_data().begin(), p.double_data().end());
      break;
    case DType::kInt64:
      if (!fits(p.int64_data_size())) return *n == 0;
      t.ints.assign(p.int64_data().begin(), p.int64_data().end());
      break;
    case DType::kUInt32: case DType::kUInt64:
      if (!fits(p.uint64_data_size())) return *n == 0;
      for (uint64_t x : p.uint64_data()) t.ints.push_back(static_cast<int64_t>(x));
      break;
    case DType::kString:
      if (!fits(p.string_data_size())) return *n == 0;
      t.strings.assign(p.string_data().begin(), p.string_data().end());
      break;
    case DType::kFloat16: case DType::kBFloat16:
      if (!fits(p.int32_data_size())) return *n == 0;
      for (int32_t x : p.int32_data()) {
        const auto bits = static_cast<uint16_t>(x);
        t.reals.push_back(t.dtype == DType::kFloat16 ? half_to_double(bits) : bf16_to_double(bits));
      }
      break;
    default:
      if (!fits(p.int32_data_size())) return *n == 0;
      t.ints.assign(p.int32_data().begin(), p.int32_data().end());
      break;
  }
  return true;
}

}  // namespace

namespace {

Result<std::map<std::string, TensorData>> model_tensors(const onnx::ModelProto& m, const std::string& model_path,
                                                        const std::filesystem::path* dir) {
  std::map<std::string, TensorData> out;
  for (const auto& init : m.graph().initializer()) {
    TensorData t;
    t.name = init.name();
    auto ok = decode(init, dir, t, fmt::format("{}: initializer \"{}\"", model_path, init.name()));
    if (!ok) return ok.error();
    if (*ok) out.emplace(t.name, std::move(t));
  }
  for (const auto& node : m.graph().node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1) continue;
    for (const auto& a : node.attribute()) {
      if (a.name() != "value" || !a.has_t()) continue;
      TensorData t;
      t.name = node.output(0);
      auto ok = decode(a.t(), dir, t, fmt::format("{}: node \"{}\" (Constant)", model_path, node.name()));
      if (!ok) return ok.error();
      if (*ok) out.emplace(t.name, std::move(t));
    }
  }
  return out;
}

}  // namespace

Result<std::map<std::string, TensorData>> read_model_tensors(const std::string& model_path) {
  auto bytes = base::read_regular_file(model_path, INT32_MAX, "the model");
  if (!bytes) return bytes.error();
  onnx::ModelProto m;
  if (!m.ParseFromArray(bytes->data(), static_cast<int>(bytes->size()))) {
    return make_error(ErrorCode::kParse, fmt::format("{0}: not a valid ONNX model (`gpusim inspect {0}` says why)", model_path));
  }
  const std::filesystem::path dir = std::filesystem::path(model_path).parent_path();
  return model_tensors(m, model_path, &dir);
}

Result<std::map<std::string, TensorData>> read_model_tensors_bytes(std::string_view bytes, const std::string& name) {
  onnx::ModelProto m;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) || !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not a valid ONNX model (gpusim inspect says why)", name));
  }
  return model_tensors(m, name, nullptr);
}

Result<TensorData> read_tensor_file(const std::string& path) {
  auto bytes = base::read_regular_file(path, INT32_MAX, "the tensor file");
  if (!bytes) return bytes.error();
  onnx::TensorProto p;
  if (!p.ParseFromArray(bytes->data(), static_cast<int>(bytes->size()))) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not a serialized TensorProto", path));
  }
  TensorData t;
  t.name = p.name();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto ok = decode(p, &dir, t, path);
  if (!ok) return ok.error();
  if (!*ok) return make_error(ErrorCode::kParse, fmt::format("{}: the tensor has no data", path));
  return t;
}

}  // namespace gpusim
