// ONNX ModelProto -> Graph. See include/gpusim/onnx_import.h for the contract.
#include "gpusim/cancel.h"
#include "gpusim/onnx_import.h"

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/files.h"
#include "onnx_wire.h"
#include "ops/registry.h"
#include "tensor_value.h"

namespace gpusim {

Result<std::pair<std::string, int64_t>> parse_dim_override(const std::string& text) {
  const auto eq = text.rfind('=');
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`dims` \"{}\": {}; expected NAME=VALUE (a symbolic dim, e.g. batch=8) or "
                                  "INPUT:AXIS=VALUE (e.g. input_ids:1=128)",
                                  text, why));
  };
  if (eq == std::string::npos || eq == 0) return bad("no name before '='");
  const std::string name = text.substr(0, eq), val = text.substr(eq + 1);
  if (val.empty()) return bad("no value after '='");
  int64_t v = 0;
  for (char ch : val) {
    if (ch < '0' || ch > '9') return bad(fmt::format("value \"{}\" is not a non-negative integer", val));
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, ch - '0', &v)) {
      return bad(fmt::format("value \"{}\" does not fit in 64 bits", val));
    }
  }
  return std::make_pair(name, v);
}

namespace {

std::string norm_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

std::string op_key(const std::string& domain, const std::string& op) {
  return domain.empty() ? op : fmt::format("{}:{}", domain, op);
}

// One level of names: the main graph, or an inlined If branch (whose names get a prefix).
struct Scope {
  Scope* parent = nullptr;
  std::string prefix;
  std::unordered_map<std::string, TensorId> names;

  std::optional<TensorId> resolve(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->names.find(n);
      if (it != s->names.end()) return it->second;
    }
    return std::nullopt;
  }
};

// Names a subgraph reads from enclosing scopes.
void outer_refs(const onnx::GraphProto& g, std::unordered_set<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) defined.insert(o);
  }
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) out.insert(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      std::unordered_set<std::string> inner;
      if (a.has_g()) outer_refs(a.g(), inner);
      for (const auto& sg : a.graphs()) outer_refs(sg, inner);
      for (const auto& name : inner) use(name);
    }
  }
  for (const auto& o : g.output()) use(o.name());
}

class Importer {
 public:
  Importer(const std::string& path, const ImportOptions& opts, bool from_file)
      : path_(path), opts_(opts), from_file_(from_file) {}

  Result<Graph> run(onnx::ModelProto& model, const detail::StrippedModel& stripped);

 private:
  std::string node_label(const std::string& name, const std::string& op) const {
    return fmt::format("{}: node \"{}\" ({})", path_, name, op);
  }
  Status add_initializer(const onnx::TensorProto& t, Scope& scope);
  Status resolve_inputs(onnx::GraphProto& g, Scope& scope);
  void run_onnx_inference(onnx::ModelProto& model, const std::map<std::string, int64_t>& opsets);
  bool gpusim_accepts(const onnx::NodeProto& np, const std::unordered_map<std::string, onnx::TypeProto*>& types) const;
  Status verify_nodes(const onnx::GraphProto& g, const std::map<std::string, int64_t>& opsets,
                      const std::unordered_set<std::string>& outer);
  Status process_graph(const onnx::GraphProto& g, Scope& scope);
  Status process_node(const onnx::NodeProto& np, Scope& scope, size_t index);
  Status check_input_types(const onnx::NodeProto& np, const Node& n, const std::string& label) const;
  Status inline_if(const onnx::NodeProto& np, const std::string& name, Scope& scope);
  Status add_node(Node n, const std::vector<std::string>& output_names, Scope& scope);
  Result<Attribute> convert_attribute(const onnx::AttributeProto& a, const std::string& label) const;
  // A gpusim Node from a NodeProto: name, op, domain and attributes (inputs are the caller's).
  Result<Node> node_head(const onnx::NodeProto& np, const std::string& name, const std::string& label) const;

  // A tensor's values, up to `max_elements`, read from its external data file beside the model when
  // it has one; nullopt with `*absent` saying why when a tensor that has elements has none.
  std::optional<Value> decode(const onnx::TensorProto& t, DType dt, const Shape& dims, int64_t max_elements,
                              std::string* absent) const;
  std::optional<std::string> read_external(const onnx::TensorProto& t, int64_t want_bytes, std::string* absent) const;

  std::string path_;
  const ImportOptions& opts_;
  bool from_file_ = true;                           // external data files are read beside path_
  mutable int64_t attr_elements_ = 0;               // attribute tensor values kept (kMaxConstAttrTotalElements)
  mutable std::unordered_map<const onnx::TensorProto*, bool> attr_budget_;  // within it?
  mutable std::set<std::string> missing_files_;     // external data files not found
  mutable int64_t external_read_ = 0;               // external tensors read
  Graph g_;
  int64_t opset_ = 0;
  std::unordered_map<std::string, std::pair<DType, Shape>> onnx_shapes_;
  std::map<std::string, std::vector<std::string>> unsupported_;
  std::unordered_set<TensorId> unknown_;
  std::vector<std::string> disagreements_;
  std::string unsorted_;  // the first node input not assigned before it in file order, if any
  std::map<std::string, int64_t> opsets_;  // the domains (and versions) whose schemas libonnx knows
};

std::optional<std::string> Importer::read_external(const onnx::TensorProto& t, int64_t want_bytes,
                                                   std::string* absent) const {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    const auto num = [&](int64_t* out) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (errno != 0 || end == kv.value().c_str() || *end != '\0' || v < 0) return false;
      *out = v;
      return true;
    };
    if (kv.key() == "location") location = kv.value();
    if ((kv.key() == "offset" && !num(&offset)) || (kv.key() == "length" && !num(&length))) {
      *absent = fmt::format("its external_data {} \"{}\" is not a byte count", kv.key(), kv.value());
      return std::nullopt;
    }
  }
  if (location.empty()) {
    *absent = "it is marked external but names no location";
    return std::nullopt;
  }
  if (!from_file_) {
    *absent = fmt::format("its data is in the external file \"{}\", which a model sent as bytes cannot bring; send "
                          "the model with its small tensors embedded (onnx.save with size_threshold) or give a path",
                          location);
    return std::nullopt;
  }
  const bool escapes = location.front() == '/' || location == ".." || location.rfind("../", 0) == 0 ||
                       location.find("/../") != std::string::npos ||
                       (location.size() >= 3 && location.compare(location.size() - 3, 3, "/..") == 0);
  if (escapes) {
    *absent = fmt::format("its external data location \"{}\" is outside the model's directory; ONNX locations are "
                          "relative to the model and gpusim reads only those",
                          location);
    return std::nullopt;
  }
  if (length >= 0 && length != want_bytes) {
    *absent = fmt::format("its external_data length {} is not the {} bytes its type and shape need", length, want_bytes);
    return std::nullopt;
  }
  const auto slash = path_.rfind('/');
  const std::string folder = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  const std::string file = folder + location;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    missing_files_.insert(file);
    *absent = fmt::format("external data file \"{}\" not found; put it beside the model", file);
    return std::nullopt;
  }
  // A link beside the model must not lead out of its folder (the lexical check above cannot see it).
  if (!base::resolves_inside(folder, file)) {
    *absent = fmt::format("its external data file \"{}\" is a link to a file outside the model's directory; gpusim "
                          "reads external data only from the model's own folder",
                          file);
    return std::nullopt;
  }
  auto f = base::RegularFile::open(file, "external data file");
  if (!f) {
    *absent = f.error().message;
    return std::nullopt;
  }
  const std::string bytes = f->size() >= offset + want_bytes ? f->read(offset, want_bytes) : std::string();
  const bool ok = static_cast<int64_t>(bytes.size()) == want_bytes;
  if (!ok) {
    *absent = fmt::format("external data file \"{}\" ends before bytes {}..{} that hold it; the file is truncated or "
                          "belongs to another export",
                          file, offset, offset + want_bytes);
    return std::nullopt;
  }
  ++external_read_;
  return bytes;
}

