// gpusim._gpusim: the Session API (include/gpusim/gpusim.h) for Python. Results are plain Python
// objects: every answer is the JSON document the CLI's --json and `gpusim serve` give (parsed into
// dicts and lists), run inputs and outputs are NumPy arrays, and a failed call raises gpusim.Error
// carrying the library's message and error code. The GIL is released while the library works, so
// Python threads predicting on one Session run in parallel (a Session is thread-safe).
//
// The package's own gpusim/__init__.py re-exports these names and defines gpusim.Error.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "gpusim/dojo.h"
#include "gpusim/gpusim.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

using gpusim::DType;
using gpusim::ErrorCode;

// An API option as a keyword argument: `dims batch=N` -> dims={"batch": N}, `dtype fp16` ->
// dtype="fp16", `beam_width` -> beam_width.
std::string python_spelling(std::string_view name, std::string_view value) {
  return gpusim::keyword_spelling(name, value, gpusim::KeywordSyntax::kPython);
}

// Raises gpusim.Error(message, code), the message in Python's words. Called with the GIL held.
[[noreturn]] void raise_error(const gpusim::Error& e) {
  py::object cls = py::module_::import("gpusim").attr("Error");
  py::object exc = cls(gpusim::reword_options(e.message, python_spelling), std::string(gpusim::error_code_name(e.code)));
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}
[[noreturn]] void raise_error(ErrorCode code, std::string message) { raise_error(gpusim::Error{code, std::move(message)}); }

template <typename T>
T take(gpusim::Result<T>&& r) {
  if (!r) raise_error(r.error());
  return std::move(*r);
}

// The bound classes and how a caller gets one, for the message below.
template <typename T>
struct Bound;
template <>
struct Bound<gpusim::Model> {
  static constexpr const char* name = "Model";
  static constexpr const char* how = "Session.open_model()";
};
template <>
struct Bound<gpusim::GpuProfile> {
  static constexpr const char* name = "Gpu";
  static constexpr const char* how = "Session.gpu() or Session.gpu_from_yaml()";
};
template <>
struct Bound<gpusim::Program> {
  static constexpr const char* name = "Program";
  static constexpr const char* how = "Session.compile()";
};

// A bound object whose __init__ never ran (gpusim.Session.__new__(gpusim.Session),
// gpusim.Model.__new__(gpusim.Model), ...) is raw memory behind the Python object: pybind11 (2.10 as 3.x, with its default
// holder) allocates it on first use without constructing it, and a call on it would crash the
// interpreter. An object the module made, or __init__ built, is in pybind11's instance registry
// (the lookup get_override uses); one never initialised is not. Every binding passes `self` and
// each bound argument through live() before touching it, with the GIL held: TypeError instead.
template <typename T>
T& live(T& obj) {
  using U = std::remove_const_t<T>;
  if (!py::detail::get_object_handle(&obj, py::detail::get_type_info(typeid(U)))) {
    throw py::type_error(std::string("gpusim.") + Bound<U>::name + ": this object was never initialised (" +
                         Bound<U>::name + ".__new__ without __init__); get one from " + Bound<U>::how);
  }
  return obj;
}

// A JSON document as Python dicts, lists, strings and numbers.
py::object loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }
std::string dumps(const py::handle& obj) { return py::module_::import("json").attr("dumps")(obj).cast<std::string>(); }

// A document from the library: `make` runs without the GIL (a library call, then the document
// function over its result) and answers the JSON text or the error; the text comes back as dicts and
// lists, the error as gpusim.Error.
template <typename F>
py::object document(F&& make) {
  gpusim::Result<std::string> doc = [&] {
    py::gil_scoped_release nogil;
    return make();
  }();
  if (!doc) raise_error(doc.error());
  return loads(*doc);
}

std::optional<DType> float_dtype_arg(const std::optional<std::string>& name, const char* what) {
  if (!name) return std::nullopt;
  auto d = gpusim::retype_dtype_from_name(*name);
  if (!d) raise_error(ErrorCode::kInvalidArgument, std::string(what) + ": \"" + *name +
                                                       "\" is not supported; expected \"fp32\", \"fp16\", \"bf16\", \"int8\" or \"fp8\"");
  return d;
}

// dims={"batch": 8} or ["batch=8", "input_ids:1=128"]: the --dim strings the library takes.
std::vector<std::string> dims_arg(const py::object& dims) {
  std::vector<std::string> out;
  if (dims.is_none()) return out;
  if (py::isinstance<py::dict>(dims)) {
    for (auto kv : dims.cast<py::dict>()) {
      const std::string key = py::str(kv.first);
      if (!py::isinstance<py::int_>(kv.second) || py::isinstance<py::bool_>(kv.second)) {
        raise_error(ErrorCode::kInvalidArgument, "dims: \"" + key + "\" must be an integer, got " +
                                                     std::string(py::repr(kv.second)));
      }
      out.push_back(key + "=" + std::string(py::str(kv.second)));
    }
    return out;
  }
  if (py::isinstance<py::str>(dims)) {
    raise_error(ErrorCode::kInvalidArgument, "dims: give a dict ({\"batch\": 8}) or a list of \"NAME=VALUE\" strings, "
                                             "not the string " + std::string(py::repr(dims)));
  }
  for (auto d : dims) {
    if (!py::isinstance<py::str>(d)) {
      raise_error(ErrorCode::kInvalidArgument, "dims: " + std::string(py::repr(d)) + " is not a \"NAME=VALUE\" string");
    }
    out.push_back(d.cast<std::string>());
  }
  return out;
}

std::vector<std::string> strings_arg(const py::object& v, const char* what) {
  std::vector<std::string> out;
  if (v.is_none()) return out;
  if (py::isinstance<py::str>(v)) return {v.cast<std::string>()};
  for (auto s : v) {
    if (!py::isinstance<py::str>(s)) {
      raise_error(ErrorCode::kInvalidArgument, std::string(what) + ": " + std::string(py::repr(s)) + " is not a string");
    }
    out.push_back(s.cast<std::string>());
  }
  return out;
}

// NumPy dtypes and gpusim's, by kind and item size (NumPy has no bfloat16). Both are read through
// the dtype's Python attributes, not pybind11's py::dtype::kind()/itemsize(): those read the C
// struct PyArray_Descr, whose layout NumPy 2 changed, so a module built with a pybind11 older than
// 2.12 read the wrong item size under NumPy 2 and mapped no dtype at all.
std::optional<DType> dtype_of(const py::handle& d) {
  const std::string kind = py::str(d.attr("kind"));
  const auto n = d.attr("itemsize").cast<py::ssize_t>();
  const char k = kind.size() == 1 ? kind[0] : '?';
  if (k == 'f') return n == 4 ? DType::kFloat32 : n == 2 ? DType::kFloat16 : n == 8 ? std::optional(DType::kFloat64) : std::nullopt;
  if (k == 'i') {
    switch (n) {
      case 1: return DType::kInt8;
      case 2: return DType::kInt16;
      case 4: return DType::kInt32;
      case 8: return DType::kInt64;
      default: return std::nullopt;
    }
  }
  if (k == 'u') {
    switch (n) {
      case 1: return DType::kUInt8;
      case 2: return DType::kUInt16;
      case 4: return DType::kUInt32;
      case 8: return DType::kUInt64;
      default: return std::nullopt;
    }
  }
  if (k == 'b' && n == 1) return DType::kBool;
  return std::nullopt;
}

