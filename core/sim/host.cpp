// Host profiles and the host model (include/gpusim/host.h): YAML files of schema gpusim.host/1 and
// gpusim.host-model/1 in runtimes/hosts/, inline descriptions, and how a host scales a runtime.
#include "gpusim/host.h"

#include "base/closest.h"
#include "gpusim/data_dirs.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace gpusim {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModelFile = "_model.yaml";
const std::vector<std::string> kOs = {"linux", "windows", "macos"};
const std::vector<std::string> kDrivers = {"linux", "wddm", "tcc", "wsl2", "macos"};

Error bad(const std::string& where, const std::string& key, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", where, key, why));
}

bool one_of(const std::string& v, const std::vector<std::string>& allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

// The operating system a driver model belongs to: Windows' three, else the system of that name.
std::string os_of_driver(const std::string& driver) {
  return driver == "wddm" || driver == "tcc" || driver == "wsl2" ? "windows" : driver;
}

// The fields a description and a file share: checked the same way, errors naming `where`.
Result<Ok> set_field(HostProfile& h, const std::string& where, const std::string& key, const std::string& value) {
  if (key == "os") {
    if (!one_of(value, kOs)) return bad(where, key, fmt::format("\"{}\"; expected {}", value, fmt::join(kOs, ", ")));
    h.os = value;
  } else if (key == "driver" || key == "driver_model") {
    if (!one_of(value, kDrivers)) {
      return bad(where, key, fmt::format("\"{}\"; expected {} (wddm: Windows' display driver model, tcc: its compute-only mode, wsl2: Linux under "
                                         "Windows)",
                                         value, fmt::join(kDrivers, ", ")));
    }
    h.driver_model = value;
  } else if (key == "single_thread") {
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(value, &used);
    } catch (...) {
      used = 0;
    }
    if (used != value.size() || value.empty() || !(v >= 100 && v <= 20000)) {
      return bad(where, key, fmt::format("\"{}\"; expected the CPU's Geekbench 6 single-core score, a number from 100 "
                                         "to 20000 (browser.geekbench.com lists every CPU's)",
                                         value));
    }
    h.single_thread = v;
  } else if (key == "cpu") {
    h.cpu = value;
  } else if (key == "framework") {
    h.framework = value;
  } else {
    return bad(where, key, "unknown key; a host is described by os, driver, single_thread, cpu and framework");
  }
  return Ok{};
}

// The operating system and driver model agree (or one follows from the other).
Result<Ok> settle_os(HostProfile& h, const std::string& where) {
  if (h.os.empty()) h.os = h.driver_model.empty() ? "linux" : os_of_driver(h.driver_model);
  if (h.driver_model.empty()) h.driver_model = h.os == "windows" ? "wddm" : h.os;
  if (os_of_driver(h.driver_model) != h.os) {
    return bad(where, "driver", fmt::format("\"{}\" is not a driver model of {} (expected {})", h.driver_model, h.os,
                                            h.os == "windows" ? "wddm, tcc or wsl2" : h.os));
  }
  return Ok{};
}

Result<YAML::Node> read_yaml(const std::string& path, const char* what) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the {} file", path, what));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: not valid YAML ({})", path, e.what()));
  }
}

Result<std::map<std::string, std::string>> read_sources(const YAML::Node& n, const std::string& path) {
  std::map<std::string, std::string> out;
  if (!n) return out;
  if (!n.IsMap()) return bad(path, "sources", "expected a map of figure: where it comes from");
  for (const auto& kv : n) {
    if (!kv.second.IsScalar()) return bad(path, "sources." + kv.first.Scalar(), "expected text");
    out[kv.first.Scalar()] = kv.second.Scalar();
  }
  return out;
}

}  // namespace

std::vector<std::string> default_host_dirs() { return search_dirs("GPUSIM_HOST_PATH", "hosts", "runtimes/hosts"); }

Result<HostProfile> load_host(const std::string& path) {
  auto y = read_yaml(path, "host");
  if (!y) return y.error();
  if (!y->IsMap()) return bad(path, "(top level)", "expected a map with schema: gpusim.host/1");
  HostProfile h;
  h.source_path = path;
  try {
    static const std::set<std::string> kKeys = {"schema", "name",   "description",   "cpu",      "single_thread",
                                                "os",     "driver_model", "framework", "sources"};
    for (const auto& kv : *y) {
      if (!kKeys.count(kv.first.Scalar())) {
        return bad(path, kv.first.Scalar(), "unknown key; allowed: schema, name, description, cpu, single_thread, os, "
                                            "driver_model, framework, sources");
      }
      if (kv.first.Scalar() != "sources" && !kv.second.IsScalar()) {
        return bad(path, kv.first.Scalar(), "expected a single value");
      }
    }
    const std::string schema = (*y)["schema"] ? (*y)["schema"].Scalar() : "";
    if (schema != "gpusim.host/1") return bad(path, "schema", fmt::format("\"{}\"; expected gpusim.host/1", schema));
    if (!(*y)["name"]) return bad(path, "name", "missing; give the host's name (the file's stem)");
    h.name = (*y)["name"].Scalar();
    if ((*y)["description"]) h.description = (*y)["description"].Scalar();
    for (const char* key : {"os", "driver_model", "single_thread", "cpu", "framework"}) {
      if (const YAML::Node n = (*y)[key]) {
        if (auto s = set_field(h, path, key, n.Scalar()); !s) return s.error();
      }
    }
    if (!(*y)["os"]) return bad(path, "os", fmt::format("missing; expected {}", fmt::join(kOs, ", ")));
    if (auto s = settle_os(h, path); !s) return s.error();
    auto src = read_sources((*y)["sources"], path);
    if (!src) return src.error();
    h.sources = std::move(*src);
    // Every figure a file states has its source.
    if (h.single_thread > 0 && !h.sources.count("single_thread")) {
      return bad(path, "sources.single_thread", "missing; say where the single-thread score comes from");
    }
  } catch (const YAML::Exception& e) {
    return bad(path, "(document)", e.what());
  }
  return h;
}