std::optional<Value> Importer::decode(const onnx::TensorProto& t, DType dt, const Shape& dims, int64_t max_elements,
                                      std::string* absent) const {
  const auto n = shape_elements(dims);
  if (!n || *n == 0 || *n > max_elements) return detail::tensor_value(t, dt, dims, max_elements);
  if (t.data_location() != onnx::TensorProto::EXTERNAL) {
    auto v = detail::tensor_value(t, dt, dims, max_elements);
    if (!v && absent->empty()) {
      *absent = "the file holds no data for it (a shape-only export drops all but small tensors)";
    }
    return v;
  }
  const int bits = dtype_bits(dt);
  if (dt == DType::kString || bits < 8) {
    *absent = fmt::format("gpusim does not read external {} data", dtype_name(dt));
    return std::nullopt;
  }
  auto bytes = read_external(t, *n * (bits / 8), absent);
  if (!bytes) return std::nullopt;
  onnx::TensorProto inline_t;
  inline_t.set_data_type(t.data_type());
  inline_t.set_raw_data(std::move(*bytes));
  return detail::tensor_value(inline_t, dt, dims, max_elements);
}

Result<Node> Importer::node_head(const onnx::NodeProto& np, const std::string& name, const std::string& label) const {
  Node n;
  n.name = name;
  n.op_type = np.op_type();
  n.domain = norm_domain(np.domain());
  for (const auto& a : np.attribute()) {
    auto attr = convert_attribute(a, label);
    if (!attr) return attr.error();
    n.attributes.emplace(a.name(), std::move(*attr));
  }
  return n;
}

Result<Attribute> Importer::convert_attribute(const onnx::AttributeProto& a, const std::string& label) const {
  Attribute r;
  using A = onnx::AttributeProto;
  int type = a.type();
  if (type == A::UNDEFINED) {  // IR version 1 files leave the type unset: infer it from the field set
    if (a.has_f()) type = A::FLOAT;
    else if (a.has_i()) type = A::INT;
    else if (a.has_s()) type = A::STRING;
    else if (a.has_t()) type = A::TENSOR;
    else if (a.floats_size()) type = A::FLOATS;
    else if (a.ints_size()) type = A::INTS;
    else if (a.strings_size()) type = A::STRINGS;
  }
  switch (type) {
    case A::FLOAT: r.kind = Attribute::Kind::kFloat; r.f = a.f(); break;
    case A::INT: r.kind = Attribute::Kind::kInt; r.i = a.i(); break;
    case A::STRING: r.kind = Attribute::Kind::kString; r.s = a.s(); break;
    case A::FLOATS:
      r.kind = Attribute::Kind::kFloats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      r.kind = Attribute::Kind::kInts;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      r.kind = Attribute::Kind::kStrings;
      r.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::TENSOR:
    case A::SPARSE_TENSOR: {
      r.kind = Attribute::Kind::kTensor;
      const onnx::TensorProto& t = type == A::TENSOR ? a.t() : a.sparse_tensor().values();
      auto dt = dtype_from_onnx(t.data_type());
      if (!dt) {
        return make_error(ErrorCode::kInvalidModel, fmt::format("{}: attribute \"{}\" has tensor data type {}, which is "
                                                                "not an ONNX type (1..22)",
                                                                label, a.name(), t.data_type()));
      }
      r.tensor_dtype = *dt;
      if (type == A::TENSOR) {
        r.tensor_shape.assign(t.dims().begin(), t.dims().end());
        const int64_t n = shape_elements(r.tensor_shape).value_or(INT64_MAX);
        // A node's attributes are converted more than once (checks, then the node): the budget
        // counts each tensor once.
        const auto [seen, first] = attr_budget_.emplace(&t, false);
        if (first && n <= kMaxConstAttrElements && attr_elements_ + n <= kMaxConstAttrTotalElements) {
          seen->second = true;
          attr_elements_ += n;
        }
        if (!seen->second) {
          r.tensor = decode(t, *dt, r.tensor_shape, kMaxConstElements, &r.tensor_absent);
          if (!r.tensor && n > 0) {
            r.tensor_absent = fmt::format("it has {} elements, more than gpusim keeps of a Constant ({} each, {} in all "
                                          "the model's Constants)",
                                          n, kMaxConstAttrElements, kMaxConstAttrTotalElements);
          }
        } else {
          r.tensor = decode(t, *dt, r.tensor_shape, kMaxConstAttrElements, &r.tensor_absent);
        }
      } else {
        r.tensor_shape.assign(a.sparse_tensor().dims().begin(), a.sparse_tensor().dims().end());
      }
      break;
    }
    default:
      break;  // graphs and type protos are handled by the importer or ignored
  }
  return r;
}

Status Importer::add_initializer(const onnx::TensorProto& t, Scope& scope) {
  auto dt = dtype_from_onnx(t.data_type());
  if (!dt) {
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: initializer \"{}\" has data type {}, which is not an ONNX tensor type (1..22)",
                                  path_, t.name(), t.data_type()));
  }
  Tensor w;
  w.name = scope.prefix + t.name();
  w.dtype = *dt;
  w.shape.assign(t.dims().begin(), t.dims().end());
  w.role = TensorRole::kWeight;
  if (const std::string why = shape_problem(w.shape); !why.empty()) {
    return make_error(ErrorCode::kShape, fmt::format("{}: initializer \"{}\": {} (the file is corrupt, or the model "
                                                     "is not one a GPU runs)",
                                                     path_, t.name(), why));
  }
  std::string absent;
  w.value = decode(t, w.dtype, w.shape, kMaxConstElements, &absent);
  if (!w.value && t.data_location() == onnx::TensorProto::EXTERNAL) w.data_absent = absent;
  if (scope.names.count(t.name())) {
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: initializer \"{}\" is defined twice", path_, t.name()));
  }
  scope.names[t.name()] = g_.add_tensor(std::move(w));
  return Ok{};
}

