// The four edges where outside input enters gpusim, each as one function that runs an input through
// everything a user's command would do with it. The fuzz targets (fuzz/fuzz_*.cpp) call them on
// mutated inputs; the regression test (tests/fuzz/test_bad_inputs.cpp) calls them on the inputs in
// tests/data/bad/ and checks each answer. An edge returns the first error's message, or "" when the
// input went through; it must never throw, crash or run without bound.
//
// Shared state (a profile, a model, a service) is loaded once per process from the build tree's data
// and the bundled models (GPUSIM_SOURCE_DIR).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/data_dirs.h"
#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/graph_summary.h"
#include "gpusim/device_plan.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/onnx_import.h"
#include "gpusim/plan.h"
#include "gpusim/predict.h"
#include "service.h"

namespace gpusim::edges {

[[noreturn]] inline void setup_failed(const std::string& what) {
  std::fprintf(stderr, "edges setup: %s\n", what.c_str());
  std::abort();
}

inline const GpuProfile& profile() {
  static const GpuProfile p = [] {
    auto r = find_profile("nvidia-rtx-3060", default_profile_dirs());
    if (!r) setup_failed(r.error().message);
    return *r;
  }();
  return p;
}

// The bundled MobileNet-V2: the graph plans are written for and profiles are tried on.
inline const Graph& model() {
  static const Graph g = [] {
    auto r = import_onnx(std::string(GPUSIM_SOURCE_DIR) + "/models/mobilenet_v2.onnx");
    if (!r) setup_failed(r.error().message);
    return *r;
  }();
  return g;
}

// ONNX bytes: import with shape inference, the summary `gpusim inspect` prints, the eager prediction.
inline std::string onnx(std::string_view bytes) {
  ImportOptions o;
  o.other_dims = 2;  // every symbolic dim, so mutants of any seed get past dim resolution
  auto g = import_onnx_bytes(bytes, "fuzz.onnx", o);
  if (!g) return g.error().message;
  (void)summarize(*g);
  static const Target target = library_target(profile());
  auto p = predict(*g, target);
  return p ? "" : p.error().message;
}

// A profile's YAML: load and validate (`extends:` resolving against the bundled profiles), then a
// prediction with it, which every profile that loads must support.
inline std::string profile_yaml(std::string_view text) {
  static const std::vector<std::string> dirs = default_profile_dirs();
  auto p = load_profile_yaml(std::string(text), "fuzz", dirs);
  if (!p) return p.error().message;
  auto r = predict(model(), library_target(*p));
  return r ? "" : r.error().message;
}

// A plan document for MobileNet-V2: parse, validate, predict (`gpusim predict --plan`).
inline std::string plan_json(std::string_view text) {
  static const DeviceModel dev = make_device(profile());
  auto p = plan_from_json(std::string(text), "fuzz.json", model());
  if (!p) return p.error().message;
  if (auto ok = validate_plan(*p, model(), dev); !ok) return ok.error().message;
  auto r = predict_plan(model(), *p, profile());
  return r ? "" : r.error().message;
}

// A request to gpusim serve: the first byte picks the POST route (its value mod 5: predict, compare,
// plan, validate, models) and the body's Content-Type (value / 5 mod 3: JSON, raw ONNX bytes, or
// text/plain, which every route refuses); the rest is the body, parsed under the server's JSON
// depth and value limits. Answers "STATUS BODY" for anything but 200 ("" for 200).
inline std::string serve_request(std::string_view data) {
  static serve::Service svc([] {
    serve::ServiceOptions o;
    o.workers = 1;
    o.max_body_bytes = 4 << 20;
    o.max_model_bytes = 4 << 20;
    return o;
  }());
  static const char* const kRoutes[] = {"/v1/predict", "/v1/compare", "/v1/plan", "/v1/validate", "/v1/models"};
  if (data.empty()) return "";
  const auto first = static_cast<unsigned char>(data[0]);
  static const char* const kTypes[] = {"application/json", "application/octet-stream", "text/plain"};
  const auto a = svc.answer(kRoutes[first % 5], std::string(data.substr(1)), kTypes[(first / 5) % 3]);
  return a.status == 200 ? "" : std::to_string(a.status) + " " + a.body;
}

}  // namespace gpusim::edges
