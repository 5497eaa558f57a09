// The gap between the tiles gpusim's code generator builds and the cost model's whole menu (issue
// 33): for every model and GPU, the predicted eager time over the generated tiles (what `gpusim run`
// executes) against the predicted eager time over the library menu (what a vendor library might
// run), in fp32, fp32 with TF32 allowed (both sides) and fp16; and, for the bundled models, the best plan `gpusim plan` finds against
// predict's eager figure on the same target, with the search's wall time.
//
//   bench_tile_gap [--models DIR]... [--gpus a,b,...] [--csv FILE] [--plans] [--threads N]
//
// Default models: the bundled ones (models/) and ../shared/truth/timm-e2e/models where present;
// default GPUs: two of each profile class. Prints a Markdown table per class and dtype (median and
// worst generated/library ratio, the worst model) and writes one CSV row per model, GPU and dtype.
#include <gpusim/gpusim.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "base/parallel.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {

struct GpuClass {
  const char* cls;
  std::vector<std::string> gpus;
};

const std::vector<GpuClass> kClasses = {
    {"datacenter NVIDIA", {"nvidia-h100-sxm", "nvidia-a100-40gb"}},
    {"consumer NVIDIA", {"nvidia-rtx-4090", "nvidia-rtx-3060"}},
    {"AMD Instinct", {"amd-mi300x", "amd-mi210"}},
    {"AMD Radeon", {"amd-rx-7900-xtx", "amd-rx-6800-xt"}},
    {"Apple", {"apple-m3-max"}},
    {"Intel", {"intel-arc-a770", "intel-max-1550"}},
};

struct Row {
  std::string model, gpu, cls, dtype;
  double generated_us = 0, library_us = 0;
  std::string error;
};