Result<HostModel> load_host_model_file(const std::string& path) {
  auto y = read_yaml(path, "host model");
  if (!y) return y.error();
  if (!y->IsMap()) return bad(path, "(top level)", "expected a map with schema: gpusim.host-model/1");
  HostModel m;
  m.source_path = path;
  try {
    static const std::set<std::string> kKeys = {"schema",       "default_host",  "reference_single_thread",
                                                "cpu_exponent", "driver_factor", "fit", "sources"};
    for (const auto& kv : *y) {
      if (!kKeys.count(kv.first.Scalar())) {
        return bad(path, kv.first.Scalar(), "unknown key; allowed: schema, default_host, reference_single_thread, "
                                            "cpu_exponent, driver_factor, fit, sources");
      }
    }
    const std::string schema = (*y)["schema"] ? (*y)["schema"].Scalar() : "";
    if (schema != "gpusim.host-model/1") {
      return bad(path, "schema", fmt::format("\"{}\"; expected gpusim.host-model/1", schema));
    }
    auto number = [&](const char* key, double lo, double hi, double& out) -> Result<Ok> {
      const YAML::Node n = (*y)[key];
      if (!n) return bad(path, key, "missing");
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        return bad(path, key, fmt::format("\"{}\" is not a number", n.Scalar()));
      }
      if (!(v >= lo && v <= hi)) return bad(path, key, fmt::format("{} is out of range; expected {} to {}", v, lo, hi));
      out = v;
      return Ok{};
    };
    if (auto s = number("reference_single_thread", 100, 20000, m.reference_single_thread); !s) return s.error();
    if (auto s = number("cpu_exponent", 0, 3, m.cpu_exponent); !s) return s.error();
    if (!(*y)["default_host"]) return bad(path, "default_host", "missing; name the host a prediction assumes");
    m.default_host = (*y)["default_host"].Scalar();
    const YAML::Node df = (*y)["driver_factor"];
    if (!df || !df.IsMap()) return bad(path, "driver_factor", "missing; expected a factor for each driver model");
    for (const auto& kv : df) {
      const std::string d = kv.first.Scalar();
      if (!one_of(d, kDrivers)) return bad(path, "driver_factor." + d, fmt::format("unknown; expected {}", fmt::join(kDrivers, ", ")));
      double v = 0;
      try {
        v = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        return bad(path, "driver_factor." + d, fmt::format("\"{}\" is not a number", kv.second.Scalar()));
      }
      if (!(v >= 0.1 && v <= 10)) {
        return bad(path, "driver_factor." + d, fmt::format("{} is out of range; expected 0.1 to 10", v));
      }
      m.driver_factor[d] = v;
    }
    for (const std::string& d : kDrivers) {
      if (!m.driver_factor.count(d)) return bad(path, "driver_factor." + d, "missing; every driver model needs a factor");
    }
    if (m.driver_factor["linux"] != 1) {
      return bad(path, "driver_factor.linux", "must be 1: the runtimes' figures were fitted on Linux hosts");
    }
    if ((*y)["fit"]) m.fit = (*y)["fit"].Scalar();
    auto src = read_sources((*y)["sources"], path);
    if (!src) return src.error();
    m.sources = std::move(*src);
    for (const char* key : {"reference_single_thread", "cpu_exponent", "driver_factor"}) {
      if (!m.sources.count(key)) return bad(path, std::string("sources.") + key, "missing; say where the figure comes from");
    }
  } catch (const YAML::Exception& e) {
    return bad(path, "(document)", e.what());
  }
  return m;
}

Result<HostModel> load_host_model(const std::vector<std::string>& dirs) {
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + kModelFile;
    std::error_code ec;
    if (fs::exists(p, ec)) return load_host_model_file(p);
  }
  return make_error(ErrorCode::kNotFound, fmt::format("no host model ({}) in {}; the installation's runtimes/hosts "
                                                      "directory holds one",
                                                      kModelFile, dirs.empty() ? std::string("(no directories)") : fmt::format("{}", fmt::join(dirs, ", "))));
}

