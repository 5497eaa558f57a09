// A planner-only engine: imports a model shape-only, loads a GPU profile, and plans it over the
// library tile space (the cost model's menu, as vendor libraries run kernels) with the core tier
// alone — the headers it includes declare nothing of the executor.
//   planner_consumer MODEL.onnx GPU [NAME=VALUE ...]
#include <cstdio>

#include <gpusim/data_dirs.h>
#include <gpusim/gpu_profile.h>
#include <gpusim/onnx_import.h>
#include <gpusim/predict.h>
#include <gpusim/scheduler.h>
#include <gpusim/target.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: planner_consumer MODEL.onnx GPU [NAME=VALUE ...]\n");
    return 2;
  }
  gpusim::ImportOptions io;
  for (int i = 3; i < argc; ++i) {
    const std::string d = argv[i];
    const size_t eq = d.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "%s: give dims as NAME=VALUE\n", argv[i]);
      return 2;
    }
    io.dims[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
  }
  auto g = gpusim::import_onnx(argv[1], io);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().message.c_str());
    return 1;
  }
  auto gpu = gpusim::find_profile(argv[2], gpusim::default_profile_dirs());  // the installed profiles
  if (!gpu) {
    std::fprintf(stderr, "%s\n", gpu.error().message.c_str());
    return 1;
  }
  const gpusim::Target target = gpusim::library_target(*gpu);
  auto p = gpusim::predict(*g, target, {gpusim::DType::kFloat16});
  if (!p) {
    std::fprintf(stderr, "%s\n", p.error().message.c_str());
    return 1;
  }
  std::printf("eager  %.3f ms in %zu kernels on %s (%s)\n", p->total_us / 1e3, p->kernels.size(),
              gpu->display_name.c_str(), p->tiles.c_str());
  gpusim::SearchOptions so;
  so.dtype = gpusim::DType::kFloat16;
  auto r = gpusim::search(*g, target, so);
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    return 1;
  }
  std::printf("fused  %.3f ms in %zu kernels (greedy; eager baseline %.3f ms)\n", r->plans.front().prediction.total_us / 1e3,
              r->plans.front().plan.kernels.size(), r->eager.total_us / 1e3);
  return r->eager.total_us == p->total_us ? 0 : 1;
}