struct PlanRow {
  std::string model, gpu, dtype;
  double eager_us = 0, best_us = 0, search_s = 0;
  std::string error;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = s.find(',', a);
    const std::string part = s.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (!part.empty()) out.push_back(part);
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dirs;
  std::vector<std::string> gpus;
  std::string csv;
  bool plans = false;
  int threads = base::core_count();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_tile_gap: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") {
      dirs.push_back(value());
    } else if (a == "--gpus") {
      gpus = split(value());
    } else if (a == "--csv") {
      csv = value();
    } else if (a == "--plans") {
      plans = true;
    } else if (a == "--threads") {
      threads = std::max(1, std::atoi(value().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: bench_tile_gap [--models DIR]... [--gpus a,b,...] [--csv FILE] [--plans] [--threads N]\n");
      return 2;
    }
  }
  const fs::path root = GPUSIM_SOURCE_DIR;
  if (dirs.empty()) {
    dirs.push_back((root / "models").string());
    const fs::path timm = root / ".." / "shared" / "truth" / "timm-e2e" / "models";
    if (fs::is_directory(timm)) {
      dirs.push_back(timm.string());
    } else {
      std::fprintf(stderr, "bench_tile_gap: %s is absent; the bundled models only\n", timm.string().c_str());
    }
  }
  std::map<std::string, std::string> class_of;
  if (gpus.empty()) {
    for (const auto& c : kClasses) {
      for (const auto& g : c.gpus) {
        gpus.push_back(g);
        class_of[g] = c.cls;
      }
    }
  } else {
    for (const auto& c : kClasses) {
      for (const auto& g : c.gpus) class_of[g] = c.cls;
    }
  }
  std::vector<std::string> files;
  for (const auto& d : dirs) {
    std::vector<std::string> here;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() == ".onnx") here.push_back(e.path().string());
    }
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  const Session s;
  std::vector<GpuProfile> profiles;
  for (const auto& g : gpus) {
    auto p = s.gpu(g);
    if (!p) {
      std::fprintf(stderr, "bench_tile_gap: %s\n", p.error().message.c_str());
      return 1;
    }
    profiles.push_back(*p);
  }
  std::vector<Model> models(files.size());
  std::vector<std::string> open_error(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto m = s.open_model(files[i], {{"batch=1"}});
    if (m) {
      models[i] = *m;
    } else {
      open_error[i] = m.error().message;
    }
  }
  // fp32 (TF32 off, PyTorch's default), fp32 with TF32 allowed on both sides, fp16.
  struct Variant {
    DType dtype;
    bool tf32;
    const char* name;
  };
  const Variant variants[] = {{DType::kFloat32, false, "fp32"}, {DType::kFloat32, true, "tf32"}, {DType::kFloat16, false, "fp16"}};
  constexpr size_t kVariants = std::size(variants);
  std::vector<Row> rows(files.size() * profiles.size() * kVariants);
  const auto t0 = std::chrono::steady_clock::now();
  base::for_each_index(rows.size(), threads, [&](size_t i) {
    const size_t mi = i / (profiles.size() * kVariants), gi = (i / kVariants) % profiles.size(), di = i % kVariants;
    Row& r = rows[i];
    r.model = fs::path(files[mi]).stem().string();
    r.gpu = gpus[gi];
    r.cls = class_of.count(r.gpu) ? class_of[r.gpu] : "other";
    r.dtype = variants[di].name;
    if (!open_error[mi].empty()) {
      r.error = open_error[mi];
      return;
    }
    PredictRequest req;
    req.dtype = variants[di].dtype;
    const TargetOptions to{variants[di].tf32};
    auto gen = s.predict(models[mi], s.target(profiles[gi], TileSpace::kGenerated, to), req);
    auto lib = s.predict(models[mi], s.target(profiles[gi], TileSpace::kLibrary, to), req);
    if (!gen || !lib) {
      r.error = !gen ? gen.error().message : lib.error().message;
      return;
    }
    r.generated_us = gen->total_us;
    r.library_us = lib->total_us;
  });
  const double predict_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!csv.empty()) {
    if (FILE* f = std::fopen(csv.c_str(), "w")) {
      std::fprintf(f, "model,gpu,class,dtype,generated_us,library_us,ratio,error\n");
      for (const Row& r : rows) {
        std::fprintf(f, "%s,%s,%s,%s,%.3f,%.3f,%.4f,\"%s\"\n", r.model.c_str(), r.gpu.c_str(), r.cls.c_str(),
                     r.dtype.c_str(), r.generated_us, r.library_us, r.library_us > 0 ? r.generated_us / r.library_us : 0.0,
                     r.error.substr(0, 200).c_str());
      }
      std::fclose(f);
    } else {
      std::fprintf(stderr, "bench_tile_gap: cannot write %s\n", csv.c_str());
      return 1;
    }
  }
  std::printf("%zu models x %zu GPUs x 3 types (fp32, fp32 with TF32 allowed, fp16): %zu pairs of predictions in %.1f s on %d threads\n\n", files.size(),
              gpus.size(), rows.size(), predict_s, threads);
  std::printf("| class | dtype | pairs | median generated/library | worst | worst model (GPU) | within 10%% | within 25%% |\n");
  std::printf("|---|---|---:|---:|---:|---|---:|---:|\n");
  int failures = 0;
  for (const auto& c : kClasses) {
    for (const Variant& v : variants) {
      std::vector<double> ratios;
      const Row* worst = nullptr;
      int within10 = 0, within25 = 0;
      for (const Row& r : rows) {
        if (r.cls != c.cls || r.dtype != v.name) continue;
        if (!r.error.empty()) {
          ++failures;
          continue;
        }
        const double q = r.generated_us / r.library_us;
        ratios.push_back(q);
        within10 += q <= 1.10 ? 1 : 0;
        within25 += q <= 1.25 ? 1 : 0;
        if (!worst || q > worst->generated_us / worst->library_us) worst = &r;
      }
      if (ratios.empty()) continue;
      std::printf("| %s | %s | %zu | %.3f | %.3f | %s (%s) | %d | %d |\n", c.cls, v.name,
                  ratios.size(), median(ratios), worst->generated_us / worst->library_us, worst->model.c_str(),
                  worst->gpu.c_str(), within10, within25);
    }
  }
  if (failures > 0) {
    std::printf("\n%d predictions failed:\n", failures);
    int shown = 0;
    for (const Row& r : rows) {
      if (!r.error.empty() && shown++ < 10) std::printf("  %s on %s (%s): %s\n", r.model.c_str(), r.gpu.c_str(), r.dtype.c_str(), r.error.c_str());
    }
  }

  if (!plans) return 0;
  // The best plan against predict's eager figure, bundled models only, greedy search (the default).
  std::vector<std::string> bundled;
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    if (fs::equivalent(fs::path(files[i]).parent_path(), root / "models", ec) && open_error[i].empty()) {
      bundled.push_back(files[i]);
    }
  }
  std::vector<PlanRow> prow(bundled.size() * profiles.size() * kVariants);
  // One search at a time, so each one's wall time is its own.
  base::for_each_index(prow.size(), 1, [&](size_t i) {
    const size_t mi = i / (profiles.size() * kVariants), gi = (i / kVariants) % profiles.size(), di = i % kVariants;
    PlanRow& r = prow[i];
    r.model = fs::path(bundled[mi]).stem().string();
    r.gpu = gpus[gi];
    r.dtype = variants[di].name;
    auto m = s.open_model(bundled[mi], {{"batch=1"}});
    if (!m) {
      r.error = m.error().message;
      return;
    }
    const Target target = s.target(profiles[gi], TileSpace::kGenerated, {variants[di].tf32});
    PredictRequest req;
    req.dtype = variants[di].dtype;
    auto eager = s.predict(*m, target, req);
    SearchOptions so;
    so.dtype = variants[di].dtype;
    const auto a = std::chrono::steady_clock::now();
    auto found = s.plan(*m, target, so);
    r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    if (!eager || !found) {
      r.error = !eager ? eager.error().message : found.error().message;
      return;
    }
    r.eager_us = eager->total_us;
    r.best_us = found->plans.empty() ? 0 : found->plans.front().prediction.total_us;
  });
  std::printf("\n| model | dtype | GPUs | best plan / predict's eager: worst (GPU) | slower than eager | search s: median, max |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  int slower = 0;
  for (const auto& f : bundled) {
    const std::string name = fs::path(f).stem().string();
    for (const Variant& v : variants) {
      double worst = 0;
      std::string worst_gpu;
      int n = 0, here_slower = 0;
      std::vector<double> secs;
      for (const PlanRow& r : prow) {
        if (r.model != name || r.dtype != v.name) continue;
        if (!r.error.empty()) {
          std::printf("  %s on %s (%s): %s\n", r.model.c_str(), r.gpu.c_str(), r.dtype.c_str(), r.error.c_str());
          continue;
        }
        ++n;
        secs.push_back(r.search_s);
        const double q = r.best_us / r.eager_us;
        if (q > worst) {
          worst = q;
          worst_gpu = r.gpu;
        }
        here_slower += r.best_us > r.eager_us * (1 + 1e-9) ? 1 : 0;
      }
      slower += here_slower;
      std::printf("| %s | %s | %d | %.3f (%s) | %d | %.2f, %.2f |\n", name.c_str(), v.name, n,
                  worst, worst_gpu.c_str(), here_slower, median(secs),
                  secs.empty() ? 0.0 : *std::max_element(secs.begin(), secs.end()));
    }
  }
  std::printf("\nbest plans slower than predict's eager figure: %d of %zu\n", slower, prow.size());
  return 0;
}