Status Importer::resolve_inputs(onnx::GraphProto& g, Scope& scope) {
  std::set<std::string> used;
  std::vector<std::string> problems;
  std::map<std::string, std::pair<size_t, int>> unresolved;  // symbolic name -> its problem, further dims of it
  std::set<std::string> symbolic;
  for (onnx::ValueInfoProto& vi : *g.mutable_input()) {
    if (scope.names.count(vi.name())) continue;  // an initializer listed as input (IR < 4): a weight
    if (!vi.type().has_tensor_type()) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: graph input \"{}\" is not a tensor (sequence, map and optional inputs are not "
                                    "supported); feed a tensor instead",
                                    path_, vi.name()));
    }
    auto& tt = *vi.mutable_type()->mutable_tensor_type();
    Tensor in;
    in.name = vi.name();
    in.role = TensorRole::kInput;
    auto dt = dtype_from_onnx(tt.elem_type());
    if (!dt) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("{}: graph input \"{}\" has element type {}, which is not "
                                                              "an ONNX tensor type (1..22)",
                                                              path_, vi.name(), tt.elem_type()));
    }
    in.dtype = *dt;
    if (!tt.has_shape()) {
      return make_error(ErrorCode::kShape, fmt::format("{}: graph input \"{}\" has no shape (not even a rank); "
                                                       "re-export the model with input shapes",
                                                       path_, vi.name()));
    }
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      auto& d = *tt.mutable_shape()->mutable_dim(i);
      const std::string axis_key = fmt::format("{}:{}", vi.name(), i);
      int64_t v = -1;
      if (auto it = opts_.dims.find(axis_key); it != opts_.dims.end()) {
        v = it->second;
        used.insert(axis_key);
      } else if (i == 0 && opts_.batch) {
        v = *opts_.batch;
        if (d.has_dim_param() && !d.dim_param().empty()) {
          symbolic.insert(d.dim_param());
          if (opts_.dims.count(d.dim_param())) used.insert(d.dim_param());
        }
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        symbolic.insert(d.dim_param());
        if (auto jt = opts_.dims.find(d.dim_param()); jt != opts_.dims.end()) {
          v = jt->second;
          used.insert(d.dim_param());
        } else if (opts_.other_dims) {
          v = *opts_.other_dims;
        } else {
          // Once a name: a decoder's cache repeats batch_size and past_sequence_length over its 64
          // inputs; the first says where, a count the rest.
          if (auto [seen, fresh] = unresolved.try_emplace(d.dim_param(), problems.size(), 0); !fresh) {
            ++seen->second.second;
            continue;
          }
          problems.push_back(fmt::format("input \"{}\" dim {} is symbolic (\"{}\") and has no value", vi.name(), i,
                                         d.dim_param()));
          continue;
        }
      } else if (d.has_dim_value()) {
        v = d.dim_value();
        if (v < 0) {
          return make_error(ErrorCode::kShape, fmt::format("{}: graph input \"{}\" dim {} is {}, negative; dims must "
                                                           "be >= 0 (fix the model's input shape)",
                                                           path_, vi.name(), i, v));
        }
      } else if (opts_.other_dims) {
        v = *opts_.other_dims;
      } else {
        problems.push_back(fmt::format("input \"{}\" dim {} has no size; set it with `dims {}=N`", vi.name(), i,
                                       axis_key));
        continue;
      }
      d.clear_dim_param();
      d.set_dim_value(v);
      in.shape.push_back(v);
    }
    if (problems.empty()) {
      if (const std::string why = shape_problem(in.shape); !why.empty()) {
        return make_error(ErrorCode::kShape, fmt::format("{}: graph input \"{}\": {}; give smaller `dims` values", path_,
                                                         vi.name(), why));
      }
    }
    const std::string name = vi.name();
    if (problems.empty()) {
      const TensorId id = g_.add_tensor(std::move(in));
      scope.names[name] = id;
      g_.inputs.push_back(id);
    }
  }
  for (const auto& [name, at] : unresolved) {
    problems[at.first] += at.second > 0 ? fmt::format(" (and {} more input dim{} of that name); set it with `dims {}=N`",
                                                      at.second, at.second > 1 ? "s" : "", name)
                                        : fmt::format("; set it with `dims {}=N`", name);
  }
  if (!problems.empty()) {
    return make_error(ErrorCode::kShape, fmt::format("{}: unresolved symbolic dims: {}", path_,
                                                     fmt::join(problems, "; ")));
  }
  // The inputs as "name [d0, d1, ...]", for messages about dims that matched none of them.
  const auto inputs = [&] {
    constexpr size_t kListed = 8;  // a decoder has 66; a crafted file, any number
    std::vector<std::string> out;
    for (size_t i = 0; i < std::min(g_.inputs.size(), kListed); ++i) {
      const Tensor& t = g_.tensor(g_.inputs[i]);
      out.push_back(fmt::format("{} [{}]", t.name, fmt::join(t.shape, ", ")));
    }
    if (g_.inputs.size() > kListed) out.push_back(fmt::format("and {} more", g_.inputs.size() - kListed));
    return out.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(out, ", "));
  };
  for (const auto& [k, v] : opts_.dims) {
    if (used.count(k)) continue;
    const size_t colon = k.rfind(':');
    const bool axis_form = colon != std::string::npos && colon + 1 < k.size() &&
                           k.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (axis_form) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: `dims {}={}` names no input axis; the inputs are {}", path_, k, v, inputs()));
    }
    if (symbolic.empty()) {
      // A model with no symbolic dims at all: the same --dim (batch=1) a script gives every model
      // changes nothing when every input already leads with that size, and says so; another value
      // would be ignored, so it is refused with the way to change a fixed size.
      bool leads = true;
      for (TensorId id : g_.inputs) {
        const Shape& s = g_.tensor(id).shape;
        leads = leads && !s.empty() && s[0] == v;
      }
      if (leads) {
        g_.notes.push_back(fmt::format("`dims {}={}` changes nothing: the model's inputs have no symbolic dims and "
                                       "already lead with {}",
                                       k, v, v));
        continue;
      }
      const std::string first = g_.inputs.empty() ? "INPUT" : g_.tensor(g_.inputs.front()).name;
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: `dims {}={}` would change nothing: the model's inputs have no symbolic dims "
                                    "(every size is fixed: {}); to change a fixed size name its input's axis "
                                    "(`dims {}:0={}`), or re-export the model with a symbolic dim",
                                    path_, k, v, inputs(), first, v));
    }
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: `dims {}={}` matches no input dim; the model's symbolic dims are: {}", path_, k, v,
                                  fmt::join(symbolic, ", ")));
  }
  return Ok{};
}