// An array's size in bytes, through its Python attribute for the same reason (py::array::nbytes()
// multiplies by the item size read from the C struct).
size_t nbytes_of(const py::array& a) { return a.attr("nbytes").cast<size_t>(); }

// A new C-ordered array of a NumPy dtype name, made by numpy.empty: py::array(dtype, shape) computes
// its strides from that C struct's item size too (all zero under NumPy 2 with pybind11 2.10).
py::array new_array(const std::string& np_dtype, const std::vector<int64_t>& shape) {
  py::tuple dims(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) dims[i] = py::int_(shape[i]);
  return py::module_::import("numpy").attr("empty")(dims, "dtype"_a = np_dtype).cast<py::array>();
}

std::optional<std::string> numpy_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    default: return std::nullopt;
  }
}

py::list spec_list(const std::vector<gpusim::TensorSpec>& specs) {
  py::list l;
  for (const auto& s : specs) {
    l.append(py::dict("name"_a = s.name, "dtype"_a = std::string(gpusim::dtype_name(s.dtype)), "shape"_a = s.shape,
                      "size_bytes"_a = s.size_bytes));
  }
  return l;
}

py::list tensor_list(const gpusim::Graph& g, const std::vector<gpusim::TensorId>& ids) {
  py::list out;
  for (gpusim::TensorId id : ids) {
    const gpusim::Tensor& t = g.tensor(id);
    out.append(py::dict("name"_a = t.name, "dtype"_a = std::string(gpusim::dtype_name(t.dtype)), "shape"_a = t.shape));
  }
  return out;
}

// The caller's inputs as arrays in graph-input order: a list (the first k inputs) or a dict by
// name (which must then name the first k inputs). A non-array is converted to the input's dtype;
// an array keeps its own, so a wrong one is reported rather than silently cast.
std::vector<py::array> input_arrays(const std::vector<gpusim::TensorSpec>& want, const py::object& inputs) {
  std::vector<py::object> given;
  if (inputs.is_none()) return {};
  if (py::isinstance<py::dict>(inputs)) {
    py::dict d = inputs.cast<py::dict>();
    for (auto kv : d) {
      const std::string key = py::str(kv.first);
      bool known = false;
      for (const auto& w : want) known = known || w.name == key;
      if (!known) {
        std::string names;
        for (const auto& w : want) names += (names.empty() ? "\"" : ", \"") + w.name + "\"";
        raise_error(ErrorCode::kInvalidArgument, "run: the model has no input \"" + key + "\"; its inputs are " + names);
      }
    }
    size_t k = 0;
    for (; k < want.size() && d.contains(want[k].name); ++k) given.push_back(d[py::str(want[k].name)]);
    if (given.size() != d.size()) {
      raise_error(ErrorCode::kInvalidArgument,
                  "run: input " + std::to_string(k) + " \"" + want[k].name +
                      "\" is missing; inputs not given are drawn from the seed only after every one given, so "
                      "give the inputs before it too (or a list in graph-input order)");
    }
  } else if (py::isinstance<py::array>(inputs)) {
    given.push_back(inputs);
  } else {
    for (auto x : inputs) given.push_back(py::reinterpret_borrow<py::object>(x));
  }
  std::vector<py::array> out;
  for (size_t k = 0; k < given.size(); ++k) {
    if (py::isinstance<py::array>(given[k])) {
      out.push_back(py::array::ensure(given[k], py::array::c_style));
    } else if (k < want.size() && numpy_name(want[k].dtype)) {
      out.push_back(py::array::ensure(py::module_::import("numpy").attr("asarray")(given[k], *numpy_name(want[k].dtype)),
                                      py::array::c_style));
    } else {
      out.push_back(py::array::ensure(given[k], py::array::c_style));
    }
    if (!out.back()) throw py::error_already_set();
  }
  return out;
}

std::vector<gpusim::ConstTensorView> views_of(const std::vector<py::array>& arrays) {
  std::vector<gpusim::ConstTensorView> views;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const py::array& a = arrays[k];
    const py::object dt = a.attr("dtype");
    auto t = dtype_of(dt);
    if (!t) {
      raise_error(ErrorCode::kInvalidArgument, "run: input " + std::to_string(k) + ": NumPy dtype " +
                                                   std::string(py::str(dt)) + " has no gpusim type");
    }
    views.push_back({*t, std::vector<int64_t>(a.shape(), a.shape() + a.ndim()), a.data(), nbytes_of(a)});
  }
  return views;
}

// A plan given as a dict (a gpusim.plan/1 document), its JSON text, or a path to a plan file.
std::optional<gpusim::Plan> plan_arg(const gpusim::Session& s, const gpusim::Model& m, const py::object& plan) {
  if (plan.is_none()) return std::nullopt;
  std::string text, source = "plan";
  if (py::isinstance<py::dict>(plan)) {
    text = dumps(plan);
  } else if (py::isinstance<py::str>(plan) && plan.cast<std::string>().find('{') != std::string::npos) {
    text = plan.cast<std::string>();
  } else {
    // A path: read by the library (a regular file, bounded; a FIFO or /dev/zero is refused).
    source = py::str(py::module_::import("os").attr("fspath")(plan));
    return take(s.load_plan_file(m, source));
  }
  return take(s.load_plan(m, text, source));
}

// gpusim.run/1 documents (dicts, or their JSON text; one or a list) as store records.
std::vector<gpusim::Measurement> run_records(const py::object& runs) {
  py::list docs;
  if (py::isinstance<py::dict>(runs) || py::isinstance<py::str>(runs)) {
    docs.append(runs);
  } else {
    for (auto r : runs) docs.append(r);
  }
  std::vector<gpusim::Measurement> recs;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string text = py::isinstance<py::str>(docs[i]) ? docs[i].cast<std::string>() : dumps(docs[i]);
    auto one = take(gpusim::parse_run_json(text, "runs[" + std::to_string(i) + "]"));
    recs.insert(recs.end(), one.begin(), one.end());
  }
  return recs;
}

gpusim::GpuProfile gpu_arg(const gpusim::Session& s, const py::object& gpu) {
  if (py::isinstance<gpusim::GpuProfile>(gpu)) return live(gpu.cast<const gpusim::GpuProfile&>());
  if (py::isinstance<py::str>(gpu) || py::hasattr(gpu, "__fspath__")) {
    const std::string id = py::str(py::module_::import("os").attr("fspath")(gpu));
    gpusim::Result<gpusim::GpuProfile> r = [&] {
      py::gil_scoped_release nogil;
      return s.gpu(id);
    }();
    return take(std::move(r));
  }
  raise_error(ErrorCode::kInvalidArgument, "gpu: give a profile id (\"nvidia-rtx-3060\"), a path to a profile YAML, or "
                                           "a Gpu from Session.gpu(); got " + std::string(py::repr(gpu)));
}

class PySession;
template <>
struct Bound<PySession> {
  static constexpr const char* name = "Session";
  static constexpr const char* how = "gpusim.Session()";
};

// Every method starts with live(*this) (the GIL is held then; s() and s_ are used without it).
class PySession {
 public:
  explicit PySession(const py::object& profile_dirs, const py::object& runtime_dirs) {
    gpusim::SessionOptions o;
    o.profile_dirs = strings_arg(profile_dirs, "profile_dirs");
    o.runtime_dirs = strings_arg(runtime_dirs, "runtime_dirs");
    s_ = std::make_unique<gpusim::Session>(std::move(o));
  }
  const gpusim::Session& s() const { return *s_; }

