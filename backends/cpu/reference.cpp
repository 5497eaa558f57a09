#include "reference.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

#include <chrono>
#include <cmath>
#include <random>

#include "raw_decode.h"

namespace gpusim::cpu {

void HostTensor::allocate() {
  const auto n = static_cast<size_t>(elements());
  r.clear();
  i.clear();
  s.clear();
  if (dtype == DType::kString) {
    s.assign(n, std::string());
  } else if (dtype_is_float(dtype)) {
    r.assign(n, 0.0);
  } else {
    i.assign(n, 0);
  }
}

Result<HostTensor> from_view(const ConstTensorView& v, DType as, const std::string& where) {
  HostTensor t;
  t.dtype = as;
  t.shape = v.shape;
  const int64_t n = shape_elements(v.shape).value_or(0);
  std::vector<double> reals;
  std::vector<int64_t> ints;
  if (dtype_is_float(v.dtype) != dtype_is_float(as)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {} values cannot feed a {} tensor", where,
                                                               dtype_name(v.dtype), dtype_name(as)));
  }
  if ((v.data == nullptr && n > 0) || !detail::decode_raw(v.data, v.size_bytes, v.dtype, n, reals, ints)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes do not hold {} elements of {}", where,
                                                               v.data ? v.size_bytes : 0, n, dtype_name(v.dtype)));
  }
  t.r = std::move(reals);
  t.i = std::move(ints);
  return t;
}

Status check_view(const ConstTensorView& v, DType dtype, const Shape& shape, const std::string& where) {
  if (v.dtype != dtype && !(dtype_is_float(v.dtype) && dtype_is_float(dtype))) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: dtype {} given, the model takes {}", where,
                                                               dtype_name(v.dtype), dtype_name(dtype)));
  }
  if (v.shape != shape) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: shape {} given, the model takes {} (set symbolic "
                                                               "dims with ModelOptions::dims)",
                                                               where, shape_str(v.shape), shape_str(shape)));
  }
  if (!buffer_dtype(v.dtype)) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: dtype {} cannot be passed as a buffer", where,
                                                           dtype_name(v.dtype)));
  }
  const auto need = static_cast<size_t>(shape_elements(v.shape).value_or(0) * (dtype_bits(v.dtype) / 8));
  if (v.size_bytes != need || (v.data == nullptr && need > 0)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: the buffer holds {} bytes, {} {} needs {}", where,
                                                               v.data ? v.size_bytes : 0, dtype_name(v.dtype),
                                                               shape_str(v.shape), need));
  }
  return Ok{};
}

HostBuffer to_buffer(const HostTensor& t) {
  HostBuffer b;
  b.dtype = t.dtype;
  b.shape = t.shape;
  if (!buffer_dtype(t.dtype) || t.is_sequence) return b;
  const int64_t n = t.elements();
  b.bytes.resize(static_cast<size_t>(n * (dtype_bits(t.dtype) / 8)));
  for (int64_t k = 0; k < n; ++k) {
    if (t.is_real()) {
      detail::store_real(b.bytes.data(), t.dtype, k, t.r[static_cast<size_t>(k)]);
    } else {
      detail::store_integer(b.bytes.data(), t.dtype, k, t.i[static_cast<size_t>(k)]);
    }
  }
  return b;
}

HostTensor from_data(const TensorData& d) {
  HostTensor t;
  t.dtype = d.dtype;
  t.shape = d.shape;
  t.r = d.reals;
  t.i = d.ints;
  t.s = d.strings;
  return t;
}

// Through the node's one typed accessor (graph.h).
int64_t KernelArgs::attr_i(const std::string& key, int64_t def) const { return node.attr_int(key, def); }
double KernelArgs::attr_f(const std::string& key, double def) const { return node.attr_float(key, def); }
std::string KernelArgs::attr_s(const std::string& key, const std::string& def) const { return node.attr_string(key, def); }
std::vector<int64_t> KernelArgs::attr_ints(const std::string& key) const { return node.attr_ints(key); }
std::vector<double> KernelArgs::attr_floats(const std::string& key) const { return node.attr_floats(key); }
Error KernelArgs::fail(const std::string& msg) const {
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: node \"{}\" ({}): {}", graph.source_path, node.name, node.op_type, msg));
}

Result<std::vector<double>> per_line(const KernelArgs& a, size_t idx, int64_t n, const char* what, const char* line) {
  std::vector<double> v(static_cast<size_t>(n), 0.0);
  if (!a.has(idx)) return v;
  const HostTensor& t = *a.in[idx];
  if (t.elements() == 1) {
    std::fill(v.begin(), v.end(), t.real(0));
  } else if (t.elements() == n) {
    for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = t.real(k);
  } else {
    return a.fail(fmt::format("{} {} is neither a scalar nor one value per {} ({})", what, shape_str(t.shape), line, n));
  }
  return v;
}