// Every node of a known ONNX op checked against its schema (input and output counts, attribute
// names and types, required attributes) before any shape inference reads it: libonnx's inference
// and gpusim's trust what the schema promises, and a node that breaks it must fail here, named.
Status Importer::verify_nodes(const onnx::GraphProto& g, const std::map<std::string, int64_t>& opsets,
                              const std::unordered_set<std::string>& outer) {
  // Each name is assigned once (SSA): by a graph input or initializer (an initializer may also be
  // listed as an input) or by one node's output. Both inferences key tensors by name.
  std::unordered_map<std::string, std::pair<std::string, int>> producer;  // name -> who assigns it, node index
  for (const auto& i : g.input()) producer.emplace(i.name(), std::pair{std::string("graph input"), -1});
  for (const auto& t : g.initializer()) producer.emplace(t.name(), std::pair{std::string("initializer"), -1});
  for (int k = 0; k < g.node_size(); ++k) {
    check_cancelled();  // a request past its time limit stops here, not after every node
    const onnx::NodeProto& np = g.node(k);
    for (const std::string& o : np.output()) {
      if (o.empty()) continue;  // an optional output left out
      const auto [it, fresh] = producer.emplace(o, std::pair{fmt::format("node \"{}\"", np.name()), k});
      if (!fresh) {
        return make_error(ErrorCode::kInvalidModel,
                          fmt::format("{}: output \"{}\" is also assigned by {}; an ONNX graph assigns each name once "
                                      "(SSA): the file is corrupt or was edited by hand",
                                      node_label(np.name(), np.op_type()), o, it->second.first));
      }
    }
  }
  // libonnx's inference walks the nodes in file order and needs each input typed before it is read:
  // a node that reads a later node's output (the file is not topologically sorted, or has a cycle)
  // or a name nothing assigns makes it dereference a missing type. gpusim orders nodes itself and
  // names what is missing; libonnx's pass is skipped.
  for (int k = 0; k < g.node_size() && unsorted_.empty(); ++k) {
    for (const std::string& in : g.node(k).input()) {
      if (in.empty()) continue;
      const auto it = producer.find(in);
      if (it == producer.end() && !outer.count(in)) {
        unsorted_ = fmt::format("node \"{}\" reads \"{}\", which nothing assigns", g.node(k).name(), in);
        break;
      }
      if (it != producer.end() && it->second.second >= k) {
        unsorted_ = fmt::format("node \"{}\" reads \"{}\", which {} assigns later in the file", g.node(k).name(), in,
                                it->second.first);
        break;
      }
    }
  }
  // The names a subgraph may read: built once, and only when some node has a subgraph.
  std::optional<std::unordered_set<std::string>> visible_names;
  auto visible = [&]() -> const std::unordered_set<std::string>& {
    if (!visible_names) {
      visible_names = outer;
      for (const auto& [name, who] : producer) visible_names->insert(name);
    }
    return *visible_names;
  };
  for (const onnx::NodeProto& np : g.node()) {
    check_cancelled();  // a request past its time limit stops here, not after every node
    const std::string domain = norm_domain(np.domain());
    const auto v = opsets.find(domain);
    if (v != opsets.end()) {
      const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(np.op_type(), static_cast<int>(v->second), domain);
      if (schema != nullptr) {
        try {
          schema->Verify(np);
        } catch (const std::exception& e) {
          std::string why = e.what();
          if (const auto at = why.find("==> Context:"); at != std::string::npos) why.erase(at);
          while (!why.empty() && (why.back() == ' ' || why.back() == '\n')) why.pop_back();
          return make_error(ErrorCode::kInvalidModel,
                            fmt::format("{}: {} (the ONNX schema of {} at opset {}); fix or re-export the model",
                                        node_label(np.name(), np.op_type()), why, np.op_type(), v->second));
        }
      }
    }
    for (const onnx::AttributeProto& a : np.attribute()) {
      if (a.has_g()) {
        if (auto s = verify_nodes(a.g(), opsets, visible()); !s) return s;
      }
      for (const onnx::GraphProto& sub : a.graphs()) {
        if (auto s = verify_nodes(sub, opsets, visible()); !s) return s;
      }
    }
  }
  return Ok{};
}

// Whether gpusim's own rule for the op accepts the node's inputs as libonnx typed them (unknown
// dims read as 1). libonnx's inference functions assume what their op's spec promises, ranks above
// all (Gemm-6 reads dim 1 of a rank-1 B: a read past a protobuf array, SIGSEGV); gpusim's rules
// check before they read. A node gpusim refuses, or whose op it does not know (the import then
// fails on it anyway), is not given to libonnx; gpusim names the problem itself later.
bool Importer::gpusim_accepts(const onnx::NodeProto& np,
                              const std::unordered_map<std::string, onnx::TypeProto*>& types) const {
  const ops::OpDef* def = ops::find_op(norm_domain(np.domain()), np.op_type());
  if (!def) return false;
  auto head = node_head(np, np.name(), np.name());
  if (!head) return false;
  Node n = std::move(*head);
  std::vector<Tensor> held(static_cast<size_t>(np.input_size()));
  std::vector<const Tensor*> ins;
  for (int i = 0; i < np.input_size(); ++i) {
    if (np.input(i).empty()) {
      n.inputs.push_back(kNoTensor);
      ins.push_back(nullptr);
      continue;
    }
    const onnx::TypeProto& t = *types.at(np.input(i));
    if (!t.has_tensor_type()) return true;  // sequences and maps: gpusim's rules read them elsewhere
    const auto dt = dtype_from_onnx(t.tensor_type().elem_type());
    if (!dt || !t.tensor_type().has_shape()) return true;  // libonnx checks for a missing shape itself
    Tensor& h = held[static_cast<size_t>(i)];
    h.dtype = *dt;
    for (const auto& d : t.tensor_type().shape().dim()) h.shape.push_back(d.has_dim_value() ? d.dim_value() : 1);
    if (!shape_problem(h.shape).empty()) return false;
    n.inputs.push_back(static_cast<TensorId>(i));
    ins.push_back(&h);
  }
  std::vector<Tensor> outs(static_cast<size_t>(np.output_size()));
  std::vector<std::string> notes;
  ops::InferContext ctx(n, std::move(ins), outs, opset_, &notes);
  try {
    const Status st = def->infer(ctx);
    return st || st.error().code == ErrorCode::kDataDependent;
  } catch (const std::exception&) {
    return false;
  }
}

