// The codegen kernels calibration measures: real GEMMs, convolutions, reductions, normalizations
// and fused elementwise chains of several sizes, generated and run by the executor exactly as
// `gpusim run` runs them, with the tile the base profile's cost model picks. In each class, sorted
// by size, every other kernel is held out of the fit: those judge it.
#include <fmt/format.h>

#include <algorithm>

#include "executor.h"
#include "graphs.h"
#include "gpusim/kernel_work.h"
#include "gpusim/plan.h"
#include "session.h"

namespace gpusim::calibrate {
namespace {

TensorId add(Graph& g, const std::string& name, Shape s, TensorRole role) {
  Tensor t;
  t.name = name;
  t.dtype = DType::kFloat32;
  t.shape = std::move(s);
  t.role = role;
  return g.add_tensor(t);
}

Node node(const std::string& op, std::vector<TensorId> in, std::vector<TensorId> out) {
  Node n;
  n.name = op + "_" + std::to_string(out.front());
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

Attribute one(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

OneKernelGraph finish(std::string cls, std::string name, Graph g, std::vector<int> nodes, double work) {
  g.opset = 17;
  g.source_path = "calibration kernel " + name;
  g.name = name;
  return {std::move(cls), std::move(name), std::move(g), std::move(nodes), work};
}

}  // namespace

OneKernelGraph matmul_graph(int64_t m, int64_t n, int64_t k) {
  Graph g;
  const TensorId a = add(g, "a", {m, k}, TensorRole::kInput);
  const TensorId w = add(g, "w", {k, n}, TensorRole::kWeight);
  const TensorId y = add(g, "y", {m, n}, TensorRole::kOutput);
  g.inputs = {a};
  g.outputs = {y};
  g.nodes.push_back(node("MatMul", {a, w}, {y}));
  return finish("gemm", fmt::format("MatMul {}x{}x{}", m, n, k), std::move(g), {0}, 2.0 * m * n * k);
}

OneKernelGraph conv_graph(int64_t cin, int64_t cout, int64_t hw, int64_t ks) {
  Graph g;
  const TensorId x = add(g, "x", {1, cin, hw, hw}, TensorRole::kInput);
  const TensorId w = add(g, "w", {cout, cin, ks, ks}, TensorRole::kWeight);
  const TensorId y = add(g, "y", {1, cout, hw, hw}, TensorRole::kOutput);
  g.inputs = {x};
  g.outputs = {y};
  Node c = node("Conv", {x, w}, {y});
  c.attributes["kernel_shape"] = ints({ks, ks});
  c.attributes["pads"] = ints({ks / 2, ks / 2, ks / 2, ks / 2});
  g.nodes.push_back(c);
  return finish("conv", fmt::format("Conv {}x{} {}->{} at {}x{}", ks, ks, cin, cout, hw, hw), std::move(g), {0},
                2.0 * cin * cout * ks * ks * hw * hw);
}

OneKernelGraph softmax_graph(int64_t rows, int64_t cols) {
  Graph g;
  const TensorId x = add(g, "x", {rows, cols}, TensorRole::kInput);
  const TensorId y = add(g, "y", {rows, cols}, TensorRole::kOutput);
  g.inputs = {x};
  g.outputs = {y};
  Node n = node("Softmax", {x}, {y});
  n.attributes["axis"] = one(-1);
  g.nodes.push_back(n);
  return finish("reduction", fmt::format("Softmax {}x{}", rows, cols), std::move(g), {0}, 8.0 * rows * cols);
}

OneKernelGraph reduce_mean_graph(int64_t rows, int64_t cols) {
  Graph g;
  const TensorId x = add(g, "x", {rows, cols}, TensorRole::kInput);
  const TensorId y = add(g, "y", {rows, 1}, TensorRole::kOutput);
  g.inputs = {x};
  g.outputs = {y};
  Node n = node("ReduceMean", {x}, {y});
  n.attributes["axes"] = ints({1});
  n.attributes["keepdims"] = one(1);
  g.nodes.push_back(n);
  return finish("reduction", fmt::format("ReduceMean {}x{}", rows, cols), std::move(g), {0}, 4.0 * rows * cols);
}

// x * sigmoid(x) * k + x, fused into one kernel (a SiLU with a scale and a residual).
OneKernelGraph silu_chain_graph(int64_t n) {
  Graph g;
  const TensorId x = add(g, "x", {n}, TensorRole::kInput);
  const TensorId k = add(g, "k", {n}, TensorRole::kWeight);
  const TensorId s = add(g, "s", {n}, TensorRole::kActivation);
  const TensorId m = add(g, "m", {n}, TensorRole::kActivation);
  const TensorId mk = add(g, "mk", {n}, TensorRole::kActivation);
  const TensorId y = add(g, "y", {n}, TensorRole::kOutput);
  g.inputs = {x};
  g.outputs = {y};
  g.nodes.push_back(node("Sigmoid", {x}, {s}));
  g.nodes.push_back(node("Mul", {x, s}, {m}));
  g.nodes.push_back(node("Mul", {m, k}, {mk}));
  g.nodes.push_back(node("Add", {mk, x}, {y}));
  return finish("elementwise", fmt::format("SiLU chain x{}", n), std::move(g), {0, 1, 2, 3}, 12.0 * n);
}

namespace {

std::vector<OneKernelGraph> cases(bool quick) {
  std::vector<OneKernelGraph> v;
  const std::vector<int64_t> gemm = quick ? std::vector<int64_t>{64, 128, 192, 256} : std::vector<int64_t>{64, 96, 128, 192, 256, 320, 384};
  for (int64_t n : gemm) v.push_back(matmul_graph(n, n, n));
  v.push_back(matmul_graph(1024, 64, 128));
  if (!quick) v.push_back(matmul_graph(64, 512, 256));
  v.push_back(conv_graph(16, 16, 32, 3));
  v.push_back(conv_graph(32, 32, 28, 3));
  v.push_back(conv_graph(64, 64, 14, 3));
  v.push_back(conv_graph(64, 128, 28, 1));
  if (!quick) {
    v.push_back(conv_graph(32, 32, 56, 3));
    v.push_back(conv_graph(128, 128, 14, 3));
  }
  v.push_back(softmax_graph(256, 1024));
  v.push_back(softmax_graph(1024, 256));
  v.push_back(reduce_mean_graph(512, 2048));
  v.push_back(reduce_mean_graph(4096, 128));
  if (!quick) {
    v.push_back(softmax_graph(64, 4096));
    v.push_back(reduce_mean_graph(1024, 1024));
  }
  const std::vector<int64_t> el = quick ? std::vector<int64_t>{1 << 16, 1 << 18, 1 << 20, 1 << 22}
                                        : std::vector<int64_t>{1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21, 1 << 22, 1 << 23};
  for (int64_t n : el) v.push_back(silu_chain_graph(n));
  // Every other kernel of each class, by size, is held out.
  std::stable_sort(v.begin(), v.end(), [](const OneKernelGraph& a, const OneKernelGraph& b) {
    return a.cls != b.cls ? a.cls < b.cls : a.work < b.work;
  });
  return v;
}

}  // namespace

Result<exec::RunResult> run_kernel_graph(Session& s, const OneKernelGraph& c, exec::RunOptions o, KernelWork* work,
                                         TileConfig* tile) {
  const GraphIndex idx = index_graph(c.g);
  PlanKernel pk;
  pk.nodes = c.nodes;
  classify_kernel(c.g, idx, pk);
  *work = plan_kernel_work(c.g, idx, pk);
  const codegen::TargetCapability cap(codegen::target_options(s.dev().info(), o.fp16_storage, o.matrix));
  pk.tile = best_generated_tile(*work, s.model, cap);
  *tile = pk.tile;
  Plan plan;
  plan.kernels.push_back(pk);
  o.repeat = std::max(3, s.disc.repeats / 2);
  o.before_timed_run = [&s]() { return s.timer.flush(); };
  return exec::run_plan(s.dev(), c.g, plan, {}, o);
}

Status bench_codegen_kernels(Session& s) {
  std::vector<OneKernelGraph> all = cases(s.quick);
  std::map<std::string, int> seen;
  for (size_t i = 0; i < all.size(); ++i) {
    OneKernelGraph& c = all[i];
    if (s.progress) s.progress(-1, fmt::format("codegen kernel {}/{}: {}", i + 1, all.size(), c.name));
    exec::RunOptions o;
    o.seed = 17 + i;
    KernelWork work;
    TileConfig tile;
    auto r = run_kernel_graph(s, c, o, &work, &tile);
    if (!r) return r.error();
    const exec::KernelTiming& kt = r->kernels.front();
    if (!kt.device || kt.launches != 1 || !kt.fused_as_planned) {
      s.notes.push_back(fmt::format("{}: not used (it ran as {} launches{}), so the simulator's one-kernel price "
                                    "does not apply", c.name, kt.launches, kt.device ? "" : " on the host"));
      continue;
    }
    Observation ob;
    ob.cls = c.cls;
    ob.name = c.name;
    ob.held_out = seen[c.cls]++ % 2 == 1;
    ob.work = work;
    ob.tile = tile;
    ob.stats = summarize(kt.samples_us);
    s.observations.push_back(std::move(ob));
  }
  return Ok{};
}

}  // namespace gpusim::calibrate
