// The work of a measured framework op (measurement_work in include/gpusim/validate.h): a one-node
// graph of the ONNX op that computes what the framework op computes, priced by the op catalog and
// turned into kernel work as the planner would (node_work), so a published measurement is
// predicted by exactly the code that predicts an ONNX model.
#include <fmt/format.h>

#include <map>

#include "gpusim/kernel_work.h"
#include "gpusim/runtime.h"
#include "gpusim/validate.h"

namespace gpusim {
namespace {

struct OneNode {
  Graph g;
  Node n;

  TensorId add(const std::string& name, DType t, Shape s, TensorRole role) {
    Tensor x;
    x.name = name;
    x.dtype = t;
    x.shape = std::move(s);
    x.role = role;
    return g.add_tensor(std::move(x));
  }
  void input(const std::string& name, DType t, Shape s, TensorRole role = TensorRole::kInput) {
    n.inputs.push_back(add(name, t, std::move(s), role));
  }
  void scalar(const std::string& name, DType t, double v) {
    Tensor x;
    x.name = name;
    x.dtype = t;
    x.role = TensorRole::kConstant;
    Value val;
    val.dtype = t;
    val.reals = {v};
    x.value = val;
    n.inputs.push_back(g.add_tensor(std::move(x)));
  }
  void output(DType t, Shape s) { n.outputs.push_back(add("y", t, std::move(s), TensorRole::kOutput)); }
  void ints(const std::string& key, std::vector<int64_t> v) {
    Attribute a;
    a.kind = Attribute::Kind::kInts;
    a.ints = std::move(v);
    n.attributes[key] = a;
  }
  void i(const std::string& key, int64_t v) {
    Attribute a;
    a.kind = Attribute::Kind::kInt;
    a.i = v;
    n.attributes[key] = a;
  }
};

}  // namespace

Result<KernelWork> measurement_work(const Measurement& m) {
  if (m.work) return *m.work;
  const std::string where = fmt::format("{} ({}, op \"{}\")", m.source_ref, m.gpu, m.op);
  auto dim = [&](const char* k) -> Result<int64_t> {
    auto it = m.dims.find(k);
    if (it == m.dims.end()) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: no dim \"{}\"; the op needs it", where, k));
    }
    if (it->second < 1 || it->second > (int64_t{1} << 31)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: dim {} = {} is out of range; expected 1 to 2^31", where, k, it->second));
    }
    return it->second;
  };
  const DType t = m.dtype;
  OneNode o;
  o.g.opset = 20;
  o.n.name = m.op;
  const std::string& op = m.op;
  // With a Python scalar the op runs its tensor op's kernel; PyTorch computes x / c as x * (1 / c).
  static const std::map<std::string, std::string> kScalar = {
      {"addu", "add"}, {"mulu", "mul"}, {"divu", "mul"}, {"powu", "pow"}};
  const auto scalar = kScalar.find(op);
  const auto onnx = framework_ops().find(scalar == kScalar.end() ? op : scalar->second);
  if (onnx == framework_ops().end()) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: gpusim cannot rebuild the work of op \"{}\" from its dims; records of other "
                                  "ops need their kernel work stored (as `gpusim run --json` writes it)",
                                  where, op));
  }
  o.n.op_type = onnx->second;
  if (op == "linear") {  // nn.Linear(N, K) on x[B, M, N]: y = x W^T + b, W [K, N]
    auto b = dim("b"), mm = dim("m"), n = dim("n"), k = dim("k");
    for (auto* r : {&b, &mm, &n, &k}) {
      if (!*r) return r->error();
    }
    o.input("x", t, {*b * *mm, *n});
    o.input("w", t, {*k, *n}, TensorRole::kWeight);
    // nn.Linear's bias unless a `bias` column says 0 (F.linear without one, as a language model's
    // projections run).
    if (auto nb = m.dims.find("bias"); nb == m.dims.end() || nb->second != 0) o.input("bias", t, {*k}, TensorRole::kWeight);
    o.i("transB", 1);
    o.output(t, {*b * *mm, *k});
  } else if (op == "bmm") {  // x[B, M, N] @ y[B, N, K]
    auto b = dim("b"), mm = dim("m"), n = dim("n"), k = dim("k");
    for (auto* r : {&b, &mm, &n, &k}) {
      if (!*r) return r->error();
    }
    o.input("a", t, {*b, *mm, *n});
    o.input("b", t, {*b, *n, *k});
    o.output(t, {*b, *mm, *k});
  } else if (op == "conv") {  // nn.Conv2d(C, Cout, ks, stride, padding), bias, on x[B, C, S, S]
    auto b = dim("b"), c = dim("input_channel"), co = dim("output_channel"), ks = dim("kernel_szie"),
         s = dim("input_size"), st = dim("stride");
    for (auto* r : {&b, &c, &co, &ks, &s, &st}) {
      if (!*r) return r->error();
    }
    auto pit = m.dims.find("padding");
    const int64_t pad = pit == m.dims.end() ? 0 : pit->second;
    const int64_t out = (*s + 2 * pad - *ks) / *st + 1;
    if (pad < 0 || out < 1) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: a {}x{} window with padding {} does not fit an input of {}", where, *ks, *ks,
                                    pad, *s));
    }
    o.input("x", t, {*b, *c, *s, *s});
    o.input("w", t, {*co, *c, *ks, *ks}, TensorRole::kWeight);
    o.input("bias", t, {*co}, TensorRole::kWeight);
    o.ints("kernel_shape", {*ks, *ks});
    o.ints("strides", {*st, *st});
    o.ints("pads", {pad, pad, pad, pad});
    o.output(t, {*b, *co, out, out});
  } else {
    auto b = dim("b"), h = dim("h");
    for (auto* r : {&b, &h}) {
      if (!*r) return r->error();
    }
    const Shape x = {*b, *h};
    const std::string& base = scalar == kScalar.end() ? op : scalar->second;
    if (base == "add" || base == "mul" || base == "div" || base == "pow") {
      o.input("x", t, x);
      if (scalar == kScalar.end()) {
        o.input("y", t, x);
      } else {
        o.scalar("c", t, 0.5);
      }
    } else if (op == "relu" || op == "gelu" || op == "tanh") {
      o.input("x", t, x);
    } else if (op == "ln") {
      o.input("x", t, x);
      o.input("scale", t, {*h}, TensorRole::kWeight);
      o.input("bias", t, {*h}, TensorRole::kWeight);
      o.i("axis", -1);
    } else if (op == "softmax") {
      o.input("x", t, x);
      o.i("axis", -1);
    } else {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: gpusim cannot rebuild the work of op \"{}\" from [b, h] dims", where, op));
    }
    o.output(t, x);
  }
  o.g.nodes.push_back(o.n);
  auto w = node_work(o.g, o.g.nodes.back());
  if (!w) return make_error(ErrorCode::kUnsupported, fmt::format("{}: the op launches no kernel", where));
  // The library's row kernels, by row length (PyTorch 2.x, CUDA and ROCm alike): softmax keeps
  // rows of up to 1024 elements in registers, a warp per row (one read); longer rows go a block
  // per row in three passes (max, sum, write), each reading the row. LayerNorm reads each row
  // twice (Welford statistics, then normalize).
  if (op == "softmax") w->passes = m.dims.at("h") <= 1024 ? 1 : 3;
  if (op == "ln") w->passes = 2;
  return *w;
}

}  // namespace gpusim
