// The executor (see executor.h). Bookkeeping in one place: which tensors the host holds current
// values of (the CPU reference's HostState), which buffers the device holds current values of, and
// the moves between them — uploads before a device kernel reads a host value, downloads before a
// host node reads a device value. Views alias their root's buffer on the device and are reshaped
// copies on the host.
//
// Memory is planned as a runtime's is, not one buffer per tensor for the whole run:
//   - activations share device buffers: each root lives from the unit that first writes it to the
//     last that reads it, and roots whose lifetimes do not overlap take the same buffer (greedy,
//     best fit); weights, inputs, constants and graph outputs keep their own;
//   - the host keeps a value only while it is needed: the caller's inputs and the file's weights
//     are uploaded from where they are (in their own dtype, converted only where the device stores
//     another) and decoded to fp64 only for a host node that reads them; a value a host node read
//     goes after its last host reader, and nodes computed on the host before the run (constants)
//     compute when first read; each comes back from the device, or is computed again, if a later
//     run needs it.
#include "executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpusim/kernel_work.h"
#include "raw_decode.h"

namespace gpusim::exec {

namespace {

// The type of a device buffer's elements: packed elements of a tensor of this type go to the
// device and come back as they are; any other type converts.
DType stored_as(codegen::Storage s) {
  switch (s) {
    case codegen::Storage::kF32: return DType::kFloat32;
    case codegen::Storage::kF16: return DType::kFloat16;
    case codegen::Storage::kI32: return DType::kInt32;
    case codegen::Storage::kU8: return DType::kUInt8;
    case codegen::Storage::kI8: return DType::kInt8;
  }
  return DType::kUndefined;
}

// Unit::args entries that stand for the program's scratch (codegen.h: Scratch) instead of a tensor.
constexpr TensorId kPartialsArg = -2, kCountersArg = -3;

// One device launch, or one node on the host.
struct Unit {
  int plan_kernel = 0;
  bool device = true;
  backend::KernelHandle handle = 0;
  std::array<uint32_t, 3> groups{1, 1, 1};
  std::vector<TensorId> reads, writes;  // roots
  std::vector<TensorId> args;           // roots, in binding order (kPartialsArg, kCountersArg: scratch)
  int node = -1;                        // host units
  std::string cls;
};

class Runner {
 public:
  Runner(backend::Backend& dev, const Graph& g, const RunOptions& o)
      : dev_(dev), g_(g), idx_(index_graph(g)), opts_(o), dev_valid_(g.tensors.size(), false) {
    ropts_.weights = o.weights;
    ropts_.seed = o.seed;
    ropts_.max_host_bytes = o.max_host_bytes;
    copts_ = codegen::target_options(dev.info(), o.fp16_storage, o.matrix, o.allow_tf32);
    lang_ = dev.info().language;
  }
  ~Runner() {
    for (const backend::Buffer& b : owned_) dev_.release(b);
  }

  // What the run will hold, checked before anything is allocated, so a model too big for the device
  // (or, for a CPU device such as lavapipe, for the machine) is an error naming the sizes rather than
  // the process being killed for memory. `device` and `host` are bytes; `planned` says whether they
  // come from the memory plan (after lowering) or are the lower bound checked before compiling
  // (weights on the device, weights and inputs in fp64 on the host).
  Status check_memory(uint64_t device, uint64_t host, uint64_t activations, bool planned) const {
    const backend::DeviceInfo& info = dev_.info();
    const auto host_limit = static_cast<uint64_t>(cpu::host_memory_limit(ropts_));
    // A CPU device's buffers are host memory too: both must fit the machine (85 % of it).
    const double machine = static_cast<double>(host_limit) * 2;
    const bool fits = info.is_cpu ? static_cast<double>(host + device) <= 0.85 * machine
                                  : host <= host_limit && (info.memory_bytes == 0 || device <= info.memory_bytes);
    if (fits) return Ok{};
    const auto text = [](uint64_t b) { return cpu::size_text(static_cast<double>(b)); };
    std::string needs;
    if (planned) {
      needs = fmt::format("about {} of device buffers ({} of them activations, sharing buffers by lifetime) and {} of "
                          "host copies (fp64)",
                          text(device), text(activations), text(host));
    } else {
      needs = fmt::format("at least {}{} of host copies of its weights and inputs (fp64)",
                          device > 0 ? text(device) + " of device buffers for its weights and " : "", text(host));
    }
    return make_error(ErrorCode::kLimit,
                      fmt::format("{}: running it on {} needs {}{}, over what {} has ({}); make the inputs smaller "
                                  "(`dims`), use `dtype fp16`, or run on a device with more memory",
                                  g_.source_path, info.name, needs, info.is_cpu ? ", both in this machine's memory" : "",
                                  info.is_cpu ? "the machine" : "the device",
                                  cpu::size_text(info.is_cpu ? machine : static_cast<double>(info.memory_bytes))));
  }

  // Whole 32-bit words: byte tensors are read a word at a time (codegen.h: Storage).
  uint64_t device_bytes(TensorId r) const {
    const uint64_t b = static_cast<uint64_t>(std::max<int64_t>(1, g_.tensor(r).elements())) *
                       static_cast<uint64_t>(codegen::storage_bytes(storage(r)));
    return (b + 3) / 4 * 4;
  }
  static uint64_t host_bytes(const Tensor& t) { return static_cast<uint64_t>(std::max<int64_t>(1, t.elements())) * 8; }

  // What the host holds of the weights and inputs: the fp64 values of those it seeds until they
  // are uploaded, and one staging buffer for the held ones (converted one at a time).
  uint64_t host_weight_and_input_bytes() const {
    uint64_t host = 0, staging = 0;
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const Tensor& tt = g_.tensors[t];
      if (tt.dtype == DType::kString || (tt.role != TensorRole::kWeight && tt.role != TensorRole::kInput)) continue;
      const auto id = static_cast<TensorId>(t);
      if (held(id)) {
        staging = std::max(staging, device_bytes(id));
      } else {
        host += host_bytes(tt);
      }
    }
    return host + staging;
  }

