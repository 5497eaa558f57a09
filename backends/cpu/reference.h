// The CPU reference: runs a Graph op by op on the host, the numerical oracle every other backend
// is checked against. Floating-point data is held and computed in double (fp64 accumulation
// everywhere), integers and bool in int64, strings as strings; ONNX sequences as lists.
// Output shapes and types come from the importer's inference; kernels only compute values.
//
// Usage:
//   auto w = gpusim::read_model_tensors("model.onnx");
//   gpusim::cpu::RunOptions opts;  opts.weights = &*w;
//   auto out = gpusim::cpu::run_reference(graph, {input}, opts);   // one HostTensor per output
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/result.h"
#include "gpusim/tensor_data.h"

namespace gpusim::cpu {

// A std::vector whose operator[] checks the index and throws std::out_of_range: a kernel that
// reads past a tensor because an input's values or attributes do not fit (an index, a length, an
// axis) becomes an error naming the node (run_node catches it), never a read of other memory. The
// reference is the oracle, not the fast path: the check costs a compare per element.
template <typename T>
class CheckedVector : public std::vector<T> {
 public:
  using std::vector<T>::vector;
  CheckedVector() = default;
  CheckedVector(const std::vector<T>& v) : std::vector<T>(v) {}  // NOLINT: a plain vector converts
  CheckedVector(std::vector<T>&& v) : std::vector<T>(std::move(v)) {}  // NOLINT
  T& operator[](size_t k) { return this->at(k); }
  const T& operator[](size_t k) const { return this->at(k); }
};

struct HostTensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  CheckedVector<double> r;        // floating types
  CheckedVector<int64_t> i;       // integer types and bool
  CheckedVector<std::string> s;   // strings
  bool is_sequence = false;
  std::vector<HostTensor> seq;    // sequence elements

  int64_t elements() const { return shape_elements(shape).value_or(0); }
  bool is_real() const { return dtype_is_float(dtype); }
  bool is_string() const { return dtype == DType::kString; }
  // Element k as a double / an int64, whatever the storage.
  double real(int64_t k) const { return is_real() ? r[static_cast<size_t>(k)] : static_cast<double>(i[static_cast<size_t>(k)]); }
  int64_t integer(int64_t k) const { return is_real() ? static_cast<int64_t>(r[static_cast<size_t>(k)]) : i[static_cast<size_t>(k)]; }
  // Sizes the storage for dtype/shape (zeros).
  void allocate();
};

HostTensor from_data(const TensorData& d);
HostTensor from_value(const Value& v);
// The caller's packed bytes (v.dtype) as host values of type `as` (a float type, given for another
// float type, converts; integers and bool likewise); an error naming `where` when the bytes do not
// hold v.shape's elements or the kinds differ.
Result<HostTensor> from_view(const ConstTensorView& v, DType as, const std::string& where);
// Whether the caller's buffer `v` can feed a tensor of `dtype` and `shape`: the shape matches, a
// float buffer feeds a float tensor (any float type: the values convert) and anything else must
// match, the type fits a buffer, and the bytes hold the elements. Errors begin with `where`.
Status check_view(const ConstTensorView& v, DType dtype, const Shape& shape, const std::string& where);
// Host values as packed little-endian bytes of their dtype (no bytes for strings and sequences).
HostBuffer to_buffer(const HostTensor& t);

// What a kernel sees: the node, its inputs (nullptr where omitted) and its outputs, already
// typed and shaped by the importer (data empty: the kernel fills it, allocate() helps).
struct KernelArgs {
  const Graph& graph;
  const Node& node;
  std::vector<const HostTensor*> in;
  std::vector<HostTensor*> out;  // nullptr for omitted outputs

  bool has(size_t k) const { return k < in.size() && in[k] != nullptr; }
  int64_t attr_i(const std::string& key, int64_t def) const;
  double attr_f(const std::string& key, double def) const;
  std::string attr_s(const std::string& key, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::vector<double> attr_floats(const std::string& key) const;
  Error fail(const std::string& msg) const;
};

// Input `idx` as `n` values, one per row, column or channel (`line` names which): a scalar
// repeated, or n values; all zero when the input is omitted. A zero point's or a scale's (`what`)
// other shape is an error naming it.
Result<std::vector<double>> per_line(const KernelArgs& a, size_t idx, int64_t n, const char* what, const char* line);

using Kernel = Status (*)(KernelArgs&);

// "op" or "domain:op" -> kernel. Families register from their own files.
const std::map<std::string, Kernel>& kernels();
void register_elementwise(std::map<std::string, Kernel>& k);
void register_reduction_normalization(std::map<std::string, Kernel>& k);
void register_gemm_conv(std::map<std::string, Kernel>& k);
void register_data_movement(std::map<std::string, Kernel>& k);
void register_quantization(std::map<std::string, Kernel>& k);

struct RunOptions {
  const std::map<std::string, TensorData>* weights = nullptr;  // by tensor name
  uint64_t seed = 1;  // fills weights and inputs the caller does not give
  // Host memory the reference may hold at once (its live tensors, in fp64 or int64: each value is
  // freed after its last reader): a graph that needs more is refused before anything runs, naming
  // its largest tensors. 0: half the
  // machine's physical memory.
  int64_t max_host_bytes = 0;
  // Called before each node run_reference computes (done of total nodes), for a progress line;
  // keep it cheap.
  std::function<void(int done, int total)> progress;
};

// 1.2 GB, 16.8 MB: sizes in messages, in decimal units.
std::string size_text(double bytes);

// The host memory a run may hold: RunOptions::max_host_bytes, else half the machine's physical memory.
int64_t host_memory_limit(const RunOptions& opts);

struct RunResult {
  std::vector<HostTensor> outputs;  // graph outputs, in order
  std::vector<double> node_us;      // wall time of each node (Graph::nodes order)
  std::vector<std::string> notes;   // e.g. which weights were filled from the seed
};

// Host values of every tensor, for running a graph node by node (the executor runs folded nodes
// and host fallbacks this way; run_reference runs all of them).
struct HostState {
  std::vector<HostTensor> vals;  // per TensorId
  std::vector<bool> ready;
  std::vector<std::string> notes;
};
// What a caller keeps in its own buffers instead of the state holding fp64 copies (the executor
// uploads them as they are and decodes one only for a host node that reads it): the first `inputs`
// graph inputs (then `inputs` given to initial_state is empty), and with `file_weights` every weight
// whose data is in RunOptions::weights. They are left not ready; seeded values are the same either way.
struct Held {
  size_t inputs = 0;
  bool file_weights = false;
};
// Weights (file, IR constants, or seeded) and inputs (given, or seeded) ready, less what is held;
// nothing else.
Result<HostState> initial_state(const Graph& g, const std::vector<HostTensor>& inputs, const RunOptions& opts,
                                Held held = {});
// Runs node `ni`; its inputs must be ready. Marks its outputs ready.
Status run_node(const Graph& g, size_t ni, HostState& st, const RunOptions& opts);

// Runs every node; inputs in graph-input order (missing ones are filled from the seed).
Result<RunResult> run_reference(const Graph& g, const std::vector<HostTensor>& inputs, const RunOptions& opts = {});

}  // namespace gpusim::cpu
