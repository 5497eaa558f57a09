// predict_consumer MODEL.onnx GPU [DIM=VALUE...]: the smallest use of the installed library. It
// predicts MODEL on GPU, searches a fused plan, prints both, then runs the model once on the CPU
// reference with buffers of its own. Exit 0 on success; errors print the library's message.
#include <gpusim/gpusim.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: predict_consumer MODEL.onnx GPU [DIM=VALUE...]\n");
    return 2;
  }
  gpusim::Session session;  // profiles: $GPUSIM_PROFILE_PATH, ~/.config/gpusim/profiles, installed
  gpusim::ModelOptions mo;
  for (int i = 3; i < argc; ++i) mo.dims.emplace_back(argv[i]);
  auto model = session.open_model(argv[1], mo);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  auto gpu = session.gpu(argv[2]);
  if (!gpu) {
    std::fprintf(stderr, "%s\n", gpu.error().message.c_str());
    return 1;
  }
  gpusim::PredictRequest req;
  req.dtype = gpusim::DType::kFloat16;
  // The tiles gpusim's code generator builds on this GPU: what `gpusim predict` and `gpusim plan` price.
  const gpusim::Target target = session.target(*gpu, gpusim::TileSpace::kGenerated);
  auto p = session.predict(*model, target, req);
  if (!p) {
    std::fprintf(stderr, "%s\n", p.error().message.c_str());
    return 1;
  }
  std::printf("eager  %.3f ms in %zu kernels on %s\n", p->total_us / 1e3, p->kernels.size(), gpu->display_name.c_str());

  gpusim::SearchOptions so;
  so.dtype = gpusim::DType::kFloat16;
  auto plans = session.plan(*model, target, so);
  if (!plans) {
    std::fprintf(stderr, "%s\n", plans.error().message.c_str());
    return 1;
  }
  const auto& best = plans->plans.front();
  std::printf("fused  %.3f ms in %zu kernels (%.2fx)\n", best.prediction.total_us / 1e3, best.plan.kernels.size(),
              plans->eager.total_us / best.prediction.total_us);

  // Run once on the CPU reference with our own buffers (inputs left out are filled from the seed).
  auto program = session.compile(*model, {});
  if (!program) {
    std::fprintf(stderr, "%s\n", program.error().message.c_str());
    return 1;
  }
  std::vector<std::vector<unsigned char>> storage;
  std::vector<gpusim::TensorView> outs;
  for (const gpusim::TensorSpec& o : program->outputs()) {
    storage.emplace_back(o.size_bytes);
    outs.push_back({o.dtype, o.shape, storage.back().data(), o.size_bytes});
  }
  if (auto s = program->run({}, outs); !s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  std::printf("ran    %zu outputs on the cpu reference (gpusim %s)\n", outs.size(), gpusim::version());
  return 0;
}