  gpusim::Model open_model(const py::object& model, const py::object& dims, const std::string& name) const {
    live(*this);
    gpusim::ModelOptions o;
    o.dims = dims_arg(dims);
    if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model) || py::isinstance<py::memoryview>(model)) {
      std::string bytes = py::isinstance<py::bytes>(model) ? model.cast<std::string>()
                                                           : py::bytes(py::module_::import("builtins").attr("bytes")(model))
                                                                 .cast<std::string>();
      gpusim::Result<gpusim::Model> r = [&] {
        py::gil_scoped_release nogil;
        return s_->open_model_bytes(std::move(bytes), name.empty() ? "model.onnx" : name, o);
      }();
      return take(std::move(r));
    }
    const std::string path = py::str(py::module_::import("os").attr("fspath")(model));
    gpusim::Result<gpusim::Model> r = [&] {
      py::gil_scoped_release nogil;
      return s_->open_model(path, o);
    }();
    return take(std::move(r));
  }

  // `tiles`: "generated" or "library"; None: the runtime's (tiles_for).
  gpusim::TileSpace tiles_arg(const std::optional<std::string>& tiles, const std::string& runtime) const {
    auto t = tiles ? gpusim::parse_tile_space(*tiles, "tiles") : s_->runtime_tiles(runtime);
    if (!t) raise_error(t.error());
    return *t;
  }

  py::object predict(const gpusim::Model& m, const py::object& gpu, const std::optional<std::string>& dtype,
                     const std::string& runtime, const py::object& plan, const std::optional<std::string>& tiles,
                     bool allow_tf32, const std::string& host) const {
    live(*this);
    live(m);
    const gpusim::GpuProfile g = gpu_arg(*s_, gpu);
    gpusim::PredictRequest req;
    req.dtype = float_dtype_arg(dtype, "dtype");
    req.runtime = runtime;
    req.host = host;
    req.plan = plan_arg(*s_, m, plan);
    const gpusim::Target target = s_->target(g, tiles_arg(tiles, runtime), {allow_tf32});
    return document([&]() -> gpusim::Result<std::string> {
      auto r = s_->predict(m, target, req);
      if (!r) return r.error();
      return gpusim::prediction_document(*r, g);
    });
  }

  // What generate and compare_generation take: a model (a description by name, path or text, or
  // an ONNX decoder's path) and the workload's options. A description takes weights, ubatch,
  // backend, flash_attention and cuda_prompt; an ONNX decoder dtype and tiles; both the runtime.
  struct GenerationArgs {
    std::string text;  // the model as given
    bool decoder = false;
    gpusim::GenerationOptions o;
    gpusim::PredictRequest req;
    gpusim::TileSpace tiles = gpusim::TileSpace::kGenerated;
    std::optional<gpusim::LlmSpec> spec;
  };

  GenerationArgs generation_args(const py::object& model, const std::string& weights, int64_t prompt, int64_t generate,
                                 int64_t batch, int64_t ubatch, const std::string& backend, bool flash_attention,
                                 const std::string& cuda_prompt, const std::optional<std::string>& dtype,
                                 const std::string& runtime, const std::optional<std::string>& tiles,
                                 const std::string& host) const {
    GenerationArgs a;
    a.text = py::str(py::isinstance<py::str>(model) ? model : py::module_::import("os").attr("fspath")(model));
    a.decoder = a.text.size() > 5 && a.text.ends_with(".onnx");
    a.o.prompt = prompt;
    a.o.generate = generate;
    a.o.batch = batch;
    auto refuse = [](const std::string& what) { raise_error(gpusim::ErrorCode::kInvalidArgument, what); };
    if (a.decoder) {
      if (weights != "F16" || ubatch != 512 || !backend.empty() || flash_attention || !cuda_prompt.empty()) {
        refuse(a.text + ": weights, ubatch, backend, flash_attention and cuda_prompt describe llama.cpp; an ONNX "
               "decoder's passes run in the graph's own types (dtype re-types them)");
      }
      a.req.dtype = float_dtype_arg(dtype, "dtype");
      a.req.runtime = runtime;
      a.req.host = host;
      a.tiles = tiles_arg(tiles, runtime);
      return a;
    }
    if (dtype || tiles) {
      refuse(a.text + ": dtype and tiles apply to an ONNX decoder; a language model's description takes weights (F16, "
             "Q8_0, Q4_0, ...), and its kernels are llama.cpp's, in their own tiles");
    }
    a.o.weights = weights;
    a.o.ubatch = ubatch;
    a.o.backend = backend;
    a.o.flash_attention = flash_attention;
    a.o.cuda_prompt = cuda_prompt;
    if (!runtime.empty()) {
      auto rt = gpusim::find_runtime(runtime, s_->runtime_dirs());
      if (!rt) raise_error(rt.error());
      a.o.runtime = std::move(*rt);
    }
    a.o.host = host;
    // Text of a description (it has a newline or starts a JSON object), else a name or a path.
    const bool is_text = a.text.find('\n') != std::string::npos || (!a.text.empty() && a.text.front() == '{');
    auto spec = is_text ? s_->llm_from_text(a.text, "model") : s_->llm(a.text);
    if (!spec) raise_error(spec.error());
    a.spec = std::move(*spec);
    return a;
  }

  // A language model's generation (llm.h).
  py::object generate(const py::object& model, const py::object& gpu, const std::string& weights, int64_t prompt,
                      int64_t generate, int64_t batch, int64_t ubatch, const std::string& backend, bool flash_attention,
                      const std::string& cuda_prompt, const std::optional<std::string>& dtype, const std::string& runtime,
                      const std::optional<std::string>& tiles, const std::string& host) const {
    live(*this);
    const gpusim::GpuProfile g = gpu_arg(*s_, gpu);
    const GenerationArgs a = generation_args(model, weights, prompt, generate, batch, ubatch, backend, flash_attention,
                                             cuda_prompt, dtype, runtime, tiles, host);
    return document([&]() -> gpusim::Result<std::string> {
      auto r = a.decoder ? s_->generate_decoder(a.text, s_->target(g, a.tiles, {}), a.o, a.req)
                         : s_->generate(*a.spec, s_->target(g, gpusim::TileSpace::kLibrary, {}), a.o);
      if (!r) return r.error();
      return gpusim::generation_json(*r);
    });
  }

  // The same generation on several GPUs: gpusim.compare-generation/1.
  py::object compare_generation(const py::object& model, const py::object& gpus, const std::string& weights, int64_t prompt,
                                int64_t generate, int64_t batch, int64_t ubatch, const std::string& backend,
                                bool flash_attention, const std::string& cuda_prompt, const std::optional<std::string>& dtype,
                                const std::string& runtime, const std::optional<std::string>& tiles,
                                const std::string& host, const py::object& prices) const {
    live(*this);
    const std::vector<std::string> ids = strings_arg(gpus, "gpus");
    // {"nvidia-rtx-4090": 1599, "nvidia-h100-sxm": "2.49/h"}: as the CLI's --price GPU=USD[/h].
    std::vector<std::string> price_texts;
    if (!prices.is_none()) {
      if (!py::isinstance<py::dict>(prices)) {
        throw py::type_error("compare_generation: prices must be a dict of GPU name to dollars (1599, to buy) or "
                             "\"USD/h\" (\"2.49/h\", to rent)");
      }
      for (const auto& [k, v] : py::cast<py::dict>(prices)) {
        if (!py::isinstance<py::str>(k) || !(py::isinstance<py::str>(v) || py::isinstance<py::float_>(v) ||
                                             (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)))) {
          throw py::type_error("compare_generation: prices must map GPU names (str) to dollars (a number, or a "
                               "string \"USD/h\"); got " + std::string(py::str(py::repr(k))) + ": " +
                               std::string(py::str(py::repr(v))));
        }
        price_texts.push_back(std::string(py::str(k)) + "=" + std::string(py::str(v)));
      }
    }
    const GenerationArgs a = generation_args(model, weights, prompt, generate, batch, ubatch, backend, flash_attention,
                                             cuda_prompt, dtype, runtime, tiles, host);
    return document([&]() -> gpusim::Result<std::string> {
      auto r = a.decoder ? s_->compare_decoder_generation(a.text, ids, a.tiles, a.o, a.req)
                         : s_->compare_generation(*a.spec, ids, a.o);
      if (!r) return r.error();
      auto priced = gpusim::gpu_prices(price_texts, *r);
      if (!priced) return priced.error();
      return gpusim::compare_generation_json(a.text.size() > 200 ? "model" : a.text, *r, *priced);
    });
  }

  py::object compare(const gpusim::Model& m, const py::object& gpus, const std::optional<std::string>& dtype,
                     const std::string& runtime, const std::optional<std::string>& tiles, bool allow_tf32,
                     const std::string& host) const {
    live(*this);
    live(m);
    const std::vector<std::string> ids = strings_arg(gpus, "gpus");
    gpusim::PredictRequest req;
    req.dtype = float_dtype_arg(dtype, "dtype");
    req.runtime = runtime;
    req.host = host;
    const gpusim::TileSpace space = tiles_arg(tiles, runtime);
    return document([&]() -> gpusim::Result<std::string> {
      auto r = s_->compare(m, ids, space, req, {allow_tf32});
      if (!r) return r.error();
      return gpusim::compare_document(m.source(), *r);
    });
  }

  // The runtimes that run the model on one GPU, ranked at each batch: gpusim.compare-runtimes/1.
  py::object compare_runtimes(const gpusim::Model& m, const py::object& gpu, const py::object& runtimes,
                              const py::object& batches, const std::optional<std::string>& dtype, bool allow_tf32,
                              const std::string& host) const {
    live(*this);
    live(m);
    const gpusim::GpuProfile g = gpu_arg(*s_, gpu);
    gpusim::RuntimeComparisonOptions ro;
    ro.runtimes = strings_arg(runtimes, "runtimes");
    std::vector<std::optional<int64_t>> sizes;
    if (batches.is_none()) {
      sizes.emplace_back(std::nullopt);
    } else {
      if (py::isinstance<py::str>(batches) || !py::isinstance<py::sequence>(batches)) {
        throw py::type_error("compare_runtimes: batches must be a list of batch sizes (ints), or None for the model's own");
      }
      for (const py::handle& b : batches) {
        if (!py::isinstance<py::int_>(b) || py::isinstance<py::bool_>(b)) {
          throw py::type_error("compare_runtimes: batches must be ints; got " + std::string(py::str(py::repr(b))));
        }
        sizes.emplace_back(b.cast<int64_t>());
      }
      if (sizes.empty() || sizes.size() > 16) {
        throw py::value_error("compare_runtimes: batches gives " + std::to_string(sizes.size()) +
                              " sizes; give 1 to 16");
      }
    }
    gpusim::PredictRequest req;
    req.dtype = float_dtype_arg(dtype, "dtype");
    req.host = host;
    return document([&]() -> gpusim::Result<std::string> {
      std::vector<gpusim::RuntimeComparison> out;
      for (const std::optional<int64_t>& b : sizes) {
        gpusim::Result<gpusim::Model> at = b ? s_->at_batch(m, *b) : gpusim::Result<gpusim::Model>(m);
        if (!at) return at.error();
        auto c = s_->compare_runtimes(*at, g, ro, req, {allow_tf32});
        if (!c) return c.error();
        out.push_back(std::move(*c));
      }
      return gpusim::runtime_comparison_document(m.source(), out);
    });
  }

  py::object plan(const gpusim::Model& m, const py::object& gpu, const std::string& scheduler, const std::string& objective,
                  int top, std::optional<int> beam_width, std::optional<int> samples, std::optional<uint64_t> seed,
                  const std::optional<std::string>& dtype, std::optional<double> memory_budget_gb,
                  const std::string& tiles, bool allow_tf32) const {
    live(*this);
    live(m);
    const gpusim::GpuProfile g = gpu_arg(*s_, gpu);
    gpusim::SearchOptions o;
    auto sk = gpusim::parse_scheduler(scheduler, "scheduler:");
    if (!sk) raise_error(sk.error().code, sk.error().message);
    o.scheduler = *sk;
    auto ob = gpusim::parse_objective(objective, "objective:");
    if (!ob) raise_error(ob.error().code, ob.error().message);
    o.objective = *ob;
    o.top_k = top;
    // A scheduler's own settings given for another one would be ignored: refused.
    std::vector<std::string> given;
    if (beam_width) given.emplace_back("beam_width");
    if (samples) given.emplace_back("samples");
    if (seed) given.emplace_back("seed");
    if (auto st = gpusim::check_scheduler_settings(o.scheduler, given); !st) raise_error(st.error().code, st.error().message);
    o.beam_width = beam_width.value_or(o.beam_width);
    o.samples = samples.value_or(o.samples);
    for (const gpusim::SearchOptionRange& r : gpusim::kSearchOptionRanges) {
      if (o.*r.field < r.lo || o.*r.field > r.hi) {
        raise_error(ErrorCode::kInvalidArgument, std::string(r.name) + ": " + std::to_string(o.*r.field) +
                                                     " is out of range; give an integer from " + std::to_string(r.lo) +
                                                     " to " + std::to_string(r.hi));
      }
    }
    o.seed = seed.value_or(o.seed);
    o.dtype = float_dtype_arg(dtype, "dtype");
    if (memory_budget_gb && !(*memory_budget_gb > 0)) {
      raise_error(ErrorCode::kInvalidArgument,
                  "memory_budget_gb: " + std::string(py::repr(py::float_(*memory_budget_gb))) + " must be a positive number");
    }
    o.memory_budget_gb = memory_budget_gb;
    const gpusim::Target target = s_->target(g, tiles_arg(tiles, ""), {allow_tf32});
    return document([&]() -> gpusim::Result<std::string> {
      auto r = s_->plan(m, target, o);
      if (!r) return r.error();
      return gpusim::plan_search_document(m.source(), m.graph(), g, o, *r);
    });
  }

  py::object profiles() const {
    live(*this);
    return document([&]() -> gpusim::Result<std::string> { return gpusim::profile_list_document(s_->profiles()); })
        .attr("__getitem__")("profiles");
  }

  gpusim::Program compile(const gpusim::Model& m, const std::string& backend, int device, const py::object& plan,
                          const py::object& gpu, const std::string& dtype, uint64_t seed, bool allow_tf32,
                          const std::string& matrix_path) const {
    live(*this);
    live(m);
    gpusim::CompileOptions o;
    o.backend = backend;
    o.device = device;
    o.plan = plan_arg(*s_, m, plan);
    if (!gpu.is_none()) o.gpu = gpu_arg(*s_, gpu);
    auto d = gpusim::float_dtype_from_name(dtype);
    if (!d || *d == DType::kBFloat16) {
      raise_error(ErrorCode::kInvalidArgument, "dtype: \"" + dtype + "\" is not a type the kernels store; expected \"fp32\" or \"fp16\"");
    }
    o.dtype = *d;
    o.seed = seed;
    o.allow_tf32 = allow_tf32;
    o.matrix_path = matrix_path;
    gpusim::Result<gpusim::Program> r = [&] {
      py::gil_scoped_release nogil;
      return s_->compile(m, o);
    }();
    return take(std::move(r));
  }

  py::object record(const std::string& store, const py::object& runs, const std::string& command) const {
    live(*this);
    const std::vector<gpusim::Measurement> recs = run_records(runs);
    gpusim::Result<gpusim::InsertStats> st = [&] {
      py::gil_scoped_release nogil;
      return s_->record(store, recs, command);
    }();
    const auto stats = take(std::move(st));
    return py::dict("added"_a = stats.added, "duplicates"_a = stats.duplicates);
  }

  py::object validate(const py::object& truth, const py::object& runs, const py::object& gpus, const std::string& runtime,
                      const std::map<std::string, std::string>& profile_for) const {
    live(*this);
    gpusim::ValidateOptions o;
    o.gpus = strings_arg(gpus, "gpus");
    o.runtime = runtime;
    o.profile_for = profile_for;
    if (truth.is_none() == runs.is_none()) {
      raise_error(ErrorCode::kInvalidArgument, "validate: give either truth (a measurement file, directory or store) or "
                                               "runs (gpusim.run/1 documents), not both or neither");
    }
    if (!truth.is_none()) {
      const std::string path = py::str(py::module_::import("os").attr("fspath")(truth));
      return document([&]() -> gpusim::Result<std::string> {
        auto v = s_->validate(path, o);
        if (!v) return v.error();
        return gpusim::validation_document(v->report, v->records, "datasheet", path, runtime);
      });
    }
    const std::vector<gpusim::Measurement> recs = run_records(runs);
    o.profile_dirs = s_->profile_dirs();
    return document([&]() -> gpusim::Result<std::string> {
      auto rep = gpusim::validate(recs, o);
      if (!rep) return rep.error();
      return gpusim::validation_document(*rep, recs, "datasheet", "runs", runtime);
    });
  }

 private:
  std::unique_ptr<gpusim::Session> s_;
};