const std::map<std::string, Kernel>& kernels() {
  static const std::map<std::string, Kernel> table = [] {
    std::map<std::string, Kernel> k;
    register_elementwise(k);
    register_reduction_normalization(k);
    register_gemm_conv(k);
    register_data_movement(k);
    register_quantization(k);
    return k;
  }();
  return table;
}

std::string size_text(double bytes) {
  return bytes >= 1e9 ? fmt::format("{:.1f} GB", bytes / 1e9) : fmt::format("{:.1f} MB", bytes / 1e6);
}

int64_t host_memory_limit(const RunOptions& opts) {
  if (opts.max_host_bytes > 0) return opts.max_host_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) / 2 * static_cast<int64_t>(page);
}

namespace {

// Bytes the reference holds for tensor `t` (8 per number, 32 per string).
int64_t host_bytes(const Tensor& t) {
  const auto n = shape_elements(t.shape);
  if (!n) return std::numeric_limits<int64_t>::max();
  const int64_t per = t.dtype == DType::kString ? 32 : 8;
  return *n > std::numeric_limits<int64_t>::max() / per ? std::numeric_limits<int64_t>::max() : *n * per;
}

// Per tensor, the last node that reads it (-1: none); graph outputs are read after every node.
std::vector<int> last_reads(const Graph& g) {
  std::vector<int> last(g.tensors.size(), -1);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    for (TensorId t : g.nodes[ni].inputs) {
      if (t != kNoTensor) last[static_cast<size_t>(t)] = static_cast<int>(ni);
    }
  }
  for (TensorId t : g.outputs) last[static_cast<size_t>(t)] = static_cast<int>(g.nodes.size());
  return last;
}

int64_t add_sat(int64_t a, int64_t b) { return b > std::numeric_limits<int64_t>::max() - a ? std::numeric_limits<int64_t>::max() : a + b; }

// Whether a run fits that limit on the host: the peak of what it holds at once, as run_reference
// frees each value after its last reader (weights and inputs from the start). The error names the
// largest tensors.
Status check_host_memory(const Graph& g, const RunOptions& opts) {
  const int64_t limit = host_memory_limit(opts);
  const std::vector<int> last = last_reads(g);
  int64_t live = 0;
  for (const Tensor& t : g.tensors) {
    if (t.role == TensorRole::kWeight || t.role == TensorRole::kInput) live = add_sat(live, host_bytes(t));
  }
  int64_t peak = live;
  for (size_t ni = 0; ni < g.nodes.size() && peak <= limit; ++ni) {
    for (TensorId t : g.nodes[ni].outputs) {
      if (t != kNoTensor) live = add_sat(live, host_bytes(g.tensor(t)));
    }
    peak = std::max(peak, live);
    const auto freed = [&](TensorId t) { return t != kNoTensor && last[static_cast<size_t>(t)] <= static_cast<int>(ni); };
    const std::vector<TensorId>& in = g.nodes[ni].inputs;
    for (size_t k = 0; k < in.size(); ++k) {
      const bool repeated = std::find(in.begin(), in.begin() + static_cast<long>(k), in[k]) != in.begin() + static_cast<long>(k);
      if (!repeated && freed(in[k]) && live != std::numeric_limits<int64_t>::max()) live -= host_bytes(g.tensor(in[k]));
    }
    for (TensorId t : g.nodes[ni].outputs) {
      if (freed(t) && live != std::numeric_limits<int64_t>::max()) live -= host_bytes(g.tensor(t));
    }
  }
  if (peak <= limit) return Ok{};
  std::vector<std::pair<int64_t, size_t>> big;  // only to name the largest, once over
  for (size_t t = 0; t < g.tensors.size(); ++t) big.emplace_back(host_bytes(g.tensors[t]), t);
  const size_t show = std::min<size_t>(3, big.size());
  std::partial_sort(big.begin(), big.begin() + static_cast<long>(show), big.end(), std::greater<>());
  std::vector<std::string> names;
  for (size_t k = 0; k < show; ++k) {
    const Tensor& t = g.tensors[big[k].second];
    names.push_back(fmt::format("\"{}\" {} ({})", t.name, shape_str(t.shape), size_text(static_cast<double>(big[k].first))));
  }
  return make_error(ErrorCode::kLimit,
                    fmt::format("{}: the CPU reference would hold {}{} on the host at once (in fp64/int64; each "
                                "value is freed after its last reader), over its limit of {} (half the "
                                "machine's memory, or RunOptions::max_host_bytes); the largest tensors: {}. Make the "
                                "inputs smaller (`dims`) or run on a device backend",
                                g.source_path, peak > limit ? "at least " : "", size_text(static_cast<double>(peak)), size_text(static_cast<double>(limit)),
                                fmt::join(names, ", ")));
}