// libonnx's per-op inference functions, driven node by node by gpusim instead of by libonnx's own
// InferShapes. That driver calls an op's data propagation even when an earlier node failed and left
// its input untyped, and some ops (Shape, for one) then dereference the missing type: one bad Conv
// stride upstream took the process down. Here a node runs only when every input it reads has a
// type; a node whose inference throws leaves its outputs untyped and is counted in one note; ops
// with subgraphs, and ops without an inference function, are left to gpusim's own rules.
void Importer::run_onnx_inference(onnx::ModelProto& model, const std::map<std::string, int64_t>& opsets) {
  // ONNX 1.12 knows opsets up to its release; newer models would be inferred with older schemas.
  const auto& last = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = last.find("");
  if (it != last.end() && opset_ > it->second.second) {
    g_.notes.push_back(fmt::format("ONNX's shape inference (libonnx, opsets up to {}) skipped: the model uses opset {}",
                                   it->second.second, opset_));
    return;
  }
  onnx::GraphProto& g = *model.mutable_graph();
  std::unordered_map<std::string, onnx::TypeProto> types;  // node-based: addresses stay put
  std::unordered_map<std::string, onnx::TypeProto*> by_name;
  std::unordered_map<std::string, const onnx::TensorProto*> data;
  const std::unordered_map<std::string, const onnx::SparseTensorProto*> sparse;
  std::unordered_map<std::string, onnx::TensorShapeProto> generated;
  auto declare = [&](const std::string& name, const onnx::TypeProto& t) {
    if (name.empty() || t.value_case() == onnx::TypeProto::VALUE_NOT_SET) return;
    const auto [at, fresh] = types.emplace(name, t);
    if (fresh) by_name[name] = &at->second;
  };
  for (const auto& i : g.input()) declare(i.name(), i.type());
  for (const auto& t : g.initializer()) {
    onnx::TypeProto tp;
    auto* tt = tp.mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    auto* shape = tt->mutable_shape();
    for (const int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    declare(t.name(), tp);
    data[t.name()] = &t;
  }
  for (const auto& vi : g.value_info()) declare(vi.name(), vi.type());
  for (const auto& vi : g.output()) declare(vi.name(), vi.type());

  size_t failed = 0;
  std::string first;
  for (onnx::NodeProto& n : *g.mutable_node()) {
    check_cancelled();  // a request past its time limit stops here, not after every node
    const bool typed = std::all_of(n.input().begin(), n.input().end(),
                                   [&](const std::string& in) { return in.empty() || by_name.count(in); });
    const bool subgraph = std::any_of(n.attribute().begin(), n.attribute().end(),
                                      [](const onnx::AttributeProto& a) { return a.has_g() || a.graphs_size() > 0; });
    const auto v = opsets.find(norm_domain(n.domain()));
    if (!typed || subgraph || v == opsets.end()) continue;
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(v->second), norm_domain(n.domain()));
    if (!schema || !schema->has_type_and_shape_inference_function()) continue;
    if (!gpusim_accepts(n, by_name)) continue;
    try {
      onnx::shape_inference::InferenceContextImpl ctx(n, by_name, data, sparse, &generated);
      schema->GetTypeAndShapeInferenceFunction()(ctx);
      for (int i = 0; i < n.output_size(); ++i) {
        const onnx::TypeProto& inferred = *ctx.getOutputType(static_cast<size_t>(i));
        if (n.output(i).empty() || inferred.value_case() == onnx::TypeProto::VALUE_NOT_SET) continue;
        auto known = types.find(n.output(i));
        if (known == types.end()) {
          declare(n.output(i), inferred);
        } else {
          onnx::shape_inference::checkShapesAndTypes(inferred, known->second);
          onnx::shape_inference::mergeShapesAndTypes(inferred, &known->second);
        }
      }
      if (schema->has_data_propagation_function()) {
        onnx::shape_inference::DataPropagationContextImpl dctx(n, by_name, data, generated);
        schema->GetDataPropagationFunction()(dctx);
      }
    } catch (const std::exception& e) {
      if (failed++ == 0) first = fmt::format("node \"{}\" ({}): {}", n.name(), n.op_type(), e.what());
    }
  }
  if (failed > 0) {
    g_.notes.push_back(fmt::format("ONNX's shape inference (libonnx) failed on {} node{}, whose outputs gpusim "
                                   "infers alone; the first: {}",
                                   failed, failed == 1 ? "" : "s", first));
  }
  for (const auto& [name, t] : types) {
    if (!t.has_tensor_type() || !t.tensor_type().has_shape()) continue;
    const auto& tt = t.tensor_type();
    Shape s;
    bool complete = true;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value()) {
        complete = false;
        break;
      }
      s.push_back(d.dim_value());
    }
    auto dt = dtype_from_onnx(tt.elem_type());
    // A declared shape with a negative dim (-2^63 in a crafted file) or too many elements is not a
    // shape gpusim can use: a node that would need it fails naming why instead.
    if (complete && dt && shape_problem(s).empty()) onnx_shapes_[name] = {*dt, std::move(s)};
  }
}

Status Importer::process_graph(const onnx::GraphProto& g, Scope& scope) {
  // Kahn's algorithm in file order; dependencies include names read by subgraphs.
  const size_t n = g.node_size();
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i) {
    for (const auto& o : g.node(static_cast<int>(i)).output()) {
      if (!o.empty()) producer[o] = i;
    }
  }
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> indeg(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto& node = g.node(static_cast<int>(i));
    std::unordered_set<std::string> deps(node.input().begin(), node.input().end());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) outer_refs(a.g(), deps);
      for (const auto& sg : a.graphs()) outer_refs(sg, deps);
    }
    for (const auto& d : deps) {
      if (d.empty()) continue;
      if (auto it = producer.find(d); it != producer.end()) {
        users[it->second].push_back(i);
        ++indeg[i];
      } else if (!scope.resolve(d)) {
        return make_error(ErrorCode::kInvalidModel,
                          fmt::format("{}: input \"{}\" is not produced by any node and is not a graph input or "
                                      "initializer; the graph is incomplete",
                                      node_label(node.name(), node.op_type()), d));
      }
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) ready.push(i);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    ++done;
    check_cancelled();
    if (auto s = process_node(g.node(static_cast<int>(i)), scope, i); !s) return s;
    for (size_t u : users[i]) {
      if (--indeg[u] == 0) ready.push(u);
    }
  }
  if (done != n) {
    std::vector<std::string> stuck;
    for (size_t i = 0; i < n && stuck.size() < 6; ++i) {
      if (indeg[i] > 0) {
        const auto& node = g.node(static_cast<int>(i));
        stuck.push_back(fmt::format("\"{}\" ({})", node.name().empty() ? node.output(0) : node.name(), node.op_type()));
      }
    }
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: the graph has a cycle: {} of {} nodes wait on each other, e.g. {}; an ONNX graph "
                                  "must be acyclic",
                                  path_, n - done, n, fmt::join(stuck, ", ")));
  }
  return Ok{};
}