std::vector<std::string> list_hosts(const std::vector<std::string>& dirs) {
  std::set<std::string> names;
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".yaml" && it->path().filename() != kModelFile) names.insert(it->path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

Result<HostProfile> find_host(const std::string& spec, const std::vector<std::string>& dirs) {
  if (spec.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "`host` is empty; name a host profile or describe one "
                                                   "(os=windows,single_thread=N)");
  }
  if (spec.size() > 4096) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`host` is {} characters; a host is named or described in a few", spec.size()));
  }
  // Errors in a description name it, and the option.
  const std::string where = fmt::format("`host` \"{}\"", spec.size() > 64 ? spec.substr(0, 64) + "..." : spec);
  if (spec.size() > 5 && spec.ends_with(".yaml") && spec.find(',') == std::string::npos) return load_host(spec);
  // NAME, or key=value pairs, or NAME followed by pairs.
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t p = 0; p <= spec.size(); ++p) {
    if (p == spec.size() || spec[p] == ',') {
      parts.push_back(spec.substr(start, p - start));
      start = p + 1;
    }
  }
  HostProfile h;
  size_t first_pair = 0;
  if (parts[0].find('=') == std::string::npos) {
    const std::string& name = parts[0];
    bool found = false;
    for (const std::string& d : dirs) {
      const std::string p = d + "/" + name + ".yaml";
      std::error_code ec;
      if (name.find('/') == std::string::npos && name != "_model" && fs::exists(p, ec)) {
        auto loaded = load_host(p);
        if (!loaded) return loaded.error();
        h = std::move(*loaded);
        found = true;
        break;
      }
    }
    if (!found) {
      const std::vector<std::string> known = list_hosts(dirs);
      const auto near = closest_names(name, known, 3, std::max<size_t>(2, name.size() / 3));
      return make_error(ErrorCode::kNotFound,
                        fmt::format("`host` \"{}\" is unknown; {}known hosts: {}; or describe it as key=value pairs, "
                                    "e.g. os=windows,single_thread=2200 (its CPU's Geekbench 6 single-core score)",
                                    name, near.empty() ? std::string() : fmt::format("did you mean {}? ", fmt::join(near, ", ")),
                                    known.empty() ? std::string("none installed") : fmt::format("{}", fmt::join(known, ", "))));
    }
    first_pair = 1;
  }
  // A profile's system changed by the description: its driver model follows the new system unless
  // the description gives one too (in either order).
  bool gives_driver = false;
  for (size_t i = first_pair; i < parts.size(); ++i) {
    gives_driver = gives_driver || parts[i].rfind("driver=", 0) == 0 || parts[i].rfind("driver_model=", 0) == 0;
  }
  for (size_t i = first_pair; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return bad(where, parts[i].empty() ? std::string("(empty)") : parts[i],
                 "expected key=value (os, driver, single_thread, cpu, framework)");
    }
    const std::string key = parts[i].substr(0, eq);
    if (key == "os" && !gives_driver) h.driver_model.clear();
    if (auto s = set_field(h, where, key, parts[i].substr(eq + 1)); !s) return s.error();
    if (key == "single_thread" || key == "cpu") h.sources.erase("single_thread");
  }
  if (first_pair < parts.size()) {
    h.name = spec;
    h.source_path.clear();
  }
  if (auto s = settle_os(h, where); !s) return s.error();
  return h;
}

double host_factor(const HostProfile& host, const HostModel& model) {
  const double st = host.single_thread > 0 ? host.single_thread : model.reference_single_thread;
  double f = std::pow(model.reference_single_thread / st, model.cpu_exponent);
  if (auto it = model.driver_factor.find(host.driver_model); it != model.driver_factor.end()) f *= it->second;
  return f;
}

RuntimeModel on_host(RuntimeModel rt, const HostProfile& host, const HostModel& model) {
  rt.host = host.name;
  if (!rt.host_scaled) {
    rt.host_factor = 1;
    rt.host_note = fmt::format("host {}: changes nothing under runtime {}, whose figures are device time (its "
                               "kernels and the gaps between them), not the host's time a call",
                               host.name, rt.name);
    return rt;
  }
  const double f = host_factor(host, model);
  rt.host_factor = f;
  for (auto* m : {&rt.op_us, &rt.class_us}) {
    for (auto& [k, v] : *m) v *= f;
  }
  rt.default_us *= f;
  rt.extra_kernel_us *= f;
  const double driver = model.driver_factor.count(host.driver_model) ? model.driver_factor.at(host.driver_model) : 1;
  const std::string cpu = host.single_thread > 0
                              ? fmt::format("Geekbench 6 single-core {:.0f} against the reference's {:.0f}",
                                            host.single_thread, model.reference_single_thread)
                              : fmt::format("CPU speed not given, so the reference's ({:.0f}) is assumed",
                                            model.reference_single_thread);
  rt.host_note = fmt::format("host {}{}: each call's host time x{:.2f} of the reference hosts' ({}; {} driver x{:.2f})",
                             host.name, host.cpu.empty() ? "" : " (" + host.cpu + ")", f, cpu, host.driver_model, driver);
  return rt;
}

}  // namespace gpusim