std::string input_types(const Graph& g, const Node& n) {
  std::vector<std::string> v;
  for (TensorId t : n.inputs) v.push_back(t == kNoTensor ? "-" : std::string(dtype_name(g.tensor(t).dtype)));
  return fmt::format("{}", fmt::join(v, ", "));
}

// Seeded values for weights and inputs a caller does not supply: never all zero. Weights of rank
// two or more (conv kernels, matrices) are uniform with variance 1/fan-in (fan-in: the product of
// all dims but the first; for a 2-D matrix, whose fan-in is either dim depending on transB, the
// smaller one), so a deep network's activations keep their scale instead of overflowing fp32 after
// fifty layers; others are uniform in [-0.5, 0.5].
HostTensor seeded(const Tensor& t, std::mt19937_64& rng, bool weight) {
  HostTensor h;
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.allocate();
  double bound = 0.5;
  if (weight && t.shape.size() >= 2) {
    int64_t fan_in = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) fan_in *= std::max<int64_t>(1, t.shape[d]);
    if (t.shape.size() == 2) fan_in = std::max<int64_t>(1, std::min(t.shape[0], t.shape[1]));
    bound = std::sqrt(3.0 / static_cast<double>(fan_in));
  }
  std::uniform_real_distribution<double> u(-bound, bound);
  for (double& x : h.r) x = u(rng);
  // Representable in the tensor's own type, as a device storing it holds it: two fp16 inputs that
  // differ by less than an ulp would otherwise compare one way here and the other on the device.
  if (t.dtype == DType::kFloat16) {
    for (double& x : h.r) x = detail::half_to_double(detail::float_to_half(static_cast<float>(x)));
  } else if (t.dtype == DType::kBFloat16) {
    for (double& x : h.r) x = detail::bf16_to_double(detail::float_to_bf16(static_cast<float>(x)));
  } else if (t.dtype == DType::kFloat32) {
    for (double& x : h.r) x = static_cast<float>(x);
  }
  // Integer inputs are token ids, indices and attention masks: 0 or 1 is a valid index into any dim
  // of two or more and keeps a mask binary. (With masks up to 7, BERT's (1 - mask) * finfo(fp32).min
  // overflowed to inf in fp32 kernels, where the fp64 reference stays finite: --check failed on NaN.)
  for (int64_t& x : h.i) x = static_cast<int64_t>(rng() & 1);
  // Quantized weights (and their zero points) take any value of their 8- or 4-bit type: a packed
  // block-quantized matrix is bytes whose every bit pattern means a weight.
  if (weight) {
    const int64_t lo = t.dtype == DType::kInt8 ? -128 : t.dtype == DType::kInt4 ? -8 : 0;
    const int64_t span = t.dtype == DType::kUInt8 || t.dtype == DType::kInt8 ? 256
                         : t.dtype == DType::kUInt4 || t.dtype == DType::kInt4 ? 16 : 0;
    if (span > 0) {
      for (int64_t& x : h.i) x = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
    }
  }
  return h;
}

}  // namespace

HostTensor from_value(const Value& v) {
  HostTensor h;
  h.dtype = v.dtype;
  h.shape = v.shape;
  h.r = v.reals;
  h.i = v.ints;
  return h;
}

Result<HostState> initial_state(const Graph& g, const std::vector<HostTensor>& inputs, const RunOptions& opts,
                                Held held) {
  HostState st;
  st.vals.resize(g.tensors.size());
  st.ready.assign(g.tensors.size(), false);
  std::mt19937_64 rng(opts.seed);
  int64_t seeded_weights = 0, packed_weights = 0;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    const Tensor& t = g.tensors[id];
    if (t.role != TensorRole::kWeight) continue;
    if (opts.weights) {
      if (auto it = opts.weights->find(t.name); it != opts.weights->end()) {
        if (held.file_weights) continue;
        st.vals[id] = from_data(it->second);
        st.ready[id] = true;
        continue;
      }
    }
    if (t.value) {
      st.vals[id] = from_value(*t.value);
    } else {
      st.vals[id] = seeded(t, rng, true);
      ++seeded_weights;
      packed_weights += t.dtype == DType::kUInt8 || t.dtype == DType::kInt8 || t.dtype == DType::kUInt4 || t.dtype == DType::kInt4;
    }
    st.ready[id] = true;
  }
  if (seeded_weights > 0) {
    st.notes.push_back(fmt::format("{} weights are not in the file; filled from seed {} (uniform, scaled by fan-in{})",
                                   seeded_weights, opts.seed,
                                   packed_weights > 0 ? fmt::format("; {} of 8 or 4 bits: any value of their type", packed_weights)
                                                      : std::string()));
  }
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const auto id = static_cast<size_t>(g.inputs[k]);
    if (k < inputs.size()) {
      const HostTensor& in = inputs[k];
      if (in.shape != g.tensors[id].shape) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("input \"{}\" has shape {}, the graph expects {}", g.tensors[id].name,
                                      shape_str(in.shape), shape_str(g.tensors[id].shape)));
      }
      st.vals[id] = in;
    } else if (k < held.inputs) {
      continue;
    } else {
      st.vals[id] = seeded(g.tensors[id], rng, false);
    }
    st.ready[id] = true;
  }
  return st;
}