py::dict program_run(gpusim::Program& p, const py::object& inputs) {
  live(p);
  const std::vector<py::array> in = input_arrays(p.inputs(), inputs);
  const std::vector<gpusim::ConstTensorView> views = views_of(in);
  std::vector<py::array> outs;
  std::vector<gpusim::TensorView> out_views;
  for (const gpusim::TensorSpec& o : p.outputs()) {
    auto np = numpy_name(o.dtype);
    if (!np) {
      raise_error(ErrorCode::kUnsupported, "run: output \"" + o.name + "\" is " + std::string(gpusim::dtype_name(o.dtype)) +
                                               ", which NumPy has no type for");
    }
    py::array a = new_array(*np, o.shape);
    out_views.push_back({o.dtype, o.shape, a.mutable_data(), nbytes_of(a)});
    outs.push_back(std::move(a));
  }
  gpusim::Status st = [&] {
    py::gil_scoped_release nogil;
    return p.run(views, out_views);
  }();
  if (!st) raise_error(st.error());
  py::dict result;
  for (size_t k = 0; k < outs.size(); ++k) result[py::str(p.outputs()[k].name)] = outs[k];
  return result;
}

py::object program_time(gpusim::Program& p, const py::object& inputs, int repeat, bool check) {
  live(p);
  const std::vector<py::array> in = input_arrays(p.inputs(), inputs);
  const std::vector<gpusim::ConstTensorView> views = views_of(in);
  return document([&]() -> gpusim::Result<std::string> {
    gpusim::TimingOptions to;
    to.repeat = repeat;
    to.check = check;
    auto r = p.time(views, to);
    if (!r) return r.error();
    return gpusim::run_document(*r);
  });
}