// Each input's element type against its formal parameter in the op's schema (Relu takes floats, not
// strings; Add's A and B share one type T). Verify() checks counts and attributes only; a type the
// schema does not allow would otherwise be priced by predict and fail deep inside run's kernels.
// Checked on the types gpusim inferred, so a node downstream of an op gpusim types differently
// from ONNX is judged by what actually flows into it.
Status Importer::check_input_types(const onnx::NodeProto& np, const Node& n, const std::string& label) const {
  const std::string domain = norm_domain(np.domain());
  const auto v = opsets_.find(domain);
  if (v == opsets_.end()) return Ok{};
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(np.op_type(), static_cast<int>(v->second), domain);
  if (schema == nullptr) {
    // An op the model's opset does not have (ScatterND at opset 9): Verify() had no schema to
    // check it against, and gpusim imports it by name. Its input count is checked against the
    // newest schema, so no kernel sees fewer inputs than it reads (one such ScatterND crashed the
    // CPU reference).
    const onnx::OpSchema* newest = onnx::OpSchemaRegistry::Schema(np.op_type(), domain);
    if (newest == nullptr) return Ok{};
    int given = np.input_size();
    while (given > 0 && np.input(given - 1).empty()) --given;  // trailing optional inputs left out
    if (given < newest->min_input() || given > newest->max_input()) {
      const std::string takes = newest->min_input() == newest->max_input()
                                    ? fmt::format("{}", newest->min_input())
                                : newest->max_input() == std::numeric_limits<int>::max()
                                    ? fmt::format("at least {}", newest->min_input())
                                    : fmt::format("{} to {}", newest->min_input(), newest->max_input());
      return make_error(ErrorCode::kInvalidModel,
                        fmt::format("{}: {} input{}, but {} takes {} (opset {}; the model's opset {} has no {}); fix "
                                    "the exporter or the model",
                                    label, given, given == 1 ? "" : "s", np.op_type(), takes, newest->since_version(),
                                    v->second, np.op_type()));
    }
    const auto& formals = newest->inputs();
    for (size_t i = 0; i < formals.size() && i < static_cast<size_t>(given); ++i) {
      if (formals[i].GetOption() == onnx::OpSchema::Single && np.input(static_cast<int>(i)).empty()) {
        return make_error(ErrorCode::kInvalidModel,
                          fmt::format("{}: input {} ({}) is required but given as \"\"; fix the exporter or the model",
                                      label, i, formals[i].GetName()));
      }
    }
    return Ok{};
  }
  if (schema->inputs().empty()) return Ok{};
  const auto& formals = schema->inputs();
  std::unordered_map<std::string, std::pair<DType, size_t>> bound;  // type parameter -> first type, input index
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoTensor || unknown_.count(n.inputs[i])) continue;
    const auto& f = formals[std::min(i, formals.size() - 1)];
    if (i >= formals.size() && f.GetOption() != onnx::OpSchema::Variadic) break;  // counts: Verify's job
    const Tensor& t = g_.tensor(n.inputs[i]);
    if (t.is_sequence || t.dtype == DType::kUndefined || f.GetTypes().empty()) continue;
    std::string have;
    try {
      have = onnx::Utils::DataTypeUtils::ToDataTypeString(static_cast<int32_t>(t.dtype));
    } catch (const std::exception&) {
      continue;  // a type this libonnx does not name: nothing to check against
    }
    const std::string want = fmt::format("tensor({})", have);
    const auto& allowed = f.GetTypes();
    const bool ok = std::any_of(allowed.begin(), allowed.end(), [&](onnx::DataType d) { return d && *d == want; });
    const std::string& param = f.GetTypeStr();
    if (!ok) {
      std::vector<std::string> names;
      for (onnx::DataType d : allowed) {
        if (d && d->rfind("tensor(", 0) == 0) names.push_back(d->substr(7, d->size() - 8));
      }
      std::sort(names.begin(), names.end());
      return make_error(ErrorCode::kInvalidModel,
                        fmt::format("{}: input {} (\"{}\") is {}, which {} at opset {} does not take{}; {} takes "
                                    "{}; insert a Cast or re-export the model",
                                    label, i, np.input(static_cast<int>(i)), have, np.op_type(), v->second,
                                    param.rfind("tensor(", 0) == 0 ? std::string() : " for " + param, f.GetName(), names.empty() ? std::string("(no tensor type)")
                                                               : fmt::format("{}", fmt::join(names, ", "))));
    }
    // Inputs that share a type parameter (Add's A and B are both T) must agree; a heterogeneous
    // variadic (Concat-style lists are homogeneous, some ml ops are not) is exempt.
    if (i >= formals.size() - 1 && f.GetOption() == onnx::OpSchema::Variadic && !f.GetIsHomogeneous()) continue;
    const auto [at, fresh] = bound.emplace(param, std::pair{t.dtype, i});
    if (!fresh && at->second.first != t.dtype) {
      return make_error(ErrorCode::kInvalidModel,
                        fmt::format("{}: inputs {} and {} share the type {} in {}'s schema but are {} and {}; insert a "
                                    "Cast or re-export the model",
                                    label, at->second.second, i, param, np.op_type(),
                                    onnx::Utils::DataTypeUtils::ToDataTypeString(static_cast<int32_t>(at->second.first)),
                                    have));
    }
  }
  return Ok{};
}

Status Importer::process_node(const onnx::NodeProto& np, Scope& scope, size_t index) {
  const std::string domain = norm_domain(np.domain());
  const std::string name =
      scope.prefix + (np.name().empty() ? fmt::format("{}_{}", np.op_type(), index) : np.name());
  const std::string label = node_label(name, np.op_type());
  if (domain.empty() && np.op_type() == "If") return inline_if(np, name, scope);
  for (const auto& a : np.attribute()) {
    if (a.has_g() || a.graphs_size() > 0) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: ops whose subgraph runs a run-time number of times (Loop, Scan) have no "
                                    "static cost; export the model with the loop unrolled (torch.onnx.export traces "
                                    "Python loops into straight-line code unless the module is scripted)",
                                    label));
    }
  }
  auto head = node_head(np, name, label);
  if (!head) return head.error();
  Node n = std::move(*head);
  for (const auto& in : np.input()) {
    if (in.empty()) {
      n.inputs.push_back(kNoTensor);
      continue;
    }
    auto id = scope.resolve(in);
    if (!id) {
      return make_error(ErrorCode::kInvalidModel,
                        fmt::format("{}: input \"{}\" is not produced by any earlier node", label, in));
    }
    n.inputs.push_back(*id);
  }
  if (auto s = check_input_types(np, n, label); !s) return s;
  return add_node(std::move(n), {np.output().begin(), np.output().end()}, scope);
}