Status run_node(const Graph& g, size_t ni, HostState& st, const RunOptions& opts) {
  const Node& n = g.nodes[ni];
  // A Constant too large for the IR to keep its value: the file's data, when present.
  if (n.op_type == "Constant" && opts.weights && n.outputs.size() == 1 && n.outputs[0] != kNoTensor) {
    const auto id = static_cast<size_t>(n.outputs[0]);
    if (auto w = opts.weights->find(g.tensors[id].name); w != opts.weights->end() && !g.tensors[id].value) {
      st.vals[id] = from_data(w->second);
      st.ready[id] = true;
      return Ok{};
    }
  }
  const auto& table = kernels();
  auto it = table.find(n.domain.empty() ? n.op_type : n.domain + ":" + n.op_type);
  if (it == table.end()) {
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: node \"{}\" ({}): the CPU reference has no kernel "
                                                           "for this op",
                                                           g.source_path, n.name, n.op_type));
  }
  KernelArgs a{g, n, {}, {}};
  for (TensorId t : n.inputs) {
    if (t == kNoTensor) {
      a.in.push_back(nullptr);
      continue;
    }
    if (!st.ready[static_cast<size_t>(t)]) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("{}: node \"{}\" reads \"{}\" before it is computed",
                                                              g.source_path, n.name, g.tensor(t).name));
    }
    a.in.push_back(&st.vals[static_cast<size_t>(t)]);
  }
  for (TensorId t : n.outputs) {
    if (t == kNoTensor) {
      a.out.push_back(nullptr);
      continue;
    }
    HostTensor& o = st.vals[static_cast<size_t>(t)];
    o = HostTensor{};
    o.dtype = g.tensor(t).dtype;
    o.shape = g.tensor(t).shape;
    o.is_sequence = g.tensor(t).is_sequence;
    a.out.push_back(&o);
  }
  // The firewall around every kernel: a read out of range (CheckedVector), an allocation that
  // fails, or any other exception becomes an error naming the node, never a crash.
  try {
    if (auto s = it->second(a); !s) return s.error();
  } catch (const std::out_of_range& e) {
    return make_error(ErrorCode::kInvalidModel,
                      fmt::format("{}: node \"{}\" ({}): the CPU reference read past a tensor ({}): the node's input "
                                  "values or attributes (an index, a length, an axis) do not fit its inputs' shapes, "
                                  "or an input has a type the op does not take (input types: {})",
                                  g.source_path, n.name, n.op_type, e.what(), input_types(g, n)));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kLimit, fmt::format("{}: node \"{}\" ({}): the CPU reference ran out of host memory",
                                                     g.source_path, n.name, n.op_type));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, fmt::format("{}: node \"{}\" ({}): the CPU reference failed: {}",
                                                        g.source_path, n.name, n.op_type, e.what()));
  }
  for (TensorId t : n.outputs) {
    if (t != kNoTensor) st.ready[static_cast<size_t>(t)] = true;
  }
  return Ok{};
}

Result<RunResult> run_reference(const Graph& g, const std::vector<HostTensor>& inputs, const RunOptions& opts) {
  if (auto s = check_host_memory(g, opts); !s) return s.error();
  auto st = initial_state(g, inputs, opts);
  if (!st) return st.error();
  RunResult res;
  res.notes = st->notes;
  res.node_us.assign(g.nodes.size(), 0.0);
  // Each value is freed after its last reader, so a run holds its live tensors, not all of them.
  const std::vector<int> last = last_reads(g);
  const auto release = [&](TensorId t, size_t ni) {
    if (t != kNoTensor && last[static_cast<size_t>(t)] <= static_cast<int>(ni)) st->vals[static_cast<size_t>(t)] = HostTensor{};
  };
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (last[t] < 0) st->vals[t] = HostTensor{};  // weights nothing reads
  }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (opts.progress) opts.progress(static_cast<int>(ni), static_cast<int>(g.nodes.size()));
    const auto start = std::chrono::steady_clock::now();
    if (auto s = run_node(g, ni, *st, opts); !s) return s.error();
    res.node_us[ni] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    for (TensorId t : g.nodes[ni].inputs) release(t, ni);
    for (TensorId t : g.nodes[ni].outputs) release(t, ni);
  }
  for (TensorId t : g.outputs) res.outputs.push_back(st->vals[static_cast<size_t>(t)]);
  return res;
}

}  // namespace gpusim::cpu
