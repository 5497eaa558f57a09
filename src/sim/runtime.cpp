// Runtimes (include/gpusim/runtime.h): built-ins and YAML files of schema gpusim.runtime/1.
#include "gpusim/runtime.h"

#include "gpusim/gpu_profile.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace gpusim {
namespace {

namespace fs = std::filesystem;

RuntimeModel builtin_device() {
  RuntimeModel r;
  r.name = "gpusim";
  r.description = "device time of each kernel, as gpusim's executor and calibration time it: no host time";
  r.combine = "device";
  return r;
}

RuntimeModel builtin_cuda_graph() {
  RuntimeModel r;
  r.name = "cuda-graph";
  r.description = "kernels replayed from a CUDA graph: no host dispatch, about 1 us between kernels";
  r.combine = "serial";
  r.extra_kernel_us = 1.0;
  r.default_us = 1.0;
  return r;
}

Error bad(const std::string& path, const std::string& key, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", path, key, why));
}

}  // namespace

double RuntimeModel::host_us(const std::string& op, const std::string& op_class, int kernels) const {
  double h = default_us;
  if (auto it = op_us.find(op); it != op_us.end()) {
    h = it->second;
  } else if (auto jt = class_us.find(op_class); jt != class_us.end()) {
    h = jt->second;
  }
  return h + std::max(0, kernels - 1) * extra_kernel_us;
}

double RuntimeModel::op_time_us(const std::string& op, const std::string& op_class, double kernels_us,
                                int kernels) const {
  if (combine == "device") return kernels_us;
  const double host = host_us(op, op_class, kernels);
  if (combine == "serial") return host + kernels_us;
  return std::max(host, kernels_us + launch_latency_us);
}

const std::map<std::string, std::string>& framework_ops() {
  static const std::map<std::string, std::string> kOps = {
      {"add", "Add"},   {"mul", "Mul"},   {"div", "Div"},   {"pow", "Pow"},         {"relu", "Relu"},
      {"gelu", "Gelu"}, {"tanh", "Tanh"}, {"conv", "Conv"}, {"linear", "Gemm"},     {"bmm", "MatMul"},
      {"ln", "LayerNormalization"},       {"softmax", "Softmax"}};
  return kOps;
}

std::vector<std::string> default_runtime_dirs() { return search_dirs("GPUSIM_RUNTIME_PATH", "runtimes", "runtimes"); }

Result<RuntimeModel> load_runtime(const std::string& path) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the runtime file", path));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not valid YAML ({})", path, e.what()));
  }
  if (!y.IsMap()) return bad(path, "(top level)", "expected a map with schema: gpusim.runtime/1");
  static const std::set<std::string> kKeys = {"schema", "name", "description", "combine", "default_us", "class_us",
                                              "op_us", "extra_kernel_us", "launch_latency_us", "sources", "fit"};
  RuntimeModel r;
  r.source_path = path;
  try {
    for (const auto& kv : y) {
      const std::string k = kv.first.as<std::string>();
      if (!kKeys.count(k)) {
        return bad(path, k, "unknown key; allowed: schema, name, description, combine, default_us, class_us, op_us, "
                            "extra_kernel_us, launch_latency_us, sources, fit");
      }
    }
    const std::string schema = y["schema"] ? y["schema"].as<std::string>() : "";
    if (schema != "gpusim.runtime/1") {
      return bad(path, "schema", fmt::format("\"{}\"; expected gpusim.runtime/1", schema));
    }
    if (!y["name"]) return bad(path, "name", "missing; give the runtime's name (the file's stem)");
    r.name = y["name"].as<std::string>();
    if (y["description"]) r.description = y["description"].as<std::string>();
    r.combine = y["combine"] ? y["combine"].as<std::string>() : "overlap";
    if (r.combine != "overlap" && r.combine != "serial" && r.combine != "device") {
      return bad(path, "combine", fmt::format("\"{}\"; expected overlap, serial or device", r.combine));
    }
    auto num = [&](const YAML::Node& n, const std::string& key, double& out) -> Result<Ok> {
      if (!n) return Ok{};
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        return bad(path, key, fmt::format("\"{}\" is not a number of microseconds", n.Scalar()));
      }
      if (!(v >= 0 && v <= 1e6)) return bad(path, key, fmt::format("{} is out of range; expected 0 to 1e6 us", v));
      out = v;
      return Ok{};
    };
    for (auto [key, out] : {std::pair<const char*, double*>{"default_us", &r.default_us},
                            {"extra_kernel_us", &r.extra_kernel_us},
                            {"launch_latency_us", &r.launch_latency_us}}) {
      if (auto s = num(y[key], key, *out); !s) return s.error();
    }
    for (auto [key, out] : {std::pair<const char*, std::map<std::string, double>*>{"op_us", &r.op_us},
                            {"class_us", &r.class_us}}) {
      const YAML::Node m = y[key];
      if (!m) continue;
      if (!m.IsMap()) return bad(path, key, "expected a map of name: microseconds");
      for (const auto& kv : m) {
        const std::string name = kv.first.as<std::string>();
        double v = 0;
        if (auto s = num(kv.second, fmt::format("{}.{}", key, name), v); !s) return s.error();
        (*out)[name] = v;
      }
    }
  } catch (const YAML::Exception& e) {
    return bad(path, "(document)", e.what());
  }
  return r;
}

std::vector<std::string> list_runtimes(const std::vector<std::string>& dirs) {
  std::set<std::string> names = {"gpusim", "cuda-graph"};
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".yaml") names.insert(it->path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

Result<RuntimeModel> find_runtime(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  if (name_or_path.size() > 5 && name_or_path.ends_with(".yaml")) return load_runtime(name_or_path);
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + name_or_path + ".yaml";
    std::error_code ec;
    if (fs::exists(p, ec)) return load_runtime(p);
  }
  if (name_or_path == "gpusim") return builtin_device();
  if (name_or_path == "cuda-graph") return builtin_cuda_graph();
  std::string known;
  for (const std::string& n : list_runtimes(dirs)) known += (known.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("runtime \"{}\" is unknown; known runtimes: {} (or give a path to a gpusim.runtime/1 "
                                "YAML file)",
                                name_or_path, known));
}

}  // namespace gpusim