Status Importer::add_node(Node n, const std::vector<std::string>& output_names, Scope& scope) {
  const std::string label = node_label(n.name, n.op_type);
  const ops::OpDef* def = ops::find_op(n.domain, n.op_type);
  bool blocked = false;
  for (TensorId t : n.inputs) blocked = blocked || (t != kNoTensor && unknown_.count(t));

  std::vector<Tensor> outs(output_names.size());
  for (size_t i = 0; i < outs.size(); ++i) outs[i].name = scope.prefix + output_names[i];

  bool known = false;
  bool unfoldable = false;
  if (!def) {
    unsupported_[op_key(n.domain, n.op_type)].push_back(n.name);
  } else if (!blocked) {
    std::vector<const Tensor*> ins;
    for (TensorId t : n.inputs) ins.push_back(t == kNoTensor ? nullptr : &g_.tensor(t));
    ops::InferContext ctx(n, std::move(ins), outs, opset_, &g_.notes);
    Status s = def->infer(ctx);
    // A size that depends on run-time values (Expand to a fed shape, NonZero, stopword removal) takes
    // the shape the model declares or ONNX inferred, when there is one.
    const bool declared = std::all_of(outs.begin(), outs.end(), [&](const Tensor& o) {
      return o.name == scope.prefix || onnx_shapes_.count(o.name);
    });
    if ((!s && s.error().code == ErrorCode::kDataDependent) || (s && ctx.is_estimate())) {
      if (declared) {
        for (Tensor& o : outs) {
          if (o.name == scope.prefix) continue;
          o.dtype = onnx_shapes_[o.name].first;
          o.shape = onnx_shapes_[o.name].second;
          o.value.reset();
          o.is_sequence = false;
        }
        g_.notes.push_back(fmt::format("node \"{}\" ({}): output size depends on run-time values; used the shape the "
                                       "model declares ({})",
                                       n.name, n.op_type, shape_str(outs.front().shape)));
        s = Ok{};
        unfoldable = true;
      } else if (s) {
        g_.notes.push_back(fmt::format("node \"{}\" ({}): output size depends on run-time values; sized as its upper "
                                       "bound {}",
                                       n.name, n.op_type, shape_str(outs.front().shape)));
      }
    }
    if (!s) return make_error(s.error().code, fmt::format("{}: {}", label, s.error().message));
    known = true;
  }
  if (!known) {  // after an unsupported op: take ONNX's inferred shape where it has one
    for (Tensor& o : outs) {
      auto it = onnx_shapes_.find(o.name);
      if (it == onnx_shapes_.end()) continue;
      o.dtype = it->second.first;
      o.shape = it->second.second;
    }
  }
  // Folding: a node runs at import when every output value is already computed (Shape reads only
  // dims) or when it is deterministic and every input is an import-time constant.
  bool all_values = def != nullptr && known && !unfoldable;
  for (size_t i = 0; i < outs.size(); ++i) {
    all_values = all_values && (output_names[i].empty() || outs[i].value.has_value());
  }
  bool all_const = def != nullptr && known;
  for (TensorId t : n.inputs) {
    if (t == kNoTensor) continue;
    const Tensor& in = g_.tensor(t);
    all_const = all_const && (in.role == TensorRole::kConstant || (in.role == TensorRole::kWeight && in.value));
  }
  static const std::unordered_set<std::string> kRandom = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                           "RandomUniformLike", "Bernoulli", "Multinomial"};
  if (kRandom.count(n.op_type) || unfoldable) all_const = false;
  all_const = all_const || all_values;
  n.folded = all_const;

  for (size_t i = 0; i < outs.size(); ++i) {
    if (output_names[i].empty()) {
      n.outputs.push_back(kNoTensor);
      continue;
    }
    Tensor& o = outs[i];
    if (known && o.dtype == DType::kUndefined && !o.is_sequence) {
      return make_error(ErrorCode::kShape, fmt::format("{}: output {} (\"{}\") was not inferred", label, i,
                                                       output_names[i]));
    }
    o.role = all_const ? TensorRole::kConstant : TensorRole::kActivation;
    if (known && !o.is_sequence) {
      if (auto it = onnx_shapes_.find(o.name); it != onnx_shapes_.end() && it->second.second != o.shape) {
        disagreements_.push_back(fmt::format("\"{}\" from node \"{}\" ({}): gpusim {}, ONNX {}", o.name, n.name,
                                             n.op_type, shape_str(o.shape), shape_str(it->second.second)));
      }
    }
    const bool has_shape = known || onnx_shapes_.count(o.name);
    if (scope.names.count(output_names[i])) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("{}: output \"{}\" is already produced by another node "
                                                              "or is an input; ONNX names must be assigned once",
                                                              label, output_names[i]));
    }
    const TensorId id = g_.add_tensor(std::move(o));
    if (!has_shape) unknown_.insert(id);
    scope.names[output_names[i]] = id;
    n.outputs.push_back(id);
  }
  g_.nodes.push_back(std::move(n));
  return Ok{};
}

Status Importer::inline_if(const onnx::NodeProto& np, const std::string& name, Scope& scope) {
  const std::string label = node_label(name, "If");
  if (np.input_size() < 1) return make_error(ErrorCode::kInvalidModel, label + ": has no condition input");
  auto cond = scope.resolve(np.input(0));
  if (!cond) {
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: condition \"{}\" is not produced by any earlier node", label, np.input(0)));
  }
  const Tensor& c = g_.tensor(*cond);
  if (!c.value || c.value->size() != 1) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: the condition \"{}\" is computed at run time, so which branch runs is unknown; "
                                  "gpusim needs static control flow: export with tracing (torch.onnx.export traces the "
                                  "branch taken) or fold the condition",
                                  label, np.input(0)));
  }
  const bool take_then = c.value->as_real(0) != 0;
  const onnx::GraphProto* branch = nullptr;
  for (const auto& a : np.attribute()) {
    if (a.name() == (take_then ? "then_branch" : "else_branch")) branch = &a.g();
  }
  if (!branch) {
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: has no {} attribute", label, take_then ? "then_branch" : "else_branch"));
  }
  if (branch->output_size() != np.output_size()) {
    return make_error(ErrorCode::kInvalidModel, fmt::format("{}: the branch has {} outputs, the node {}", label,
                                                            branch->output_size(), np.output_size()));
  }
  Scope inner;
  inner.parent = &scope;
  inner.prefix = name + "/";
  for (const auto& t : branch->initializer()) {
    if (auto s = add_initializer(t, inner); !s) return s;
  }
  if (auto s = process_graph(*branch, inner); !s) return s;
  // The If's outputs are the branch's outputs under the outer names.
  for (int i = 0; i < np.output_size(); ++i) {
    auto src = inner.resolve(branch->output(i).name());
    if (!src) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("{}: branch output \"{}\" is not produced", label,
                                                              branch->output(i).name()));
    }
    Node id;
    id.name = fmt::format("{}/output_{}", name, i);
    id.op_type = "Identity";
    id.inputs = {*src};
    if (auto s = add_node(std::move(id), {np.output(i)}, scope); !s) return s;
  }
  return Ok{};
}