  // The lower bound, before compiling anything: weights on the device, and the host's share of the
  // weights and inputs.
  Status check_weights_fit() const {
    uint64_t device = 0;
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const Tensor& tt = g_.tensors[t];
      if (tt.dtype != DType::kString && tt.role == TensorRole::kWeight) device += device_bytes(static_cast<TensorId>(t));
    }
    return check_memory(device, host_weight_and_input_bytes(), 0, false);
  }

  Result<RunResult> run(const Plan& plan, const std::vector<ConstTensorView>& inputs) {
    if (auto s = hold(inputs); !s) return s.error();
    if (auto s = check_weights_fit(); !s) return s.error();
    auto st = cpu::initial_state(g_, {}, ropts_, cpu::Held{inputs.size(), true});
    if (!st) return st.error();
    st_ = std::move(*st);
    res_.notes = st_.notes;
    if (inputs.size() < g_.inputs.size()) {
      res_.notes.push_back(fmt::format("{} inputs filled from seed {}", g_.inputs.size() - inputs.size(), opts_.seed));
    }
    // Values the importer computed (folded shape arithmetic, small constants).
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      if (!st_.ready[t] && g_.tensors[t].value) {
        st_.vals[t] = cpu::from_value(*g_.tensors[t].value);
        st_.ready[t] = true;
      }
    }
    if (auto s = lower(plan); !s) return s.error();
    if (auto s = plan_memory(); !s) return s.error();
    if (auto s = allocate(); !s) return s.error();
    const int repeat = std::max(1, opts_.repeat);
    std::vector<std::vector<double>> per_kernel(plan.kernels.size());
    for (int r = 0; r <= repeat; ++r) {
      if (r > 0 && opts_.before_timed_run) {
        if (auto s = dev_.synchronize(); !s) return s.error();
        if (auto s = opts_.before_timed_run(); !s) return s.error();
      }
      auto times = run_once(r);
      if (!times) return times.error();
      if (r == 0) continue;  // warm-up
      for (size_t k = 0; k < times->size(); ++k) per_kernel[k].push_back((*times)[k]);
    }
    res_.kernels.resize(plan.kernels.size());
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      KernelTiming& kt = res_.kernels[k];
      const PlanKernel& pk = plan.kernels[k];
      kt.plan_kernel = static_cast<int>(k);
      kt.name = g_.nodes[static_cast<size_t>(pk.nodes.front())].name;
      for (int ni : pk.nodes) kt.op_type += (kt.op_type.empty() ? "" : "+") + g_.nodes[static_cast<size_t>(ni)].op_type;
      kt.samples_us = per_kernel[k];
      std::vector<double> v = per_kernel[k];
      std::sort(v.begin(), v.end());
      kt.measured_us = v.empty() ? 0 : v[v.size() / 2];
      kt.min_us = v.empty() ? 0 : v.front();
      kt.max_us = v.empty() ? 0 : v.back();
      res_.total_us += kt.measured_us;
    }
    for (const Unit& u : units_) {
      KernelTiming& kt = res_.kernels[static_cast<size_t>(u.plan_kernel)];
      if (u.device) ++kt.launches;
      kt.device = kt.device && u.device;
      if (kt.cls.empty()) kt.cls = u.device ? u.cls : "host";
    }
    for (size_t k = 0; k < plan.kernels.size(); ++k) res_.kernels[k].fused_as_planned = !split_[k];
    for (TensorId t : g_.outputs) {
      auto o = output(t);
      if (!o) return o.error();
      res_.outputs.push_back(std::move(*o));
    }
    res_.compile = dev_.compile_stats();
    summarize_fallbacks();
    return std::move(res_);
  }

 private:
  TensorId root(TensorId t) const { return idx_.root[static_cast<size_t>(t)]; }

  // The caller's inputs and the file's weights stay where they are (held_input_, held_weight_):
  // each is uploaded from there, and decoded only for a host node that reads it.
  Status hold(const std::vector<ConstTensorView>& inputs) {
    if (inputs.size() > g_.inputs.size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {} inputs given; the graph takes {}", g_.source_path, inputs.size(), g_.inputs.size()));
    }
    inputs_ = inputs;
    held_input_.assign(g_.tensors.size(), -1);
    held_weight_.assign(g_.tensors.size(), nullptr);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& t = g_.tensor(g_.inputs[k]);
      if (auto s = cpu::check_view(inputs[k], t.dtype, t.shape, fmt::format("input {} \"{}\"", k, t.name)); !s) return s;
      held_input_[static_cast<size_t>(g_.inputs[k])] = static_cast<int>(k);
    }
    if (ropts_.weights) {
      for (size_t t = 0; t < g_.tensors.size(); ++t) {
        const Tensor& tt = g_.tensors[t];
        if (tt.role != TensorRole::kWeight || tt.dtype == DType::kString) continue;
        if (auto it = ropts_.weights->find(tt.name); it != ropts_.weights->end()) held_weight_[t] = &it->second;
      }
    }
    return Ok{};
  }
  bool held(TensorId t) const {
    const auto ti = static_cast<size_t>(t);
    return held_input_[ti] >= 0 || held_weight_[ti] != nullptr;
  }

  // Root r's elements as the device stores them: element k from `real(k)` (float storage) or
  // `integer(k)` (int32 storage, which must hold it).
  template <class Real, class Integer>
  Result<std::vector<uint8_t>> pack(TensorId r, int64_t n, const Real& real, const Integer& integer) const {
    const codegen::Storage s = storage(r);
    std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(1, n) * codegen::storage_bytes(s)));
    for (int64_t k = 0; k < n; ++k) {
      const auto kk = static_cast<size_t>(k);
      if (s == codegen::Storage::kF32) {
        const auto f = static_cast<float>(real(k));
        std::memcpy(&bytes[kk * 4], &f, 4);
      } else if (s == codegen::Storage::kF16) {
        const uint16_t v = detail::float_to_half(static_cast<float>(real(k)));
        std::memcpy(&bytes[kk * 2], &v, 2);
      } else if (codegen::storage_is_byte(s)) {
        const int64_t v = integer(k);
        const bool u8 = s == codegen::Storage::kU8;
        if (v < (u8 ? 0 : -128) || v > (u8 ? 255 : 127)) {
          return make_error(ErrorCode::kInvalidArgument,
                            fmt::format("{}: tensor \"{}\" element {} is {}, outside its type {}", g_.source_path,
                                        g_.tensor(r).name, k, v, u8 ? "uint8 (0 to 255)" : "int8 (-128 to 127)"));
        }
        bytes[kk] = static_cast<uint8_t>(static_cast<int8_t>(v));
      } else {
        const int64_t v = integer(k);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return make_error(ErrorCode::kUnsupported,
                            fmt::format("{}: tensor \"{}\" element {} is {}, outside the int32 range the device "
                                        "kernels use for integer tensors",
                                        g_.source_path, g_.tensor(r).name, k, v));
        }
        const auto v32 = static_cast<int32_t>(v);
        std::memcpy(&bytes[kk * 4], &v32, 4);
      }
    }
    return bytes;
  }

  // Uploads held root r from where it is: the caller's bytes as they are when the device stores
  // them so, else converted; a weight from the file's values.
  Status upload_held(TensorId r) {
    const auto ri = static_cast<size_t>(r);
    const int64_t n = g_.tensor(r).elements();
    if (n <= 0) return Ok{};
    Result<std::vector<uint8_t>> bytes = std::vector<uint8_t>{};
    if (held_input_[ri] >= 0) {
      const ConstTensorView& v = inputs_[static_cast<size_t>(held_input_[ri])];
      if (v.dtype == stored_as(storage(r))) return dev_.upload(bufs_.at(r), v.data, v.size_bytes);
      bytes = pack(
          r, n, [&](int64_t k) { return detail::load_real(v.data, v.dtype, k); },
          [&](int64_t k) { return detail::load_integer(v.data, v.dtype, k); });
    } else {
      const TensorData& d = *held_weight_[ri];
      const bool real = dtype_is_float(d.dtype);
      if (static_cast<int64_t>(real ? d.reals.size() : d.ints.size()) < n) {
        return make_error(ErrorCode::kInvalidModel, fmt::format("{}: weight \"{}\" holds {} values; its shape {} takes {}",
                                                                g_.source_path, d.name, real ? d.reals.size() : d.ints.size(),
                                                                shape_str(g_.tensor(r).shape), n));
      }
      bytes = pack(
          r, n, [&](int64_t k) { return real ? d.reals[static_cast<size_t>(k)] : static_cast<double>(d.ints[static_cast<size_t>(k)]); },
          [&](int64_t k) { return real ? static_cast<int64_t>(d.reals[static_cast<size_t>(k)]) : d.ints[static_cast<size_t>(k)]; });
    }
    if (!bytes) return bytes.error();
    return dev_.upload(bufs_.at(r), bytes->data(), static_cast<size_t>(n * codegen::storage_bytes(storage(r))));
  }

  // Root r's device buffer as it stores it (at least one element's bytes).
  Result<std::vector<uint8_t>> download(TensorId r) {
    const int64_t n = g_.tensor(r).elements();
    std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(1, n) * codegen::storage_bytes(storage(r))));
    if (n > 0) {
      if (auto d = dev_.download(bufs_.at(r), bytes.data(), bytes.size()); !d) return d.error();
    }
    return bytes;
  }

  // Graph output t as the run returns it: its device buffer's bytes (or the caller's input it
  // passes through) in t's dtype, else the host's value.
  Result<Output> output(TensorId t) {
    const TensorId r = root(t);
    const auto ri = static_cast<size_t>(r);
    const Tensor& tt = g_.tensor(t);
    const int64_t n = tt.elements();
    Output o;
    if (!buffer_dtype(tt.dtype) || tt.is_sequence || n < 0) {
      if (auto s = ensure_host(t); !s) return s.error();
      o.host = st_.vals[static_cast<size_t>(t)];
      return o;
    }
    HostBuffer b;
    b.dtype = tt.dtype;
    b.shape = tt.shape;
    const size_t out_bytes = static_cast<size_t>(n * (dtype_bits(tt.dtype) / 8));
    if (has_buf_[ri] && dev_valid_[ri]) {
      auto bytes = download(r);
      if (!bytes) return bytes.error();
      const DType stored = stored_as(storage(r));
      if (stored == tt.dtype) {
        bytes->resize(out_bytes);
        b.bytes = std::move(*bytes);
      } else {
        b.bytes.resize(out_bytes);
        detail::convert_packed(bytes->data(), stored, b.bytes.data(), tt.dtype, n);
      }
    } else if (held_input_[ri] >= 0) {  // the caller's input, passed through (a float one maybe in another float type)
      const ConstTensorView& v = inputs_[static_cast<size_t>(held_input_[ri])];
      b.bytes.resize(out_bytes);
      detail::convert_packed(v.data, v.dtype, b.bytes.data(), tt.dtype, n);
    } else {
      if (auto s = ensure_host(t); !s) return s.error();
      o.host = st_.vals[static_cast<size_t>(t)];
      return o;
    }
    o.buffer = std::move(b);
    return o;
  }

  // Plan kernels -> units: the generated kernel; else one kernel per node; else the host.
  Status lower(const Plan& plan) {
    split_.assign(plan.kernels.size(), false);
    std::vector<bool> in_plan(g_.nodes.size(), false);
    for (const PlanKernel& k : plan.kernels) {
      for (int ni : k.nodes) in_plan[static_cast<size_t>(ni)] = true;
    }
    // Nodes outside every kernel that are neither folded into values nor views (constants built
    // from shapes, Constants with file data): computed on the host when first read (ensure_host).
    lazy_.assign(g_.tensors.size(), -1);
    for (size_t ni = 0; ni < g_.nodes.size(); ++ni) {
      const Node& n = g_.nodes[ni];
      if (in_plan[ni] || runs_on_device(g_, n)) continue;
      bool ready = true;
      for (TensorId t : n.outputs) ready = ready && (t == kNoTensor || st_.ready[static_cast<size_t>(t)]);
      if (ready || is_view(n)) continue;
      for (TensorId t : n.outputs) {
        if (t != kNoTensor) lazy_[static_cast<size_t>(t)] = static_cast<int>(ni);
      }
    }
    // Every kernel generated first, so the backend can run its compilers on them in parallel.
    std::vector<Result<codegen::Kernel>> generated;
    std::vector<backend::KernelSource> sources(plan.kernels.size());  // empty where generation failed
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      generated.push_back(codegen::generate(g_, idx_, plan.kernels[k], copts_));
      if (generated.back()) sources[k] = generated.back()->source(lang_);
    }
    dev_.prepare(sources);
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      if (opts_.progress) opts_.progress("compile", 0, static_cast<int>(k), static_cast<int>(plan.kernels.size()));
      const PlanKernel& pk = plan.kernels[k];
      const int ki = static_cast<int>(k);
      // A generated kernel that fails to compile is a codegen bug: the run fails, naming it. A
      // group or op codegen does not cover, or a device limit, falls back (and says so).
      std::string why;
      if (auto& gen = generated[k]; gen) {
        auto s = add_device_unit(ki, *gen, sources[k]);
        if (s) continue;
        if (s.error().code == ErrorCode::kDevice) return s;
        why = s.error().message;
      } else {
        why = gen.error().message;
      }
      if (pk.nodes.size() == 1) {
        add_host_unit(ki, pk.nodes[0], why);
        continue;
      }
      split_[k] = true;
      res_.notes.push_back(fmt::format("kernel {} ({} nodes) ran unfused: {}", k, pk.nodes.size(), why));
      for (int ni : pk.nodes) {
        PlanKernel one;
        one.nodes = {ni};
        classify_kernel(g_, idx_, one);
        auto g1 = codegen::generate(g_, idx_, one, copts_);
        if (!g1) {
          add_host_unit(ki, ni, g1.error().message);
          continue;
        }
        auto s = add_device_unit(ki, *g1, g1->source(lang_));
        if (s) continue;
        if (s.error().code == ErrorCode::kDevice) return s;
        add_host_unit(ki, ni, s.error().message);
      }
    }
    return Ok{};
  }

  bool is_view(const Node& n) const { return gpusim::is_view(g_, n); }

  // `src`: k.source(lang_).
  Status add_device_unit(int plan_kernel, const codegen::Kernel& k, const backend::KernelSource& src) {
    if (auto s = dev_.can_run(src); !s) return s;
    // A tensor larger than one kernel argument may bind (Vulkan's maxStorageBufferRange: 128 MiB on
    // lavapipe, GPT-2's 154 MB embedding) cannot run as this kernel: the caller falls back.
    const uint64_t max_bind = dev_.info().max_buffer_bytes;
    for (const codegen::Arg& a : k.args) {
      const bool scratch = a.scratch != codegen::Scratch::kNone;
      const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(1, scratch ? a.elements : g_.tensor(a.tensor).elements())) *
                             static_cast<uint64_t>(codegen::storage_bytes(scratch ? a.storage : storage(a.tensor)));
      if (bytes > max_bind) {
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{} is {} bytes and {} binds at most {} bytes per kernel argument",
                                      scratch ? "the split-K partial sums" : fmt::format("tensor \"{}\"", g_.tensor(a.tensor).name),
                                      bytes, dev_.info().name, max_bind));
      }
    }
    auto h = dev_.compile(src);
    if (!h) return h.error();
    Unit u;
    u.plan_kernel = plan_kernel;
    u.handle = *h;
    u.groups = k.groups;
    u.cls = k.cls;
    for (const codegen::Arg& a : k.args) {
      if (a.scratch != codegen::Scratch::kNone) {
        const bool partials = a.scratch == codegen::Scratch::kPartials;
        u.args.push_back(partials ? kPartialsArg : kCountersArg);
        uint64_t& need = partials ? partials_bytes_ : counters_bytes_;
        need = std::max(need, static_cast<uint64_t>(a.elements) * static_cast<uint64_t>(codegen::storage_bytes(a.storage)));
        continue;
      }
      u.args.push_back(a.tensor);
      (a.written ? u.writes : u.reads).push_back(a.tensor);
    }
    units_.push_back(std::move(u));
    return Ok{};
  }

  void add_host_unit(int plan_kernel, int node, const std::string& why) {
    Unit u;
    u.plan_kernel = plan_kernel;
    u.device = false;
    u.node = node;
    units_.push_back(u);
    const Node& n = g_.nodes[static_cast<size_t>(node)];
    auto& e = fallbacks_[n.op_type];
    ++e.first;
    if (e.second.empty()) e.second = why;
  }

  void summarize_fallbacks() {
    for (const auto& [op, e] : fallbacks_) {
      res_.notes.push_back(fmt::format("{} {} node(s) ran on the host reference: {}", e.first, op, e.second));
    }
  }

  codegen::Storage storage(TensorId r) const { return codegen::storage_of(g_.tensor(r).dtype, copts_); }

  // The memory plan: which roots get a device buffer (every device kernel argument), which of them
  // share one (activations, by lifetime over the units), and when each host value may go.
  Status plan_memory() {
    const size_t nt = g_.tensors.size();
    const int never = std::numeric_limits<int>::max();
    std::vector<bool> has_buf(nt, false);
    for (const Unit& u : units_) {
      for (TensorId r : u.args) {
        if (r >= 0) has_buf[static_cast<size_t>(r)] = true;
      }
    }
    std::vector<int> first(nt, never), last(nt, -1);
    std::vector<bool> read_unwritten(nt, false);
    host_last_.assign(nt, -1);
    const auto read = [&](TensorId r, int ui) {
      const auto ri = static_cast<size_t>(r);
      if (first[ri] == never) read_unwritten[ri] = true;
      last[ri] = std::max(last[ri], ui);
    };
    const auto write = [&](TensorId r, int ui) {
      const auto ri = static_cast<size_t>(r);
      first[ri] = std::min(first[ri], ui);
      last[ri] = std::max(last[ri], ui);
    };
    for (size_t k = 0; k < units_.size(); ++k) {
      const Unit& u = units_[k];
      const int ui = static_cast<int>(k);
      if (u.device) {
        for (TensorId r : u.reads) read(r, ui);
        for (TensorId r : u.writes) write(r, ui);
        continue;
      }
      const Node& n = g_.nodes[static_cast<size_t>(u.node)];
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        read(root(t), ui);
        for (TensorId v : view_chain(t)) host_last_[static_cast<size_t>(v)] = ui;
      }
      for (TensorId t : n.outputs) {
        if (t != kNoTensor) write(root(t), ui);
      }
    }
    // Shared: activations a unit writes before any reads them, not returned by the graph.
    struct Live {
      TensorId r;
      int first, last;
      uint64_t bytes;
    };
    std::vector<Live> pooled;
    uint64_t dedicated = partials_bytes_ + counters_bytes_;  // split-K scratch, one of each for every kernel
    for (size_t ri = 0; ri < nt; ++ri) {
      if (!has_buf[ri]) continue;
      const Tensor& t = g_.tensors[ri];
      const auto r = static_cast<TensorId>(ri);
      const bool activation = (t.role == TensorRole::kActivation || t.role == TensorRole::kOutput) && !t.value &&
                              lazy_[ri] < 0;
      if (activation && first[ri] != never && !read_unwritten[ri] && !idx_.graph_output[ri]) {
        pooled.push_back({r, first[ri], last[ri], device_bytes(r)});
      } else {
        dedicated += device_bytes(r);
      }
    }
    std::stable_sort(pooled.begin(), pooled.end(), [](const Live& a, const Live& b) { return a.first < b.first; });
    // Greedy by start: a buffer is free once its last tenant's last use is before the start; take
    // the smallest free one that holds the tensor, else grow the largest free one, else a new one.
    std::vector<int> busy_until;
    slot_bytes_.clear();
    slot_of_.assign(nt, -1);
    for (const Live& l : pooled) {
      int best = -1;
      for (size_t k = 0; k < slot_bytes_.size(); ++k) {
        if (busy_until[k] >= l.first) continue;
        const auto ki = static_cast<int>(k);
        if (best < 0) {
          best = ki;
          continue;
        }
        const uint64_t have = slot_bytes_[k], had = slot_bytes_[static_cast<size_t>(best)];
        const bool fits = have >= l.bytes, fitted = had >= l.bytes;
        if ((fits && (!fitted || have < had)) || (!fits && !fitted && have > had)) best = ki;
      }
      if (best < 0) {
        best = static_cast<int>(slot_bytes_.size());
        slot_bytes_.push_back(0);
        busy_until.push_back(-1);
      }
      slot_bytes_[static_cast<size_t>(best)] = std::max(slot_bytes_[static_cast<size_t>(best)], l.bytes);
      busy_until[static_cast<size_t>(best)] = l.last;
      slot_of_[static_cast<size_t>(l.r)] = best;
    }
    has_buf_ = std::move(has_buf);
    uint64_t shared = 0;
    for (uint64_t b : slot_bytes_) shared += b;
    // The host: its share of the weights and inputs, plus the most one host node holds.
    uint64_t host = host_weight_and_input_bytes(), node_peak = 0;
    for (const Unit& u : units_) {
      if (u.device) continue;
      uint64_t b = 0;
      const Node& n = g_.nodes[static_cast<size_t>(u.node)];
      for (TensorId t : n.inputs) b += t == kNoTensor ? 0 : host_bytes(g_.tensor(t));
      for (TensorId t : n.outputs) b += t == kNoTensor ? 0 : host_bytes(g_.tensor(t));
      node_peak = std::max(node_peak, b);
    }
    return check_memory(dedicated + shared, host + node_peak, shared, true);
  }

  // t, then each tensor it is a view of, down to its root.
  std::vector<TensorId> view_chain(TensorId t) const {
    std::vector<TensorId> chain{t};
    for (;;) {
      const int p = idx_.producer[static_cast<size_t>(chain.back())];
      if (p < 0 || !is_view(g_.nodes[static_cast<size_t>(p)])) return chain;
      chain.push_back(g_.nodes[static_cast<size_t>(p)].inputs.at(0));
    }
  }

  Status allocate() {
    // Split-K scratch: the counters start at zero (each tile's last group sets its counter back).
    if (partials_bytes_ > 0) {
      auto p = dev_.allocate(partials_bytes_);
      if (!p) return p.error();
      partials_ = *p;
      owned_.push_back(*p);
      auto c = dev_.allocate(counters_bytes_);
      if (!c) return c.error();
      counters_ = *c;
      owned_.push_back(*c);
      const std::vector<uint8_t> zeros(counters_bytes_, 0);
      if (auto s = dev_.upload(counters_, zeros.data(), zeros.size()); !s) return s;
    }
    std::vector<backend::Buffer> slots(slot_bytes_.size());
    for (size_t k = 0; k < slot_bytes_.size(); ++k) {
      auto b = dev_.allocate(slot_bytes_[k]);
      if (!b) return b.error();
      slots[k] = *b;
      owned_.push_back(*b);
    }
    for (size_t ri = 0; ri < has_buf_.size(); ++ri) {
      if (!has_buf_[ri]) continue;
      const auto r = static_cast<TensorId>(ri);
      if (slot_of_[ri] >= 0) {
        bufs_[r] = slots[static_cast<size_t>(slot_of_[ri])];
        continue;
      }
      auto b = dev_.allocate(device_bytes(r));
      if (!b) return b.error();
      bufs_[r] = *b;
      owned_.push_back(*b);
    }
    if (opts_.poison) {  // each buffer a kernel writes, once (a shared one holds NaN for its first tenant)
      std::vector<bool> done(slots.size(), false);
      for (const Unit& u : units_) {
        for (TensorId r : u.writes) {
          const int slot = slot_of_[static_cast<size_t>(r)];
          if (slot >= 0 && done[static_cast<size_t>(slot)]) continue;
          if (slot >= 0) done[static_cast<size_t>(slot)] = true;
          if (auto s = poison(r); !s) return s;
        }
      }
    }
    return Ok{};
  }

  Status poison(TensorId r) {
    const backend::Buffer& b = bufs_.at(r);
    std::vector<uint8_t> bytes(b.bytes);
    const codegen::Storage s = storage(r);
    if (codegen::storage_is_byte(s)) std::fill(bytes.begin(), bytes.end(), uint8_t{0x7f});
    for (size_t k = 0; !codegen::storage_is_byte(s) && k + 1 < bytes.size(); k += static_cast<size_t>(codegen::storage_bytes(s))) {
      if (s == codegen::Storage::kF16) {
        const uint16_t nan = 0x7e00;
        std::memcpy(&bytes[k], &nan, 2);
      } else {
        const uint32_t v = s == codegen::Storage::kF32 ? 0x7fc00000u : 0x7fffffffu;
        std::memcpy(&bytes[k], &v, 4);
      }
    }
    return dev_.upload(b, bytes.data(), bytes.size());
  }

  // The host value of tensor t, downloading or reshaping as needed.
  Status ensure_host(TensorId t) {
    const auto ti = static_cast<size_t>(t);
    if (st_.ready[ti]) return Ok{};
    const int p = idx_.producer[ti];
    const Tensor& tt = g_.tensor(t);
    if (lazy_[ti] >= 0) {
      const auto ni = static_cast<size_t>(lazy_[ti]);
      for (TensorId in : g_.nodes[ni].inputs) {
        if (in == kNoTensor) continue;
        if (auto s = ensure_host(in); !s) return s;
      }
      return cpu::run_node(g_, ni, st_, ropts_);
    }
    if (p >= 0 && is_view(g_.nodes[static_cast<size_t>(p)])) {
      const TensorId src = g_.nodes[static_cast<size_t>(p)].inputs.at(0);
      if (auto s = ensure_host(src); !s) return s;
      st_.vals[ti] = st_.vals[static_cast<size_t>(src)];
      st_.vals[ti].shape = tt.shape;
      st_.vals[ti].dtype = tt.dtype;
      st_.ready[ti] = true;
      return Ok{};
    }
    if (held_input_[ti] >= 0) {  // a host node reads the caller's input: its values, once decoded
      const ConstTensorView& v = inputs_[static_cast<size_t>(held_input_[ti])];
      auto h = cpu::from_view(v, tt.dtype, fmt::format("input {} \"{}\"", held_input_[ti], tt.name));
      if (!h) return h.error();
      st_.vals[ti] = std::move(*h);
      st_.ready[ti] = true;
      return Ok{};
    }
    if (held_weight_[ti] != nullptr) {
      st_.vals[ti] = cpu::from_data(*held_weight_[ti]);
      st_.ready[ti] = true;
      return Ok{};
    }
    const TensorId r = root(t);
    auto it = bufs_.find(r);
    if (it == bufs_.end() || !dev_valid_[static_cast<size_t>(r)]) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("{}: tensor \"{}\" is read before any kernel computes it",
                                                              g_.source_path, tt.name));
    }
    auto bytes = download(r);
    if (!bytes) return bytes.error();
    const int64_t n = tt.elements();
    const DType stored = stored_as(storage(r));
    auto h = cpu::from_view({stored, tt.shape, bytes->data(), static_cast<size_t>(n * (dtype_bits(stored) / 8))}, tt.dtype,
                            fmt::format("tensor \"{}\"", tt.name));
    if (!h) return h.error();
    st_.vals[ti] = std::move(*h);
    st_.ready[ti] = true;
    return Ok{};
  }

  // The device buffer of root r holds its current value, uploading the held or host value if needed.
  Status ensure_device(TensorId r) {
    const auto ri = static_cast<size_t>(r);
    if (dev_valid_[ri]) return Ok{};
    if (held(r) && !st_.ready[ri]) {
      if (auto s = upload_held(r); !s) return s;
      dev_valid_[ri] = true;
      return Ok{};
    }
    if (auto s = ensure_host(r); !s) return s;
    const cpu::HostTensor& h = st_.vals[ri];
    const int64_t n = h.elements();
    auto bytes = pack(
        r, n, [&](int64_t k) { return h.real(k); }, [&](int64_t k) { return h.integer(k); });
    if (!bytes) return bytes.error();
    if (n > 0) {
      if (auto u = dev_.upload(bufs_.at(r), bytes->data(), bytes->size()); !u) return u;
    }
    dev_valid_[ri] = true;
    // The device holds it now; a host reader downloads it again (within its lifetime).
    drop_host(r);
    return Ok{};
  }

  void drop_host(TensorId t) {
    st_.vals[static_cast<size_t>(t)] = cpu::HostTensor{};
    st_.ready[static_cast<size_t>(t)] = false;
  }

  // Whether tensor t's host value can go after host unit `ui` and come back when needed: no host
  // unit after this one reads it, the graph does not return it, and it comes back: its unit or
  // its lazy host node computes it again, it is a view (taken again from its root), or the device
  // holds it.
  bool can_drop_host(TensorId t, int ui) const {
    const auto ti = static_cast<size_t>(t);
    const auto r = static_cast<size_t>(root(t));
    if (!st_.ready[ti] || host_last_[ti] > ui || idx_.graph_output[r]) return false;
    if (lazy_[ti] >= 0 || idx_.producer[ti] >= 0 || held(t)) return true;
    return has_buf_[r] && dev_valid_[r];
  }

  // Tensors whose host copy goes stale when root r is rewritten on the device.
  void invalidate_host(TensorId r) {
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      if (root(static_cast<TensorId>(t)) == r && g_.tensors[t].role == TensorRole::kActivation && !g_.tensors[t].value) {
        st_.ready[t] = false;
      }
    }
  }

  // One pass over the units; per plan kernel, its device time (timers) plus host time (wall).
  Result<std::vector<double>> run_once(int run) {
    std::vector<double> per_kernel(res_kernel_count(), 0.0);
    std::vector<int> slot_kernel;
    const std::string_view phase = run == 0 ? "warm-up" : "timed run";
    for (size_t ui = 0; ui < units_.size(); ++ui) {
      const Unit& u = units_[ui];
      if (opts_.progress) opts_.progress(phase, run, static_cast<int>(ui), static_cast<int>(units_.size()));
      if (u.device) {
        std::vector<backend::Buffer> args;
        for (TensorId r : u.reads) {
          if (auto s = ensure_device(r); !s) return s.error();
        }
        for (TensorId r : u.args) args.push_back(r == kPartialsArg ? partials_ : r == kCountersArg ? counters_ : bufs_.at(r));
        auto slot = dev_.launch(u.handle, u.groups, args, true);
        if (!slot) return slot.error();
        if (*slot >= 0) {
          if (static_cast<size_t>(*slot) >= slot_kernel.size()) slot_kernel.resize(static_cast<size_t>(*slot) + 1, -1);
          slot_kernel[static_cast<size_t>(*slot)] = u.plan_kernel;
        }
        for (TensorId r : u.writes) {
          dev_valid_[static_cast<size_t>(r)] = true;
          invalidate_host(r);
        }
        continue;
      }
      const Node& n = g_.nodes[static_cast<size_t>(u.node)];
      if (auto s = dev_.synchronize(); !s) return s.error();
      const auto start = std::chrono::steady_clock::now();
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        if (auto s = ensure_host(t); !s) return s.error();
      }
      if (auto s = cpu::run_node(g_, static_cast<size_t>(u.node), st_, ropts_); !s) return s.error();
      for (TensorId t : n.outputs) {
        if (t == kNoTensor) continue;
        dev_valid_[static_cast<size_t>(root(t))] = false;
        if (bufs_.count(root(t))) {
          if (auto s = ensure_device(root(t)); !s) return s.error();
        }
      }
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        for (TensorId v : view_chain(t)) {
          if (can_drop_host(v, static_cast<int>(ui))) drop_host(v);
        }
      }
      for (TensorId t : n.outputs) {
        if (t != kNoTensor && can_drop_host(t, static_cast<int>(ui))) drop_host(t);
      }
      per_kernel[static_cast<size_t>(u.plan_kernel)] +=
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    if (auto s = dev_.synchronize(); !s) return s.error();
    auto t = dev_.read_timers();
    if (!t) return t.error();
    for (size_t s = 0; s < t->size() && s < slot_kernel.size(); ++s) {
      if (slot_kernel[s] >= 0) per_kernel[static_cast<size_t>(slot_kernel[s])] += (*t)[s];
    }
    return per_kernel;
  }

  size_t res_kernel_count() const { return split_.size(); }

  backend::Backend& dev_;
  const Graph& g_;
  GraphIndex idx_;
  RunOptions opts_;
  cpu::RunOptions ropts_;
  codegen::Options copts_;
  backend::Language lang_;
  cpu::HostState st_;
  std::vector<ConstTensorView> inputs_;              // the caller's, in graph-input order
  std::vector<int> held_input_;                      // per tensor: the input it is, or -1
  std::vector<const TensorData*> held_weight_;       // per tensor: its file data, or nullptr
  std::vector<bool> dev_valid_;
  std::map<TensorId, backend::Buffer> bufs_;  // per root with a buffer (a shared one under several)
  uint64_t partials_bytes_ = 0, counters_bytes_ = 0;  // split-K scratch, the most any kernel uses
  backend::Buffer partials_, counters_;
  std::vector<backend::Buffer> owned_;        // each buffer once, to release
  std::vector<bool> has_buf_;                 // per root: a device kernel binds it
  std::vector<int> slot_of_;                  // per root: its shared buffer, -1 for its own
  std::vector<uint64_t> slot_bytes_;
  std::vector<int> host_last_;                // per tensor: the last unit reading it on the host, -1 none
  std::vector<int> lazy_;                     // per tensor: the node the host computes it with when first read, or -1
  std::vector<Unit> units_;
  std::vector<bool> split_;
  std::map<std::string, std::pair<int, std::string>> fallbacks_;
  RunResult res_;
};

}  // namespace

