#include "onnx_wire.h"

#include "base/files.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpusim::detail {
namespace {

using google::protobuf::io::CodedInputStream;

// The message types whose fields we descend into; everything else is copied verbatim.
enum class Msg { kModel, kGraph, kNode, kAttribute, kTensor, kSparseTensor, kFunction };

// Field number -> submessage kind for the messages on the path to tensor payloads
// (field numbers from onnx.proto).
bool submessage(Msg m, uint32_t field, Msg* child) {
  switch (m) {
    case Msg::kModel:
      if (field == 7) { *child = Msg::kGraph; return true; }
      if (field == 25) { *child = Msg::kFunction; return true; }
      return false;
    case Msg::kGraph:
      if (field == 1) { *child = Msg::kNode; return true; }
      if (field == 5) { *child = Msg::kTensor; return true; }
      if (field == 15) { *child = Msg::kSparseTensor; return true; }
      return false;
    case Msg::kNode:
      if (field == 5) { *child = Msg::kAttribute; return true; }
      return false;
    case Msg::kAttribute:
      if (field == 5 || field == 10) { *child = Msg::kTensor; return true; }
      if (field == 6 || field == 11) { *child = Msg::kGraph; return true; }
      if (field == 22 || field == 23) { *child = Msg::kSparseTensor; return true; }
      return false;
    case Msg::kSparseTensor:
      if (field == 1 || field == 2) { *child = Msg::kTensor; return true; }
      return false;
    case Msg::kFunction:
      if (field == 5) { *child = Msg::kNode; return true; }
      return false;
    case Msg::kTensor:
      return false;
  }
  return false;
}

// TensorProto data fields: float_data 4, int32_data 5, string_data 6, int64_data 7, raw_data 9,
// double_data 10, uint64_data 11.
bool is_tensor_data(uint32_t field) {
  return field == 4 || field == 5 || field == 6 || field == 7 || field == 9 || field == 10 || field == 11;
}

const char* msg_name(Msg m) {
  switch (m) {
    case Msg::kModel: return "model";
    case Msg::kGraph: return "graph";
    case Msg::kNode: return "node";
    case Msg::kAttribute: return "attribute";
    case Msg::kTensor: return "tensor";
    case Msg::kSparseTensor: return "sparse_tensor";
    case Msg::kFunction: return "function";
  }
  return "message";
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Message nesting the reader follows (model.graph.node.attribute.graph...: 3 per subgraph level);
// deeper input is refused rather than recursed into.
constexpr size_t kMaxDepth = 64;

class Filter {
 public:
  Filter(CodedInputStream& in, const std::string& path, int64_t file_bytes)
      : in_(in), path_(path), file_bytes_(file_bytes) {}

  // Copies the fields of one message of kind `m` into `out` until the current limit (or the end
  // of the file for the top-level message).
  bool run(Msg m, std::string& out, bool top, Msg parent = Msg::kModel) {
    path_stack_.push_back(msg_name(m));
    if (path_stack_.size() > kMaxDepth) {
      error = make_error(ErrorCode::kLimit,
                         fmt::format("{}: messages nested more than {} deep ({}...); real models nest a few levels "
                                     "(each If/Loop body adds three): the file is corrupt or hostile",
                                     path_, kMaxDepth, where().substr(0, 120)));
      return false;
    }
    while (true) {
      if (top ? in_.CurrentPosition() >= file_bytes_ : in_.BytesUntilLimit() <= 0) break;
      const int64_t at = in_.CurrentPosition();
      const uint32_t tag = in_.ReadTag();
      if (tag == 0) return fail_at(at, "an invalid field tag");
      const uint32_t field = tag >> 3;
      const uint32_t wire = tag & 7;
      switch (wire) {
        case 0: {
          uint64_t v;
          if (!in_.ReadVarint64(&v)) return fail_at(at, "a varint that does not end");
          put_varint(out, tag);
          put_varint(out, v);
          break;
        }
        case 1: {
          uint64_t v;
          if (!in_.ReadLittleEndian64(&v)) return fail_at(at, "a 64-bit field cut short");
          put_varint(out, tag);
          out.append(reinterpret_cast<const char*>(&v), 8);
          break;
        }
        case 5: {
          uint32_t v;
          if (!in_.ReadLittleEndian32(&v)) return fail_at(at, "a 32-bit field cut short");
          put_varint(out, tag);
          out.append(reinterpret_cast<const char*>(&v), 4);
          break;
        }
        case 2: {
          uint32_t len;
          if (!in_.ReadVarint32(&len)) return fail_at(at, "a length that does not end");
          const int64_t remaining = top ? file_bytes_ - in_.CurrentPosition() : in_.BytesUntilLimit();
          if (static_cast<int64_t>(len) > remaining) {
            return fail_len(at, field, len, remaining);
          }
          Msg child;
          if (submessage(m, field, &child)) {
            if (child == Msg::kNode) ++nodes;
            std::string sub;
            const auto limit = in_.PushLimit(static_cast<int>(len));
            if (!run(child, sub, false, m)) return false;
            in_.PopLimit(limit);
            put_varint(out, tag);
            put_varint(out, sub.size());
            out += sub;
          } else if (m == Msg::kTensor && is_tensor_data(field) && len > kStripDataBytes && !keep_constant(parent, len)) {
            if (!in_.Skip(static_cast<int>(len))) return fail_len(at, field, len, 0);
            stripped_bytes += len;
            ++stripped_tensors;
          } else {
            put_varint(out, tag);
            put_varint(out, len);
            const size_t old = out.size();
            out.resize(old + len);
            if (len > 0 && !in_.ReadRaw(out.data() + old, static_cast<int>(len))) return fail_len(at, field, len, 0);
          }
          break;
        }
        default:
          return fail_at(at, fmt::format("wire type {} (field {}), which ONNX files never contain", wire, field));
      }
    }
    path_stack_.pop_back();
    return true;
  }

  Error error;
  int64_t kept_constant_bytes = 0;
  int64_t stripped_bytes = 0;
  int64_t stripped_tensors = 0;
  int64_t nodes = 0;

 private:
  // A node attribute's tensor (a Constant's value: position ids, a causal mask) is kept up to
  // kKeepConstantBytes each and kKeepConstantTotalBytes in all: run-time execution needs its values.
  bool keep_constant(Msg parent, uint32_t len) {
    if (parent != Msg::kAttribute || len > kKeepConstantBytes || kept_constant_bytes + len > kKeepConstantTotalBytes) {
      return false;
    }
    kept_constant_bytes += len;
    return true;
  }

  std::string where() const {
    std::string s;
    for (const char* p : path_stack_) s += s.empty() ? std::string(p) : std::string(".") + p;
    return s;
  }

  bool fail_at(int64_t at, const std::string& what) {
    if (at == 0) {
      error = make_error(ErrorCode::kParse,
                         fmt::format("{}: not an ONNX model: byte 0 starts {}; an .onnx file is a binary protobuf "
                                     "ModelProto (check that this is the model file, not a text or archive file)",
                                     path_, what));
    } else if (in_.CurrentPosition() >= file_bytes_) {
      error = make_error(ErrorCode::kParse,
                         fmt::format("{}: truncated: the file ends at byte {} inside {}; the file is incomplete "
                                     "(re-download or re-export it)",
                                     path_, file_bytes_, where()));
    } else {
      error = make_error(ErrorCode::kParse,
                         fmt::format("{}: not a valid ONNX model: byte {} inside {} holds {}; the file is corrupt or not "
                                     "an ONNX model",
                                     path_, at, where(), what));
    }
    return false;
  }

  bool fail_len(int64_t at, uint32_t field, uint32_t len, int64_t remaining) {
    if (in_.CurrentPosition() + static_cast<int64_t>(len) > file_bytes_ || remaining <= 0) {
      error = make_error(ErrorCode::kParse,
                         fmt::format("{}: truncated: field {} of {} at byte {} needs {} bytes but the file ends at byte "
                                     "{}; the file is incomplete (re-download or re-export it)",
                                     path_, field, where(), at, len, file_bytes_));
    } else {
      error = make_error(ErrorCode::kParse,
                         fmt::format("{}: not a valid ONNX model: field {} of {} at byte {} claims {} bytes but its "
                                     "enclosing message has only {} left; the file is corrupt",
                                     path_, field, where(), at, len, remaining));
    }
    return false;
  }

  CodedInputStream& in_;
  const std::string& path_;
  int64_t file_bytes_;
  std::vector<const char*> path_stack_;
};

}  // namespace

namespace {

// Copies the model from `stream` into r.bytes without its weight payloads.
Result<StrippedModel> strip(google::protobuf::io::ZeroCopyInputStream& stream, const std::string& name,
                            StrippedModel& r) {
  bool ok;
  Error err;
  {
    CodedInputStream in(&stream);
    in.SetTotalBytesLimit(INT32_MAX);
    Filter f(in, name, r.file_bytes);
    ok = f.run(Msg::kModel, r.bytes, true);
    err = f.error;
    r.stripped_bytes = f.stripped_bytes;
    r.stripped_tensors = f.stripped_tensors;
    r.nodes = f.nodes;
  }
  if (!ok) return err;
  return std::move(r);
}

}  // namespace

Result<StrippedModel> read_model_stripped(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO does not block the open
  if (fd < 0) {
    const int e = errno;
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}{}", path, std::strerror(e),
                                                  e == ENOENT ? " (check the path)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kIo, fmt::format("{}: is {}, not an .onnx file", path, base::file_kind(st.st_mode)));
  }
  StrippedModel r;
  r.file_bytes = st.st_size;
  if (r.file_bytes == 0) {
    ::close(fd);
    return make_error(ErrorCode::kParse, fmt::format("{}: the file is empty (0 bytes); an ONNX model is a binary "
                                                     "protobuf ModelProto",
                                                     path));
  }
  if (r.file_bytes > INT32_MAX) {
    ::close(fd);
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: {} bytes exceeds the 2 GiB limit of a single protobuf; models this large keep "
                                  "their weights in external data files (torch.onnx.export does so by itself)",
                                  path, r.file_bytes));
  }
  google::protobuf::io::FileInputStream file(fd, 1 << 20);
  file.SetCloseOnDelete(true);
  return strip(file, path, r);
}

Result<StrippedModel> read_model_stripped_bytes(std::string_view bytes, const std::string& name) {
  StrippedModel r;
  r.file_bytes = static_cast<int64_t>(bytes.size());
  if (bytes.empty()) {
    return make_error(ErrorCode::kParse, fmt::format("{}: the model is empty (0 bytes); an ONNX model is a binary "
                                                     "protobuf ModelProto",
                                                     name));
  }
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(ErrorCode::kParse, fmt::format("{}: {} bytes exceeds the 2 GiB limit of a single protobuf", name,
                                                     bytes.size()));
  }
  google::protobuf::io::ArrayInputStream array(bytes.data(), static_cast<int>(bytes.size()));
  return strip(array, name, r);
}

}  // namespace gpusim::detail