Result<Graph> Importer::run(onnx::ModelProto& model, const detail::StrippedModel& stripped) {
  if (!model.has_graph()) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not an ONNX model: it parses as protobuf but has no graph "
                                                     "(ModelProto field 7); check that this is an .onnx model file",
                                                     path_));
  }
  opset_ = model.ir_version() < 3 ? 1 : 0;
  for (const auto& o : model.opset_import()) {
    if (norm_domain(o.domain()).empty()) opset_ = o.version();
  }
  if (opset_ == 0) {
    return make_error(ErrorCode::kInvalidModel, fmt::format("{}: the model imports no version of the default ONNX "
                                                            "domain (opset_import); re-export it with an opset",
                                                            path_));
  }
  g_.source_path = path_;
  g_.name = model.graph().name();
  g_.opset = opset_;
  if (opset_ > 21) {
    g_.notes.push_back(fmt::format("opset {} is newer than gpusim's newest (21); ops are read with opset-21 rules",
                                   opset_));
  }
  if (stripped.stripped_tensors > 0) {
    g_.notes.push_back(fmt::format("weight data ({} tensors, {} bytes) skipped: gpusim needs only shapes",
                                   stripped.stripped_tensors, stripped.stripped_bytes));
  }
  Scope root;
  onnx::GraphProto& graph = *model.mutable_graph();
  for (const auto& t : graph.initializer()) {
    if (auto s = add_initializer(t, root); !s) return s.error();
  }
  int64_t external = 0;
  for (const auto& t : graph.initializer()) external += t.data_location() == onnx::TensorProto::EXTERNAL;
  if (external > 0) {
    g_.notes.push_back(fmt::format("{} weights live in external data files; gpusim reads only small ones (shape "
                                   "inputs), and read {}",
                                   external, external_read_));
  }
  if (auto s = resolve_inputs(graph, root); !s) return s.error();
  // The domains whose opsets libonnx knows (newer ones are read by gpusim's own rules only).
  std::map<std::string, int64_t> opsets;
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& o : model.opset_import()) opsets[norm_domain(o.domain())] = o.version();
  if (opsets.find("") == opsets.end()) opsets[""] = opset_;
  for (auto it = opsets.begin(); it != opsets.end();) {
    const auto k = known.find(it->first);
    it = k == known.end() || it->second > k->second.second ? opsets.erase(it) : std::next(it);
  }
  opsets_ = opsets;
  if (auto s = verify_nodes(graph, opsets, {}); !s) return s.error();
  if (opts_.onnx_shape_inference && !unsorted_.empty()) {
    g_.notes.push_back(fmt::format("ONNX's shape inference (libonnx) skipped: the nodes are not in topological order "
                                   "in the file, or read a name nothing assigns ({})",
                                   unsorted_));
  } else if (opts_.onnx_shape_inference) {
    run_onnx_inference(model, opsets);
  }
  if (auto s = process_graph(model.graph(), root); !s) return s.error();

  if (!unsupported_.empty()) {
    std::vector<std::string> parts;
    size_t count = 0;
    for (const auto& [op, nodes] : unsupported_) {
      parts.push_back(fmt::format("{} x{} (first: node \"{}\")", op, nodes.size(), nodes.front()));
      count += nodes.size();
    }
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: {} unsupported op type{} ({} nodes): {}; `gpusim ops` lists what is supported",
                                  path_, unsupported_.size(), unsupported_.size() == 1 ? "" : "s", count,
                                  fmt::join(parts, ", ")));
  }
  for (const auto& o : model.graph().output()) {
    auto id = root.resolve(o.name());
    if (!id) {
      return make_error(ErrorCode::kInvalidModel,
                        fmt::format("{}: graph output \"{}\" is not produced by any node", path_, o.name()));
    }
    Tensor& t = g_.tensor(*id);
    if (t.role == TensorRole::kActivation) t.role = TensorRole::kOutput;
    g_.outputs.push_back(*id);
  }
  // A dim set to 0 is legitimate where the model still computes something (an empty past-KV cache
  // on the first decode step); one that empties every output (batch=0) is a mistake.
  std::vector<std::string> zeros;
  for (const auto& [k, v] : opts_.dims) {
    if (v == 0) zeros.push_back(k);
  }
  if (opts_.other_dims == 0) zeros.push_back("(every other dim)");
  if (!zeros.empty() && !g_.outputs.empty()) {
    bool all_empty = true;
    for (TensorId t : g_.outputs) all_empty = all_empty && (g_.tensor(t).is_sequence || g_.tensor(t).elements() == 0);
    if (all_empty) {
      const Tensor& o = g_.tensor(g_.outputs.front());
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: `dims {}=0` leaves every output empty (\"{}\" is {}): there is nothing to "
                                    "predict or run; give a dim of at least 1 (0 suits only dims a model accepts empty, "
                                    "such as a past-KV length)",
                                    path_, zeros.front(), o.name, shape_str(o.shape)));
    }
  }
  for (const auto& d : disagreements_) g_.notes.push_back("ONNX shape inference disagrees on " + d);
  for (const auto& f : missing_files_) {
    g_.notes.push_back(fmt::format("external data file \"{}\" not found: the small tensors it holds have no values", f));
  }
  return std::move(g_);
}

}  // namespace

namespace {

Result<Graph> import_stripped(Result<detail::StrippedModel> stripped, const std::string& path,
                              const ImportOptions& opts, bool from_file) {
  if (!stripped) return stripped.error();
  // Counted on the wire, before the protobuf is parsed: a million nodes parse to about 800 MB.
  if (opts.max_nodes > 0 && stripped->nodes > opts.max_nodes) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: the graph has {} nodes, over the {} allowed (`max_nodes`); "
                                                     "each node costs memory through import, prediction and report",
                                                     path, stripped->nodes, opts.max_nodes));
  }
  if (opts.admit) {
    if (Status st = opts.admit(stripped->nodes); !st) return st.error();
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(stripped->bytes)) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not a valid ONNX model: the protobuf fields do not match "
                                                     "ModelProto's types; the file is corrupt or not an ONNX model",
                                                     path));
  }
  stripped->bytes.clear();
  stripped->bytes.shrink_to_fit();
  Importer imp(path, opts, from_file);
  return imp.run(model, *stripped);
}

}  // namespace

Result<Graph> import_onnx(const std::string& path, const ImportOptions& opts) {
  return import_stripped(detail::read_model_stripped(path), path, opts, true);
}

Result<Graph> import_onnx_bytes(std::string_view bytes, const std::string& name, const ImportOptions& opts) {
  return import_stripped(detail::read_model_stripped_bytes(bytes, name), name, opts, false);
}

}  // namespace gpusim