Result<RunResult> run_plan(backend::Backend& dev, const Graph& g, const Plan& plan,
                           const std::vector<ConstTensorView>& inputs, const RunOptions& opts) {
  Runner r(dev, g, opts);
  return r.run(plan, inputs);
}

namespace {

class DeviceExecutor final : public Executor {
 public:
  explicit DeviceExecutor(std::unique_ptr<backend::Backend> dev) : dev_(std::move(dev)) {}
  Result<RunResult> run(const Graph& g, const Plan& plan, const std::vector<ConstTensorView>& inputs,
                        const RunOptions& opts) override {
    return run_plan(*dev_, g, plan, inputs, opts);
  }
  const backend::DeviceInfo& info() const override { return dev_->info(); }
  backend::Backend* device() override { return dev_.get(); }
  bool is_reference() const override { return false; }
  std::string_view progress_units(std::string_view phase) const override {
    return phase == "compile" ? "kernels" : "launches";
  }

 private:
  std::unique_ptr<backend::Backend> dev_;
};

class ReferenceExecutor final : public Executor {
 public:
  ReferenceExecutor() {
    info_.backend = "cpu";
    info_.name = "cpu reference";
    info_.is_cpu = true;
  }
  Result<RunResult> run(const Graph& g, const Plan&, const std::vector<ConstTensorView>& views,
                        const RunOptions& opts) override {
    // The reference computes in fp64: the one place the inputs are decoded whole.
    if (views.size() > g.inputs.size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {} inputs given; the graph takes {}", g.source_path, views.size(), g.inputs.size()));
    }
    std::vector<cpu::HostTensor> inputs;
    for (size_t k = 0; k < views.size(); ++k) {
      const Tensor& t = g.tensor(g.inputs[k]);
      auto h = cpu::from_view(views[k], t.dtype, fmt::format("input {} \"{}\"", k, t.name));
      if (!h) return h.error();
      inputs.push_back(std::move(*h));
    }
    cpu::RunOptions o;
    o.weights = opts.weights;
    o.seed = opts.seed;
    o.max_host_bytes = opts.max_host_bytes;
    const int repeat = std::max(0, opts.repeat);
    std::vector<std::vector<double>> times(g.nodes.size());
    Result<cpu::RunResult> r = make_error(ErrorCode::kInternal, "no run");
    for (int i = 0; i <= repeat; ++i) {
      const std::string_view phase = repeat == 0 ? "run" : i == 0 ? "warm-up" : "timed run";
      if (opts.progress) o.progress = [&](int done, int total) { opts.progress(phase, i, done, total); };
      r = cpu::run_reference(g, inputs, o);
      if (!r) return r.error();
      if (i == 0 && repeat > 0) continue;
      for (size_t n = 0; n < times.size(); ++n) times[n].push_back(r->node_us[n]);
    }
    RunResult out;
    for (cpu::HostTensor& h : r->outputs) {
      Output value;
      value.host = std::move(h);
      out.outputs.push_back(std::move(value));
    }
    out.notes = std::move(r->notes);
    if (g.inputs.size() > inputs.size()) {
      out.notes.push_back(fmt::format("{} inputs filled from seed {}", g.inputs.size() - inputs.size(), opts.seed));
    }
    // Each node's median, the slowest first; nodes that took no time (folds, views) are left out.
    std::vector<KernelTiming> nodes;
    for (size_t n = 0; n < times.size(); ++n) {
      std::vector<double> t = times[n];
      std::sort(t.begin(), t.end());
      KernelTiming k;
      k.plan_kernel = -1;
      k.node = static_cast<int>(n);
      k.name = g.nodes[n].name;
      k.op_type = g.nodes[n].op_type;
      k.cls = "host";
      k.device = false;
      k.measured_us = t.empty() ? 0 : t[t.size() / 2];
      k.min_us = t.empty() ? 0 : t.front();
      k.max_us = t.empty() ? 0 : t.back();
      k.samples_us = times[n];
      out.total_us += k.measured_us;
      if (k.measured_us > 0) nodes.push_back(std::move(k));
    }
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const KernelTiming& a, const KernelTiming& b) { return a.measured_us > b.measured_us; });
    out.kernels = std::move(nodes);
    return out;
  }
  const backend::DeviceInfo& info() const override { return info_; }
  backend::Backend* device() override { return nullptr; }
  bool is_reference() const override { return true; }
  std::string_view progress_units(std::string_view) const override { return "nodes"; }

 private:
  backend::DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Executor> device_executor(std::unique_ptr<backend::Backend> dev) {
  return std::make_unique<DeviceExecutor>(std::move(dev));
}
std::unique_ptr<Executor> reference_executor() { return std::make_unique<ReferenceExecutor>(); }

cpu::HostTensor Output::values() const {
  if (!buffer) return host;
  auto h = cpu::from_view(buffer->view(), buffer->dtype, "output");
  return h ? std::move(*h) : cpu::HostTensor{};  // a buffer the run made always decodes
}

double relative_l2(const Output& a, const cpu::HostTensor& b) { return relative_l2(a.values(), b); }

double relative_l2(const cpu::HostTensor& a, const cpu::HostTensor& b) {
  if (a.shape != b.shape || a.is_sequence || b.is_sequence || a.is_string() || b.is_string()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double num = 0, den = 0;
  const int64_t n = b.elements();
  for (int64_t k = 0; k < n; ++k) {
    const double x = a.real(k), y = b.real(k);
    if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
    if (std::isnan(y) || std::isinf(y)) {
      if (x != y && !(std::isnan(x) && std::isnan(y))) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    num += (x - y) * (x - y);
    den += y * y;
  }
  if (num == 0) return 0;
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

}  // namespace gpusim::exec
