#include "reference.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

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

HostTensor from_data(const TensorData& d) {
  HostTensor t;
  t.dtype = d.dtype;
  t.shape = d.shape;
  t.r = d.reals;
  t.i = d.ints;
  t.s = d.strings;
  return t;
}

int64_t KernelArgs::attr_i(const std::string& key, int64_t def) const {
  const Attribute* a = node.attr(key);
  return a ? a->i : def;
}
double KernelArgs::attr_f(const std::string& key, double def) const {
  const Attribute* a = node.attr(key);
  return a ? a->f : def;
}
std::string KernelArgs::attr_s(const std::string& key, const std::string& def) const {
  const Attribute* a = node.attr(key);
  return a ? a->s : def;
}
std::vector<int64_t> KernelArgs::attr_ints(const std::string& key) const {
  const Attribute* a = node.attr(key);
  return a ? a->ints : std::vector<int64_t>{};
}
std::vector<double> KernelArgs::attr_floats(const std::string& key) const {
  const Attribute* a = node.attr(key);
  return a ? a->floats : std::vector<double>{};
}
Error KernelArgs::fail(const std::string& msg) const {
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: node \"{}\" ({}): {}", graph.source_path, node.name, node.op_type, msg));
}

const std::map<std::string, Kernel>& kernels() {
  static const std::map<std::string, Kernel> table = [] {
    std::map<std::string, Kernel> k;
    register_elementwise(k);
    register_reduction_normalization(k);
    register_gemm_conv(k);
    register_data_movement(k);
    return k;
  }();
  return table;
}

namespace {

// Seeded values for weights and inputs a caller does not supply: small, never all zero.
HostTensor seeded(const Tensor& t, std::mt19937_64& rng) {
  HostTensor h;
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.allocate();
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& x : h.r) x = u(rng) * 0.5;
  for (int64_t& x : h.i) x = t.dtype == DType::kBool ? static_cast<int64_t>(rng() & 1) : static_cast<int64_t>(rng() % 8);
  return h;
}

HostTensor from_value(const Value& v) {
  HostTensor h;
  h.dtype = v.dtype;
  h.shape = v.shape;
  h.r = v.reals;
  h.i = v.ints;
  return h;
}

}  // namespace

Result<RunResult> run_reference(const Graph& g, const std::vector<HostTensor>& inputs, const RunOptions& opts) {
  RunResult res;
  std::vector<HostTensor> vals(g.tensors.size());
  std::vector<bool> ready(g.tensors.size(), false);
  std::mt19937_64 rng(opts.seed);
  int64_t seeded_weights = 0;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    const Tensor& t = g.tensors[id];
    if (t.role != TensorRole::kWeight) continue;
    if (opts.weights) {
      if (auto it = opts.weights->find(t.name); it != opts.weights->end()) {
        vals[id] = from_data(it->second);
        ready[id] = true;
        continue;
      }
    }
    if (t.value) {
      vals[id] = from_value(*t.value);
    } else {
      vals[id] = seeded(t, rng);
      ++seeded_weights;
    }
    ready[id] = true;
  }
  if (seeded_weights > 0) {
    res.notes.push_back(fmt::format("{} weights are not in the file; filled from seed {}", seeded_weights, opts.seed));
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
      vals[id] = in;
    } else {
      vals[id] = seeded(g.tensors[id], rng);
    }
    ready[id] = true;
  }
  const auto& table = kernels();
  res.node_us.assign(g.nodes.size(), 0.0);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const auto start = std::chrono::steady_clock::now();
    // A Constant too large for the IR to keep its value: the file's data, when present.
    if (n.op_type == "Constant" && opts.weights && n.outputs.size() == 1 && n.outputs[0] != kNoTensor) {
      const auto id = static_cast<size_t>(n.outputs[0]);
      if (auto w = opts.weights->find(g.tensors[id].name); w != opts.weights->end() && !g.tensors[id].value) {
        vals[id] = from_data(w->second);
        ready[id] = true;
        continue;
      }
    }
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
      if (!ready[static_cast<size_t>(t)]) {
        return make_error(ErrorCode::kInvalidModel, fmt::format("{}: node \"{}\" reads \"{}\" before it is computed",
                                                                g.source_path, n.name, g.tensor(t).name));
      }
      a.in.push_back(&vals[static_cast<size_t>(t)]);
    }
    for (TensorId t : n.outputs) {
      if (t == kNoTensor) {
        a.out.push_back(nullptr);
        continue;
      }
      HostTensor& o = vals[static_cast<size_t>(t)];
      o = HostTensor{};
      o.dtype = g.tensor(t).dtype;
      o.shape = g.tensor(t).shape;
      o.is_sequence = g.tensor(t).is_sequence;
      a.out.push_back(&o);
    }
    if (auto s = it->second(a); !s) return s.error();
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) ready[static_cast<size_t>(t)] = true;
    }
    res.node_us[ni] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  for (TensorId t : g.outputs) res.outputs.push_back(vals[static_cast<size_t>(t)]);
  return res;
}

}  // namespace gpusim::cpu
