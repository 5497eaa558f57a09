// How `gpusim plan` scales with graph size: writes a chain of N nodes (repeated 8-node blocks,
// a transformer MLP-like pattern: MatMul, bias Add, SiLU as Sigmoid and Mul, residual Add, Softmax,
// a gate Mul and Relu; every fusion pass finds candidates in it) as a shape-only ONNX file, runs the
// gpusim CLI on it as a child process and reports wall time and peak resident memory (wait4's
// ru_maxrss) for `predict` and for `plan`.
//
//   bench_plan_scale [--gpusim PATH] [--gpu NAME] [--scheduler NAME] [--timeout S] [N...]
//
// Default N: 10000 100000 1000000. Not Google Benchmark: each figure is one child process, and the
// median of --repeat runs (default 3) is printed as a Markdown row for bench/RESULTS.md.
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

onnx::ValueInfoProto* typed(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

void add_node(onnx::GraphProto& g, const char* op, std::vector<std::string> in, std::string out, const std::string& name) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  n->add_output(out);
  if (std::strcmp(op, "Softmax") == 0) {
    auto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(-1);
  }
}

// A chain of `nodes` nodes (rounded up to whole blocks) on [64, 256] activations.
std::string write_chain(int64_t nodes, const std::string& path) {
  const int64_t rows = 64, width = 256;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("gpusim bench_plan_scale");
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("chain");
  typed(g.add_input(), "x0", {rows, width});
  std::string x = "x0";
  const int64_t blocks = (nodes + 7) / 8;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::string p = "b" + std::to_string(b) + "_";
    onnx::TensorProto* w = g.add_initializer();
    w->set_name(p + "w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(width);
    w->add_dims(width);
    onnx::TensorProto* bias = g.add_initializer();
    bias->set_name(p + "bias");
    bias->set_data_type(onnx::TensorProto::FLOAT);
    bias->add_dims(width);
    add_node(g, "MatMul", {x, p + "w"}, p + "mm", p + "MatMul");
    add_node(g, "Add", {p + "mm", p + "bias"}, p + "a", p + "Add");
    add_node(g, "Sigmoid", {p + "a"}, p + "s", p + "Sigmoid");
    add_node(g, "Mul", {p + "a", p + "s"}, p + "silu", p + "Mul");
    add_node(g, "Add", {p + "silu", x}, p + "r", p + "Residual");
    add_node(g, "Softmax", {p + "r"}, p + "sm", p + "Softmax");
    add_node(g, "Mul", {p + "sm", p + "r"}, p + "gate", p + "Gate");
    add_node(g, "Relu", {p + "gate"}, p + "y", p + "Relu");
    x = p + "y";
  }
  typed(g.add_output(), x, {rows, width});
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  return path;
}

struct Run {
  double seconds = 0;
  double peak_mb = 0;
  int status = 0;  // 0 ok, else the exit code, or 128 + signal, or -1 timed out
};

Run run_child(const std::vector<std::string>& argv, int timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen("/dev/null", "w", stdout)) _exit(126);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    alarm(static_cast<unsigned>(timeout_s));
    execv(a[0], a.data());
    _exit(127);
  }
  int st = 0;
  rusage ru{};
  wait4(pid, &st, 0, &ru);
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.status = WTERMSIG(st) == SIGALRM ? -1 : 128 + WTERMSIG(st);
  return r;
}

Run median(std::vector<Run> v) {
  std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  Run m = v[v.size() / 2];
  for (const Run& r : v) m.status = m.status ? m.status : r.status;
  return m;
}

std::string cell(const Run& r) {
  char buf[96];
  if (r.status == -1) return "timed out";
  if (r.status != 0) {
    std::snprintf(buf, sizeof buf, "failed (status %d) after %.1f s, %.0f MB", r.status, r.seconds, r.peak_mb);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.2f s, %.0f MB", r.seconds, r.peak_mb);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpusim = GPUSIM_CLI, gpu = "nvidia-a100-40gb", scheduler = "greedy";
  int timeout = 600, repeat = 3;
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_plan_scale: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--gpusim") gpusim = next();
    else if (a == "--gpu") gpu = next();
    else if (a == "--scheduler") scheduler = next();
    else if (a == "--timeout") timeout = std::atoi(next().c_str());
    else if (a == "--repeat") repeat = std::max(1, std::atoi(next().c_str()));
    else if (!a.empty() && a.find_first_not_of("0123456789") == std::string::npos) sizes.push_back(std::atoll(a.c_str()));
    else {
      std::fprintf(stderr, "bench_plan_scale: unknown argument \"%s\"; usage: bench_plan_scale [--gpusim PATH] "
                           "[--gpu NAME] [--scheduler NAME] [--timeout S] [--repeat R] [N...]\n", a.c_str());
      return 2;
    }
  }
  if (sizes.empty()) sizes = {10000, 100000, 1000000};
  char dir_template[] = "/tmp/gpusim_plan_scale_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) {
    std::perror("bench_plan_scale: mkdtemp");
    return 1;
  }
  std::printf("| nodes | file | predict (time, peak RSS) | plan --scheduler %s (time, peak RSS) |\n|---|---|---|---|\n",
              scheduler.c_str());
  for (int64_t n : sizes) {
    const std::string path = write_chain(n, std::string(dir) + "/chain_" + std::to_string(n) + ".onnx");
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    const double mb = static_cast<double>(f.tellg()) / 1e6;
    std::vector<Run> pr, pl;
    for (int k = 0; k < repeat; ++k) {
      pr.push_back(run_child({gpusim, "predict", path, "--gpu", gpu}, timeout));
      pl.push_back(run_child({gpusim, "plan", path, "--gpu", gpu, "--scheduler", scheduler}, timeout));
    }
    std::printf("| %lld | %.1f MB | %s | %s |\n", static_cast<long long>((n + 7) / 8 * 8), mb, cell(median(pr)).c_str(),
                cell(median(pl)).c_str());
    std::fflush(stdout);
    if (!std::getenv("GPUSIM_KEEP_CHAIN")) std::remove(path.c_str());
  }
  rmdir(dir);
  return 0;
}