// store: None is the default tuning store (TuneOptions::store "", default_tuning_store():
// $GPUSIM_TUNING_DB, else the user's cache), as `gpusim tune` without --store; "off" keeps nothing;
// anything else is a path (str or os.PathLike).
py::object program_tune(gpusim::Program& p, int top_k, double budget_s, const py::object& store, bool use_cache) {
  live(p);
  gpusim::TuneOptions o;
  o.top_k = top_k;
  o.budget_s = budget_s;
  if (!store.is_none()) o.store = py::str(py::module_::import("os").attr("fspath")(store));
  o.use_cache = use_cache;
  o.command = "gpusim python Program.tune";
  return document([&]() -> gpusim::Result<std::string> {
    auto r = p.tune(o);
    if (!r) return r.error();
    return gpusim::tune_document(*r, nullptr);
  });
}

py::object program_plan(const gpusim::Program& p) {
  live(p);
  std::string doc;
  {
    py::gil_scoped_release nogil;  // plan_document() waits for a tune() running in another thread
    doc = p.plan_document();
  }
  return loads(doc);
}

}  // namespace

PYBIND11_MODULE(_gpusim, m) {
  m.doc() = "gpusim's C++ library (the Session API); import it as `gpusim`.";
  m.def("version", &gpusim::version, "The library's version, e.g. \"0.1.0\".");
  m.def(
      "content_hash", [](const py::bytes& b) { return gpusim::content_hash(std::string(b)); }, "data"_a,
      "The id of a model's bytes (32 hex digits): Model.content_hash, the service's model_id.");
  m.def(
      "read_tensor",
      [](const py::object& path) {
        const std::string p = py::str(py::module_::import("os").attr("fspath")(path));
        gpusim::Result<gpusim::HostBuffer> r = [&] {
          py::gil_scoped_release nogil;
          return gpusim::read_tensor_buffer(p);
        }();
        gpusim::HostBuffer b = take(std::move(r));
        auto np = numpy_name(b.dtype);
        if (!np) {
          raise_error(ErrorCode::kUnsupported,
                      p + ": a " + std::string(gpusim::dtype_name(b.dtype)) + " tensor, which NumPy has no type for");
        }
        py::array a = new_array(*np, b.shape);
        if (nbytes_of(a) != b.bytes.size()) {
          raise_error(ErrorCode::kParse, p + ": " + std::to_string(b.bytes.size()) + " bytes of data for a " +
                                             std::to_string(nbytes_of(a)) + "-byte tensor");
        }
        if (!b.bytes.empty()) std::memcpy(a.mutable_data(), b.bytes.data(), b.bytes.size());
        return a;
      },
      "path"_a,
      "A serialized ONNX TensorProto (.pb, as the ONNX test data keeps inputs and outputs) as a numpy.ndarray.");
  m.def(
      "data_dir",
      []() -> py::object {
        auto d = gpusim::installed_data_dir();
        return d ? py::object(py::str(*d)) : py::object(py::none());
      },
      "The installed data directory (share/gpusim: gpu_profiles/, runtimes/) this package found, or None.");

  // The GPU Dojo's generator, for gpusim.dojo (apps/python/gpusim/dojo): a configuration travels as JSON
  // (dojo.h: config_from_json), so a Ray worker needs nothing but the text.
  m.def(
      "dojo_columns",
      []() {
        auto cols = [](const std::vector<gpusim::dojo::Column>& v) {
          py::list l;
          for (const auto& c : v) l.append(py::dict("name"_a = c.name, "type"_a = c.type, "unit"_a = c.unit, "doc"_a = c.doc));
          return l;
        };
        return py::dict("kernels"_a = cols(gpusim::dojo::kernel_columns()), "plans"_a = cols(gpusim::dojo::plan_columns()));
      },
      "The kernel and plan tables' columns: name, type (int, float, string, bool), unit, meaning.");
  auto dojo_tasks = [](const std::string& config, const std::vector<std::string>& profiles) {
    gpusim::Result<gpusim::dojo::Tasks> t = [&]() -> gpusim::Result<gpusim::dojo::Tasks> {
      py::gil_scoped_release nogil;
      auto c = gpusim::dojo::config_from_json(config);
      if (!c) return c.error();
      return gpusim::dojo::expand(*c, gpusim::Session({profiles, {}}).profile_dirs());
    }();
    return take(std::move(t));
  };
  m.def(
      "dojo_count_tasks",
      [dojo_tasks](const std::string& config, const std::vector<std::string>& profiles) {
        return dojo_tasks(config, profiles).tasks.size();
      },
      "config"_a, "profiles"_a = std::vector<std::string>{},
      "Expands a Dojo configuration (JSON) and returns its number of tasks; writes nothing.");
  m.def(
      "dojo_write_manifest",
      [dojo_tasks](const std::string& config, int shards, const std::string& out, const std::vector<std::string>& profiles,
                   bool force) {
        gpusim::dojo::Tasks t = dojo_tasks(config, profiles);
        if (auto s = gpusim::dojo::write_manifest(t, shards, out, force); !s) raise_error(s.error());
        return py::dict("tasks"_a = t.tasks.size(), "graphs"_a = t.graphs.size(), "gpus"_a = t.gpus.size(),
                        "constraints"_a = t.constraints.size(), "notes"_a = t.notes);
      },
      "config"_a, "shards"_a, "out"_a, "profiles"_a = std::vector<std::string>{}, "force"_a = false,
      "Expands a Dojo configuration (JSON) and writes OUT/dojo.json; returns the counts. OUT holding a dataset of\n"
      "another configuration or shard count is an error naming what differs, unless force (which removes it).");
  m.def(
      "dojo_shard_problem",
      [](const std::string& out, int index, int count, const std::string& ext) {
        return gpusim::dojo::shard_problem(out, {index, count}, ext);
      },
      "out"_a, "index"_a, "count"_a, "ext"_a,
      "Why shard INDEX of COUNT in OUT is not complete (its record, or a file's size or hash), or \"\" when it is.");
  m.def(
      "dojo_write_shard_record",
      [](const std::string& out, int index, int count, const std::vector<std::string>& files, int64_t tasks, int64_t plans,
         int64_t kernel_rows) {
        gpusim::dojo::ShardResult r;
        r.index = index;
        r.count = count;
        r.tasks = tasks;
        r.plans = plans;
        r.kernel_rows = kernel_rows;
        if (auto s = gpusim::dojo::write_shard_record(out, r, files); !s) raise_error(s.error());
      },
      "out"_a, "index"_a, "count"_a, "files"_a, "tasks"_a, "plans"_a, "kernel_rows"_a,
      "Records shard INDEX of COUNT as complete: FILES (the kernels file, then the plans file, names in OUT) with\n"
      "their sizes and hashes.");
  m.def(
      "dojo_finish",
      [](const std::string& out) {
        gpusim::Result<int> r = [&] {
          py::gil_scoped_release nogil;
          return gpusim::dojo::finish(out);
        }();
        return take(std::move(r));
      },
      "out"_a,
      "Lists every complete shard's files (size, hash, rows) in OUT/dojo.json and writes OUT/DATASET.md from it;\n"
      "returns the number of complete shards.");
  m.def(
      "dojo_generate_shard",
      [dojo_tasks](const std::string& config, int index, int count, const std::string& out,
                   const std::vector<std::string>& profiles) {
        gpusim::dojo::Tasks t = dojo_tasks(config, profiles);
        gpusim::Result<gpusim::dojo::ShardResult> r = [&] {
          py::gil_scoped_release nogil;
          return gpusim::dojo::generate_shard(t, {index, count}, out, gpusim::Session::target_maker());
        }();
        const gpusim::dojo::ShardResult s = take(std::move(r));
        return py::dict("index"_a = s.index, "count"_a = s.count, "skipped"_a = s.skipped, "redone"_a = s.redone, "tasks"_a = s.tasks,
                        "plans"_a = s.plans, "kernel_rows"_a = s.kernel_rows, "seconds"_a = s.seconds,
                        "kernels_file"_a = s.kernels_file, "plans_file"_a = s.plans_file);
      },
      "config"_a, "index"_a, "count"_a, "out"_a, "profiles"_a = std::vector<std::string>{},
      "Generates shard INDEX of COUNT of a Dojo configuration (JSON) into OUT (CSV or NDJSON, as the config says); "
      "a complete shard is skipped.");

  // Every method and property below passes its object through live() first (see there).
  py::class_<gpusim::Model>(m, "Model",
                            "An imported ONNX graph (shapes inferred, weights not kept). Immutable; open one with "
                            "Session.open_model().")
      .def_property_readonly(
          "source", [](const gpusim::Model& mo) { return live(mo).source(); }, "The path, or the name given with the bytes.")
      .def_property_readonly(
          "content_hash", [](const gpusim::Model& mo) { return live(mo).content_hash(); },
          "Hex digest of the model's bytes (the same file or bytes give the same id).")
      .def_property_readonly(
          "size_bytes", [](const gpusim::Model& mo) { return live(mo).size_bytes(); }, "The size of the ONNX file in bytes.")
      .def_property_readonly(
          "inputs", [](const gpusim::Model& mo) {
            live(mo);
            return tensor_list(mo.graph(), mo.graph().inputs);
          },
          "The graph's inputs: a list of {\"name\", \"dtype\", \"shape\"} with every dim resolved.")
      .def_property_readonly(
          "outputs", [](const gpusim::Model& mo) {
            live(mo);
            return tensor_list(mo.graph(), mo.graph().outputs);
          },
          "The graph's outputs: a list of {\"name\", \"dtype\", \"shape\"}.")
      .def_property_readonly(
          "num_nodes", [](const gpusim::Model& mo) { return live(mo).graph().nodes.size(); }, "The number of ops in the graph.")
      .def("__repr__", [](const gpusim::Model& mo) {
        live(mo);  // a statement of its own: the operands of + are unsequenced
        return "<gpusim.Model " + mo.source() + ": " + std::to_string(mo.graph().nodes.size()) + " nodes>";
      });

  py::class_<gpusim::GpuProfile>(m, "Gpu",
                                 "A GPU profile (datasheet figures, plus a calibrated block when measured). Get one "
                                 "with Session.gpu() or Session.gpu_from_yaml().")
      .def_property_readonly(
          "name", [](const gpusim::GpuProfile& g) { return live(g).name; }, "The profile id, e.g. \"nvidia-rtx-3060\".")
      .def_property_readonly(
          "display_name", [](const gpusim::GpuProfile& g) { return live(g).display_name; },
          "The product name, e.g. \"NVIDIA GeForce RTX 3060\".")
      .def_property_readonly(
          "vendor", [](const gpusim::GpuProfile& g) { return live(g).vendor; }, "\"nvidia\", \"amd\", ...")
      .def(
          "document", [](const gpusim::GpuProfile& g) { return loads(gpusim::profile_document(live(g))); },
          "Every figure of the profile, with where each efficiency factor comes from: the gpusim.profile/1 "
          "document (`gpusim profiles show NAME --json`).")
      .def("__repr__", [](const gpusim::GpuProfile& g) {
        live(g);
        return "<gpusim.Gpu " + g.name + ">";
      });

  py::class_<gpusim::Program>(m, "Program",
                              "A plan compiled for one backend and device (Session.compile()). Calls on one Program "
                              "are serialized; use one per thread for parallel runs.")
      .def_property_readonly(
          "inputs", [](const gpusim::Program& p) { return spec_list(live(p).inputs()); },
          "The inputs run() takes, in order: a list of {\"name\", \"dtype\", \"shape\", \"size_bytes\"}.")
      .def_property_readonly(
          "outputs", [](const gpusim::Program& p) { return spec_list(live(p).outputs()); },
          "The outputs run() returns, in order: a list of {\"name\", \"dtype\", \"shape\", \"size_bytes\"}.")
      .def_property_readonly(
          "plan", &program_plan,
          "The plan this Program runs, as the gpusim.plan/1 document (`gpusim plan --out`, `gpusim tune --out`)\n"
          "in a dict: after tune() the tuned plan. It goes back in as Session.predict(plan=...) and\n"
          "Session.compile(plan=...) take it, or saved as JSON for `gpusim run --plan`.")
      .def("run", &program_run, "inputs"_a = py::none(),
           "Runs the plan once and returns {output name: numpy.ndarray}.\n\n"
           "inputs: a list of arrays in graph-input order, or a dict by input name; inputs not given (the\n"
           "last ones) are drawn from the compile seed. Arrays keep their dtype, which must be the input's;\n"
           "lists and scalars are converted to it. Raises gpusim.Error naming the input, the value given and\n"
           "what the model takes.")
      .def("time", &program_time, "inputs"_a = py::none(), "repeat"_a = 3, "check"_a = false,
           "The timing harness: one warm-up, then `repeat` timed runs, each kernel timed with the device's\n"
           "timers and predicted beside when a profile is known; check=True compares every output with the\n"
           "CPU reference. Returns the gpusim.run/1 document (`gpusim run --json`) as a dict, which\n"
           "Session.record() stores and Session.validate(runs=...) scores.")
      .def("tune", &program_tune, "top_k"_a = 8, "budget_s"_a = 0.0, "store"_a = py::none(), "use_cache"_a = true,
           "Autotunes the plan on the device (as `gpusim tune`, with the same defaults): per kernel the\n"
           "simulator's top_k tiles are timed alone and the measured best kept; later run() and time() calls,\n"
           "and Program.plan, use the tuned plan. budget_s: stop measuring after this many seconds (0: no\n"
           "limit). store: the measurement store holding the tuning cache: None (the default) is `gpusim\n"
           "tune`'s default store, $GPUSIM_TUNING_DB, else $XDG_CACHE_HOME/gpusim/tuning.db, else\n"
           "~/.cache/gpusim/tuning.db; a path (str or os.PathLike) another store; \"off\" keeps nothing.\n"
           "use_cache=False measures even kernels the cache holds (as --no-cache). Returns the gpusim.tune/1\n"
           "document (`gpusim tune --json`) as a dict, with the simulator's report card.");

  py::class_<PySession>(m, "Session",
                        "gpusim's whole pipeline: open models, choose GPUs, predict, compare, search plans, compile "
                        "and run them, and record measurements. Thread-safe: many Python threads may call one "
                        "Session at once (the GIL is released while it works).\n\n"
                        "profile_dirs: directories searched for GPU profiles first (like --profiles), before\n"
                        "$GPUSIM_PROFILE_PATH, ~/.config/gpusim/profiles and the installed profiles.\n"
                        "runtime_dirs: directories searched first for runtime models (runtimes/*.yaml).")
      .def(py::init<const py::object&, const py::object&>(), "profile_dirs"_a = py::none(), "runtime_dirs"_a = py::none())
      .def_property_readonly(
          "profile_dirs", [](const PySession& s) { return live(s).s().profile_dirs(); },
          "The directories GPU profiles are searched in, in order.")
      .def("open_model", &PySession::open_model, "model"_a, "dims"_a = py::none(), "name"_a = "",
           "Imports an ONNX model without its weights and infers every shape.\n\n"
           "model: a path, or the file's bytes (then `name` stands for the file in messages).\n"
           "dims: symbolic input dims, {\"batch\": 8} or [\"batch=8\", \"input_ids:1=128\"] (like --dim).")
      .def(
          "gpu", [](const PySession& s, const py::object& id) { return gpu_arg(live(s).s(), id); }, "id_or_path"_a,
          "A GPU profile by id (see profiles()), or a path to a profile YAML (a calibrated one too).")
      .def(
          "gpu_from_yaml",
          [](const PySession& s, const std::string& text, const std::string& source) {
            live(s);
            gpusim::Result<gpusim::GpuProfile> r = [&] {
              py::gil_scoped_release nogil;
              return s.s().gpu_from_yaml(text, source);
            }();
            return take(std::move(r));
          },
          "yaml_text"_a, "source"_a = "profile",
          "A GPU profile from YAML text; `extends:` resolves against the session's profile directories.")
      .def("profiles", &PySession::profiles,
           "Every profile found: a list of dicts, each with its figures or the reason it does not load.")
      .def("predict", &PySession::predict, "model"_a, "gpu"_a, "dtype"_a = py::none(), "runtime"_a = "",
           "plan"_a = py::none(), "tiles"_a = py::none(), "allow_tf32"_a = false, "host"_a = "",
           "Predicts the model on a GPU and returns the gpusim.predict/1 document (`gpusim predict --json`).\n\n"
           "gpu: a Gpu, a profile id or a profile path. dtype: \"fp32\", \"fp16\" or \"bf16\" re-types the\n"
           "graph's floats. runtime: \"\" (gpusim's executor), \"cuda-graph\", \"pytorch-eager\" or a runtime\n"
           "YAML. plan: score this plan instead of the eager one: a gpusim.plan/1 dict (from plan()'s\n"
           "[\"plans\"][i][\"plan\"]), its JSON text, or a path to a plan file. tiles: the tile space,\n"
           "\"generated\" (the kernels gpusim's code generator builds) or \"library\" (the cost model's whole\n"
           "menu, as vendor libraries run kernels); None: generated for gpusim's runtimes, library for a\n"
           "framework's. allow_tf32: fp32 GEMMs and convolutions on the matrix units as TF32 where the GPU\n"
           "has them (torch.backends.cuda.matmul.allow_tf32; off by default, as there). host: the host that\n"
           "drives the GPU, scaling a framework runtime's per-call host time: a host profile (\"windows\",\n"
           "\"linux-ryzen9-9950x\"; gpusim profiles hosts lists them), a YAML path, or key=value pairs\n"
           "(\"os=windows,single_thread=2200\": Geekbench 6 single-core); \"\": the reference Linux hosts.")
      .def("generate", &PySession::generate, "model"_a, "gpu"_a, "weights"_a = "F16", "prompt"_a = 512,
           "generate"_a = 128, "batch"_a = 1, "ubatch"_a = 512, "backend"_a = "", "flash_attention"_a = false,
           "cuda_prompt"_a = "", "dtype"_a = py::none(), "runtime"_a = "", "tiles"_a = py::none(), "host"_a = "",
           "Predicts a language model's generation and returns the gpusim.generation/1 document (`gpusim predict\n"
           "LLM.yaml --json`): time to first token, per-token latency, tokens/s and bound of each phase, memory.\n\n"
           "model: a bundled description's name (\"llama-2-7b\"), a path to a gpusim.llm/1 YAML or a config.json,\n"
           "or the text of one; or a path to an ONNX decoder with a KV cache (past_key_values inputs), priced\n"
           "pass by pass as predict prices the graph. prompt, generate: tokens. batch: sequences. runtime: what\n"
           "launches the kernels (a description: a llama.cpp runtime, default its backend's; a decoder: gpusim,\n"
           "cuda-graph, pytorch-eager, ...). A description only: weights, a llama.cpp file type (F16, Q8_0, Q4_0,\n"
           "Q4_K_M, ...); ubatch, rows a prompt pass takes; backend, cuda, hip, metal or vulkan (\"\": the GPU\n"
           "vendor's); flash_attention, llama.cpp's -fa 1; cuda_prompt, mmq or cublas (\"\": as llama.cpp picks).\n"
           "An ONNX decoder only: dtype (re-type the float tensors) and tiles (generated or library; None: the\n"
           "runtime's). host: as predict() takes it (llama.cpp's gaps are device time: a host changes nothing,\n"
           "and the notes say so).")
      .def("compare_generation", &PySession::compare_generation, "model"_a, "gpus"_a, "weights"_a = "F16",
           "prompt"_a = 512, "generate"_a = 128, "batch"_a = 1, "ubatch"_a = 512, "backend"_a = "",
           "flash_attention"_a = false, "cuda_prompt"_a = "", "dtype"_a = py::none(), "runtime"_a = "",
           "tiles"_a = py::none(), "host"_a = "", "prices"_a = py::none(),
           "The generation of generate() on several GPUs (profile ids), side by side: the\n"
           "gpusim.compare-generation/1 document (`gpusim compare LLM --gpus ... --json`), a row per GPU with\n"
           "time to first token, per-token latency, tokens/s, speed-up over the first, each phase's bound, memory,\n"
           "energy and joules a token. prices: {gpu: dollars to buy, or \"USD/h\" to rent} adds each priced row's\n"
           "value (decode tokens/s per $1000, or tokens a dollar and dollars a million tokens).")
      .def("compare", &PySession::compare, "model"_a, "gpus"_a, "dtype"_a = py::none(), "runtime"_a = "",
           "tiles"_a = py::none(), "allow_tf32"_a = false, "host"_a = "",
           "Predicts the model on several GPUs (profile ids) and returns the gpusim.compare/1 document.\n"
           "Every id is checked before any is predicted. tiles, allow_tf32, host: as predict() takes them.")
      .def("compare_runtimes", &PySession::compare_runtimes, "model"_a, "gpu"_a, "runtimes"_a = "all",
           "batches"_a = py::none(), "dtype"_a = py::none(), "allow_tf32"_a = false, "host"_a = "",
           "Ranks the runtimes that run the model on one GPU and returns the gpusim.compare-runtimes/1 document\n"
           "(`gpusim compare MODEL --gpu G --runtimes ... --json`): per batch, each runtime's latency, items/s,\n"
           "kernels, GPU and launch-wait time, peak memory, what bounds it and why, fastest first, with a verdict.\n\n"
           "runtimes: names (pytorch-eager, torch-compile, torch-compile-reduce-overhead, torch-compile-max-autotune,\n"
           "cuda-graph, tensorrt, onnxruntime-cuda, gpusim, gpusim-plan), a list or one comma-separated string, or\n"
           "\"all\" (every runtime that runs graphs; the others are listed under \"skipped\"). batches: batch sizes\n"
           "(every input's leading axis), or None for the model's own. dtype, allow_tf32, host: as predict() takes them.")
      .def("plan", &PySession::plan, "model"_a, "gpu"_a, "scheduler"_a = "greedy", "objective"_a = "latency",
           "top"_a = 3, "beam_width"_a = py::none(), "samples"_a = py::none(), "seed"_a = py::none(), "dtype"_a = py::none(),
           "memory_budget_gb"_a = py::none(), "tiles"_a = "generated", "allow_tf32"_a = false,
           "Searches fusion and tiling plans and returns the gpusim.plan-search/1 document: the ranked\n"
           "plans, each with its gpusim.plan/1 document under [\"plan\"].\n\n"
           "scheduler: eager, greedy, beam, random or split. objective: latency, throughput, energy or\n"
           "memory. top: plans kept (1-100). beam_width (beam only, 1-256, default 8), samples (random only,\n"
           "1-100000, default 64), seed (random only, default 1): given for another scheduler, refused.\n"
           "memory_budget_gb: default the GPU's memory. tiles: the tile space ranked, \"generated\" (the\n"
           "kernels gpusim's code generator builds, so the plan runs as priced) or \"library\".\n"
           "allow_tf32: as predict() takes it.")
      .def("compile", &PySession::compile, "model"_a, "backend"_a = "cpu", "device"_a = 0, "plan"_a = py::none(),
           "gpu"_a = py::none(), "dtype"_a = "fp32", "seed"_a = 1, "allow_tf32"_a = false, "matrix_path"_a = "",
           "Compiles a plan for a backend and returns a Program.\n\n"
           "backend: cpu (the reference), vulkan, cuda or hip; device: its index. plan: as predict() takes\n"
           "it; None runs the eager plan with tiles chosen for `gpu` (or the profile matching the device).\n"
           "dtype: \"fp32\" or \"fp16\", the float type the kernels store. seed: weights a shape-only model\n"
           "lacks, and inputs not given. allow_tf32: fp32 GEMMs and convolutions as TF32 where the device's\n"
           "matrix path has them. matrix_path: \"\" (the device's own), \"none\" or \"portable\" (the matrix\n"
           "kernels computed by each warp's threads, on any device).")
      .def("record", &PySession::record, "store"_a, "runs"_a, "command"_a = "gpusim python",
           "Adds the measurements of timed runs (gpusim.run/1 dicts from Program.time(), or their JSON) to\n"
           "the SQLite store at `store` (created when absent). Returns {\"added\", \"duplicates\"}.")
      .def("validate", &PySession::validate, "truth"_a = py::none(), "runs"_a = py::none(), "gpus"_a = py::none(),
           "runtime"_a = "", "profile_for"_a = std::map<std::string, std::string>{},
           "The simulator's report card (the gpusim.validate/1 document) against measurements: `truth`, a\n"
           "NeuSight CSV, run JSON, a store or a directory of them, or `runs`, gpusim.run/1 dicts.\n"
           "gpus: keep these GPUs only. runtime: override every record's runtime. profile_for: the profile\n"
           "for a device name no profile's display_name matches ({\"llvmpipe (LLVM 15.0.6, 256 bits)\": \"lavapipe\"}).");
}
