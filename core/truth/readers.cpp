// Readers that turn measurement files into Measurement records (include/gpusim/measurement.h):
// NeuSight's per-op CSVs (plain or xz-compressed), `gpusim run --json` output, calibration raw data,
// a measurement store, or a directory of any of these.
#include <lzma.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_text.h"
#include "gpusim/llm.h"
#include "gpusim/measurement.h"
#include "sim/work_json.h"

namespace gpusim {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<std::string> read_file(const std::string& path) {
  // Measurement files run to tens of megabytes; 1 GiB bounds a device or a wrong file.
  return base::read_regular_file(path, int64_t{1} << 30, "the measurements file");
}

// The whole of an .xz file, decompressed.
Result<std::string> read_xz(const std::string& path) {
  auto raw = read_file(path);
  if (!raw) return raw.error();
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot start the xz decoder", path));
  }
  std::string out;
  std::string buf(1 << 20, '\0');
  strm.next_in = reinterpret_cast<const uint8_t*>(raw->data());
  strm.avail_in = raw->size();
  lzma_ret rc = LZMA_OK;
  while (rc == LZMA_OK) {
    strm.next_out = reinterpret_cast<uint8_t*>(buf.data());
    strm.avail_out = buf.size();
    rc = lzma_code(&strm, strm.avail_in == 0 ? LZMA_FINISH : LZMA_RUN);
    out.append(buf.data(), buf.size() - strm.avail_out);
    if (out.size() > (size_t{2} << 30)) {  // a decompression bomb, or not a measurements file
      lzma_end(&strm);
      return make_error(ErrorCode::kLimit, fmt::format("{}: decompresses past 2 GiB, more than any measurements file "
                                                       "gpusim reads; is it the right file?",
                                                       path));
    }
  }
  lzma_end(&strm);
  if (rc != LZMA_STREAM_END) {
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: not a valid xz stream (liblzma error {}); decompress it with `xz -t {}` to "
                                  "check the file",
                                  path, static_cast<int>(rc), path));
  }
  return out;
}

// A file's text, decompressed when its name ends in .xz (raw measurement files are kept compressed).
Result<std::string> read_text(const std::string& path) {
  return ends_with(path, ".xz") ? read_xz(path) : read_file(path);
}

// One CSV record (RFC 4180: quoted fields may hold commas and doubled quotes).
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

// A header naming a column twice is refused: which of the two a reader took would be a guess.
Status unique_columns(const std::vector<std::string>& header, const std::string& path, size_t lineno) {
  for (size_t a = 0; a < header.size(); ++a) {
    for (size_t b = a + 1; b < header.size(); ++b) {
      if (header[a] == header[b] && !header[a].empty()) {
        return make_error(ErrorCode::kParse, fmt::format("{}:{}: the header names the column \"{}\" twice (columns {} "
                                                         "and {}); keep one",
                                                         path, lineno, header[a].substr(0, 64), a + 1, b + 1));
      }
    }
  }
  return Ok{};
}

// gpusim's op class of a NeuSight op name.
std::string neusight_class(const std::string& op) {
  if (op == "linear" || op == "bmm") return "gemm";
  if (op == "conv") return "conv";
  if (op == "ln" || op == "softmax") return "normalization";
  static const std::set<std::string> kElementwise = {"add", "addu", "mul", "mulu", "div", "divu", "pow",
                                                     "powu", "relu", "gelu", "tanh"};
  return kElementwise.count(op) ? "elementwise" : "";
}

// Fields every record of gpusim's own kernels shares: where it ran and how it was timed.
void device_timed(Measurement& m, const nlohmann::json& dev, const std::string& backend) {
  m.gpu = dev.value("name", "");
  m.driver = dev.value("driver", "");
  m.backend = backend.empty() ? dev.value("backend", "") : backend;
  m.runtime = "gpusim";
  m.timer = "device timestamps around each kernel";
}

std::string where_line(const std::string& path, size_t line) { return fmt::format("{}:{}", path, line); }

// "ab/cd/add.csv.xz" -> "cd/add.csv.xz": the file and its folder, the same wherever the tree lives.
std::string short_ref(const std::string& path) {
  const fs::path p(path);
  const std::string parent = p.parent_path().filename().string();
  return parent.empty() ? p.filename().string() : parent + "/" + p.filename().string();
}

}  // namespace

Result<std::vector<Measurement>> read_neusight_csv(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  std::vector<Measurement> out;
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line)) return make_error(ErrorCode::kParse, fmt::format("{}: empty file; expected a CSV header", path));
  const std::vector<std::string> header = csv_fields(line);
  if (Status st = unique_columns(header, path, 1); !st) return st.error();
  auto col = [&](const char* name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int c_op = col("op"), c_dev = col("device"), c_lat = col("latency_ms");
  for (auto [c, name] : {std::pair{c_op, "op"}, {c_dev, "device"}, {c_lat, "latency_ms"}}) {
    if (c < 0) {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}:1: the header has no \"{}\" column; a NeuSight CSV starts op,device,torch,"
                                    "latency_ms,kernel,kernels_launched,grid,block, then the op's dims",
                                    path, name));
    }
  }
  const int c_torch = col("torch"), c_kernel = col("kernel"), c_launched = col("kernels_launched");
  const int c_grid = col("grid"), c_block = col("block");
  // Optional columns of measurements taken the same way on other types or timers (gpusim's own
  // sweeps on a lent GPU, tools/device/llm_measure.py): the operands' float type (fp32 where
  // absent), the runtime whose host times apply (pytorch-eager where absent; cuda-graph for
  // kernels timed in graph replays), how the time was taken, and whether the inputs may still be
  // in L2 from the call before (1 where absent, as in NeuSight's back-to-back calls).
  const int c_dtype = col("dtype"), c_runtime = col("runtime"), c_stat = col("statistic"), c_warm = col("warm_cache");
  static const std::set<std::string> kKnown = {"op", "device", "torch", "latency_ms", "kernel", "kernels_launched",
                                               "grid", "block", "dtype", "runtime", "statistic", "warm_cache"};
  std::vector<int> dim_cols;
  for (size_t i = 0; i < header.size(); ++i) {
    if (!kKnown.count(header[i])) dim_cols.push_back(static_cast<int>(i));
  }
  const std::string ref = short_ref(path);
  const fs::path parent = fs::path(path).parent_path().filename();
  const std::string source = parent.string().rfind("neusight", 0) == 0 ? parent.string() : "neusight";
  size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() != header.size()) {
      return make_error(ErrorCode::kParse, fmt::format("{}: {} fields, the header has {}", where_line(path, lineno),
                                                       f.size(), header.size()));
    }
    Measurement m;
    m.op = f[static_cast<size_t>(c_op)];
    m.op_class = neusight_class(m.op);
    if (m.op_class.empty()) {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}: op \"{}\" is not a NeuSight op gpusim knows (linear, bmm, conv, add, addu, "
                                    "mul, mulu, div, divu, pow, powu, relu, gelu, tanh, ln, softmax)",
                                    where_line(path, lineno), m.op));
    }
    m.gpu = f[static_cast<size_t>(c_dev)];
    const std::string& lat = f[static_cast<size_t>(c_lat)];
    double ms = 0;
    auto [p, ec] = std::from_chars(lat.data(), lat.data() + lat.size(), ms);
    if (ec != std::errc() || p != lat.data() + lat.size() || !(ms > 0) || ms > 1e7) {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}: latency_ms \"{}\" is not a positive time in milliseconds",
                                    where_line(path, lineno), lat));
    }
    m.time_us = ms * 1e3;
    for (int c : dim_cols) {
      const std::string& v = f[static_cast<size_t>(c)];
      int64_t d = 0;
      auto [q, ec2] = std::from_chars(v.data(), v.data() + v.size(), d);
      if (ec2 != std::errc() || q != v.data() + v.size() || d < 0) {
        return make_error(ErrorCode::kParse, fmt::format("{}: column {} = \"{}\" is not a non-negative integer dim",
                                                         where_line(path, lineno), header[static_cast<size_t>(c)], v));
      }
      m.dims[header[static_cast<size_t>(c)]] = d;
    }
    const bool amd = m.gpu.find("AMD") != std::string::npos || m.gpu.find("Instinct") != std::string::npos;
    m.backend = amd ? "hip" : "cuda";
    if (c_torch >= 0) {
      std::string t = f[static_cast<size_t>(c_torch)];
      if (!t.empty() && t[0] == 'p') t.erase(0, 1);
      m.driver = "torch " + t;
    }
    if (c_kernel >= 0) m.kernel = f[static_cast<size_t>(c_kernel)];
    if (c_launched >= 0) m.kernels_launched = std::max(1, std::atoi(f[static_cast<size_t>(c_launched)].c_str()));
    if (c_grid >= 0) m.grid = f[static_cast<size_t>(c_grid)];
    if (c_block >= 0) m.block = f[static_cast<size_t>(c_block)];
    // ROCm builds of PyTorch dispatch through their own stack (and here a newer torch): their own runtime.
    m.runtime = amd ? "pytorch-eager-rocm" : "pytorch-eager";
    m.timer = "cuda events around the framework call";
    m.statistic = "mean of the 5 fastest of 25 back-to-back calls";
    m.repeats = 25;
    if (c_dtype >= 0) {
      const std::string& dt = f[static_cast<size_t>(c_dtype)];
      const std::optional<DType> d = float_dtype_from_name(dt);
      if (!d) {
        return make_error(ErrorCode::kParse, fmt::format("{}: dtype \"{}\" is not a float type; expected fp32, fp16 or bf16",
                                                         where_line(path, lineno), dt));
      }
      m.dtype = *d;
    }
    if (c_runtime >= 0 && !f[static_cast<size_t>(c_runtime)].empty()) m.runtime = f[static_cast<size_t>(c_runtime)];
    if (m.runtime == "cuda-graph") m.timer = "cuda events around the replay of a CUDA graph of the calls";
    if (c_stat >= 0 && !f[static_cast<size_t>(c_stat)].empty()) {
      m.statistic = f[static_cast<size_t>(c_stat)];
      m.repeats = 0;
    }
    m.warm_cache = true;
    if (c_warm >= 0) {
      const std::string& v = f[static_cast<size_t>(c_warm)];
      if (v != "0" && v != "1") {
        return make_error(ErrorCode::kParse, fmt::format("{}: warm_cache \"{}\" is not 0 or 1 (1: the inputs may still be "
                                                         "in L2 from the previous call)",
                                                         where_line(path, lineno), v));
      }
      m.warm_cache = v == "1";
    }
    m.source = source;
    m.source_ref = fmt::format("{}:{}", ref, lineno);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

Result<nlohmann::json> read_json(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return parse_json(*text, path);
}

}  // namespace

Result<std::vector<Measurement>> read_run_json(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return parse_run_json(*text, path);
}

Result<std::vector<Measurement>> parse_run_json(const std::string& text, const std::string& path) {
  Result<nlohmann::json> j = parse_json(text, path);
  if (!j) return j.error();
  std::vector<Measurement> out;
  try {
    const auto& dev = j->at("device");
    const std::string backend = j->value("backend", "");
    const int64_t repeat = j->value("repeat", 0);
    const auto& ks = j->at("kernels");
    for (size_t i = 0; i < ks.size(); ++i) {
      const auto& k = ks[i];
      const std::string where = fmt::format("{}: kernels[{}]", path, i);
      Measurement m;
      if (k.contains("fused_ops")) m.fused_ops = k.at("fused_ops").get<std::vector<std::string>>();
      // The anchor's op type (op_type joins the fused group's with '+').
      m.op = m.fused_ops.empty() ? k.value("op_type", "") : m.fused_ops.front();
      m.op_class = k.value("class", "");
      m.kernel = k.value("name", "");
      m.kernels_launched = k.value("launches", 1);
      if (!k.contains("work")) {
        return make_error(ErrorCode::kParse,
                          fmt::format("{}: no \"work\"; this file was written by a gpusim older than the measurement "
                                      "store: run `gpusim run --json` again to record it",
                                      where));
      }
      auto w = work_from_json(k.at("work"), where);
      if (!w) return w.error();
      m.work = *w;
      m.dtype = w->dtype;
      if (k.contains("tile")) {
        auto t = tile_from_json(k.at("tile"), where);
        if (!t) return t.error();
        m.tile = *t;
      }
      device_timed(m, dev, backend);
      m.statistic = fmt::format("median of {} timed runs after a warm-up", repeat);
      m.repeats = repeat;
      m.warm_cache = true;
      m.time_us = k.value("measured_us", 0.0);
      m.p50_us = m.time_us;
      if (!(m.time_us > 0)) {
        return make_error(ErrorCode::kParse, fmt::format("{}: measured_us {} is not a positive time", where, m.time_us));
      }
      m.source = "gpusim run";
      // The profile `run` matched to the device: validate prices the record with it.
      if (j->contains("gpu") && (*j)["gpu"].is_string()) m.config["profile"] = (*j)["gpu"].get<std::string>();
      m.source_ref = fmt::format("{} {} kernel {}", j->value("model", ""), j->value("dtype", ""), k.value("kernel", 0));
      out.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: not `gpusim run --json` output (schema gpusim.run/1): {}", path, e.what()));
  }
  return out;
}

Result<std::vector<Measurement>> read_calibration_json(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.error();
  std::vector<Measurement> out;
  try {
    const auto& dev = j->at("device");
    const auto& obs = j->at("observations");
    for (size_t i = 0; i < obs.size(); ++i) {
      const auto& o = obs[i];
      const std::string where = fmt::format("{}: observations[{}]", path, i);
      Measurement m;
      auto w = work_from_json(o.at("work"), where);
      if (!w) return w.error();
      auto t = tile_from_json(o.at("tile"), where);
      if (!t) return t.error();
      m.work = *w;
      m.tile = *t;
      m.dtype = w->dtype;
      m.op = o.value("name", "");
      m.op_class = std::string(op_class_name(w->cls));
      m.kernel = o.value("class", "");  // the microbenchmark family: dram, fma, gemm, ...
      device_timed(m, dev, "");
      m.clocks = dev.value("clocks", "");
      const auto& st = o.at("measured_us");
      m.repeats = st.value("n", 0);
      m.statistic = fmt::format("median of {} runs", m.repeats);
      m.warm_cache = false;
      m.time_us = st.at("p50").get<double>();
      m.p50_us = m.time_us;
      m.p95_us = st.value("p95", 0.0);
      m.source = "gpusim calibrate";
      m.source_ref = fmt::format("{} {}", short_ref(path), m.op);
      out.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: not calibration raw data (schema gpusim.calibration/1): {}", path, e.what()));
  }
  return out;
}

// The header line of a CSV (after any '#' comment lines), or "" when there is none.
static std::string csv_header(const std::string& path) {
  if (ends_with(path, ".xz")) {
    auto t = read_xz(path);
    if (!t) return "";
    std::istringstream in(*t);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] != '#') return line;
    }
    return "";
  }
  auto file = base::RegularFile::open(path, "the measurements file");
  if (!file) return "";
  std::istringstream f(file->read(0, 1 << 20));
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line[0] != '#') return line;
  }
  return "";
}

namespace {

// "...-rtx4090-dynamo.csv" -> "NVIDIA GeForce RTX 4090": the device name as the driver gives it.
std::string timm_gpu(const std::string& file) {
  const size_t p = file.find("-rtx");
  if (p == std::string::npos) return "";
  size_t e = p + 4;
  while (e < file.size() && std::isdigit(static_cast<unsigned char>(file[e]))) ++e;
  if (e == p + 4) return "";
  return "NVIDIA GeForce RTX " + file.substr(p + 4, e - p - 4);
}

// "pt240-cu124" -> "torch 2.4.0, CUDA 12.4".
std::string timm_driver(const std::string& file) {
  std::string out;
  const size_t pt = file.find("-pt");
  if (pt != std::string::npos && pt + 6 <= file.size() && std::isdigit(static_cast<unsigned char>(file[pt + 3]))) {
    out = fmt::format("torch {}.{}.{}", file[pt + 3], file[pt + 4], file[pt + 5]);
  }
  const size_t cu = file.find("-cu");
  if (cu != std::string::npos && cu + 6 <= file.size() && std::isdigit(static_cast<unsigned char>(file[cu + 3]))) {
    out += fmt::format("{}CUDA {}{}.{}", out.empty() ? "" : ", ", file[cu + 3], file[cu + 4], file[cu + 5]);
  }
  return out;
}

}  // namespace

Result<std::vector<Measurement>> read_timm_csv(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  const fs::path dir = fs::path(path).parent_path();
  const std::string manifest_path = (dir / "models" / "manifest.json").string();
  auto man = read_json(manifest_path);
  if (!man) {
    return make_error(ErrorCode::kIo, fmt::format("{}: the graphs' manifest {} does not read ({}); timm rows are "
                                                  "priced from the ONNX graphs in models/ beside the CSV",
                                                  path, manifest_path, man.error().message));
  }
  const nlohmann::json models = man->value("models", nlohmann::json::object());
  std::istringstream in(*text);
  std::string line;
  size_t lineno = 0;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    header = csv_fields(line);
    break;
  }
  if (Status st = unique_columns(header, path, lineno); !st) return st.error();
  auto col = [&](const char* name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int c_file = col("file"), c_model = col("model"), c_img = col("infer_img_size"), c_time = col("infer_step_time"),
            c_batch = col("infer_batch_size");
  for (auto [c, name] : {std::pair{c_file, "file"}, {c_model, "model"}, {c_img, "infer_img_size"},
                         {c_time, "infer_step_time"}, {c_batch, "infer_batch_size"}}) {
    if (c < 0) {
      return make_error(ErrorCode::kParse, fmt::format("{}:{}: the header has no \"{}\" column; a timm benchmark CSV has "
                                                       "file,model,infer_img_size,...,infer_step_time,infer_batch_size",
                                                       path, lineno, name));
    }
  }
  const std::string folder = dir.filename().string();
  const std::string ref = short_ref(path);
  std::map<std::string, std::shared_ptr<const std::string>> graphs;
  std::vector<Measurement> out;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r" || line[0] == '#') continue;
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() != header.size()) {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}: {} fields, the header has {}", where_line(path, lineno), f.size(), header.size()));
    }
    auto num = [&](int c, const char* name) -> Result<double> {
      double v = 0;
      const std::string& t = f[static_cast<size_t>(c)];
      const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
      if (r.ec != std::errc() || !(v > 0) || v > 1e12) {
        return make_error(ErrorCode::kParse, fmt::format("{}: {} \"{}\" is not a positive number", where_line(path, lineno),
                                                         name, t));
      }
      return v;
    };
    auto step = num(c_time, "infer_step_time");
    auto img = num(c_img, "infer_img_size");
    auto batch = num(c_batch, "infer_batch_size");
    for (auto* r : {&step, &img, &batch}) {
      if (!*r) return r->error();
    }
    const std::string file = f[static_cast<size_t>(c_file)];
    Measurement m;
    m.op = f[static_cast<size_t>(c_model)];
    m.op_class = "model";
    m.dims = {{"batch", static_cast<int64_t>(*batch)}, {"img", static_cast<int64_t>(*img)}};
    m.dtype = DType::kFloat16;
    m.gpu = timm_gpu(file);
    if (m.gpu.empty()) {
      return make_error(ErrorCode::kParse, fmt::format("{}: file \"{}\" names no GPU (expected ...-rtxNNNN...)",
                                                       where_line(path, lineno), file));
    }
    m.backend = "pytorch";
    m.driver = timm_driver(file);
    m.runtime = file.find("dynamo") != std::string::npos ? "torch-compile" : "pytorch-eager";
    m.timer = "host wall time from before the call to after torch.cuda.synchronize() (timm benchmark.py)";
    m.statistic = "mean of 40 steps after 10 warm-up steps";
    m.repeats = 40;
    m.time_us = *step * 1000.0;
    m.source = folder;
    m.source_ref = fmt::format("{}:{}", ref, lineno);
    m.config["layout"] = file.find("-nhwc-") != std::string::npos ? "nhwc" : "nchw";
    m.config["precision"] = file.find("-amp-") != std::string::npos ? "amp-fp16" : "fp32";
    // timm's Swin computes attention with matmuls and a softmax: it asks for fused attention only
    // under an experimental flag the benchmark did not set (timm-e2e/README.md).
    if (m.op.rfind("swin", 0) == 0) m.config["skip"] = "sdpa";
    auto it = models.find(m.op);
    if (it == models.end()) {
      m.config["unpriced"] = fmt::format("no graph of {} in {}", m.op, folder + "/models");
    } else {
      const auto ops = it->value("ops", nlohmann::json::object());
      m.config["family"] = ops.contains("Softmax") ? "attention" : "conv";
      const int64_t gimg = it->value("img", int64_t{0});
      if (gimg != static_cast<int64_t>(*img)) {
        m.config["unpriced"] = fmt::format("{}/models has {} at {} px, not {}", folder, m.op, gimg, *img);
      } else {
        const std::string gfile = it->value("file", "");
        m.graph = folder + "/models/" + gfile;
        auto& bytes = graphs[gfile];
        if (!bytes) {
          auto b = read_file((dir / "models" / gfile).string());
          if (!b) return make_error(ErrorCode::kIo, fmt::format("{}: the graph of {}: {}", where_line(path, lineno), m.op,
                                                                b.error().message));
          bytes = std::make_shared<const std::string>(std::move(*b));
        }
        m.graph_bytes = bytes;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// "RTX 3090" -> "NVIDIA GeForce RTX 3090", "RTX A6000" -> "NVIDIA RTX A6000": the device name as
// the driver gives it (llama-bench prints CUDA's); Apple's and Tesla's as written.
std::string llamacpp_gpu(const std::string& norm) {
  if (norm.rfind("RTX A", 0) == 0) return "NVIDIA " + norm;
  if (norm.rfind("RTX ", 0) == 0 || norm.rfind("GTX ", 0) == 0) return "NVIDIA GeForce " + norm;
  return norm;
}

// llama-bench's model label ("llama 7B", "llama 8B", "llama 70B (...)") -> the bundled description
// of that architecture (models/llm).
std::string llamacpp_model(const std::string& label) {
  if (label.rfind("llama 7B", 0) == 0) return "llama-2-7b";
  if (label.rfind("llama 8B", 0) == 0) return "llama-3-8b";
  if (label.rfind("llama 70B", 0) == 0) return "llama-3-70b";
  return "";
}

Result<std::vector<Measurement>> read_llamacpp_csv(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  std::istringstream in(*text);
  std::string line;
  std::map<std::string, int> col;
  std::vector<Measurement> out;
  const std::string ref = short_ref(path);
  size_t lineno = 0;
  const char* kNeeded[] = {"gpu", "gpu_norm", "backend", "model", "quant", "test", "tokens_per_s"};
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = csv_fields(line);
    if (col.empty()) {
      if (Status st = unique_columns(f, path, lineno); !st) return st.error();
      for (size_t i = 0; i < f.size(); ++i) col[f[i]] = static_cast<int>(i);
      for (const char* k : kNeeded) {
        if (!col.count(k)) {
          return make_error(ErrorCode::kParse, fmt::format("{}:{}: the header has no \"{}\" column; a llama-bench CSV has "
                                                           "gpu, gpu_norm, backend, model, quant, test and tokens_per_s",
                                                           path, lineno, k));
        }
      }
      continue;
    }
    auto get = [&](const char* k) -> std::string {
      auto it = col.find(k);
      return it == col.end() || static_cast<size_t>(it->second) >= f.size() ? std::string() : f[static_cast<size_t>(it->second)];
    };
    const std::string test = get("test");
    int64_t tokens = 0;
    const bool pp = test.rfind("pp", 0) == 0, tg = test.rfind("tg", 0) == 0;
    const auto [end, ec] = test.size() > 2 ? std::from_chars(test.data() + 2, test.data() + test.size(), tokens)
                                           : std::from_chars_result{test.data(), std::errc::invalid_argument};
    if ((!pp && !tg) || ec != std::errc() || end != test.data() + test.size() || tokens < 1 || tokens > (int64_t{1} << 22)) {
      return make_error(ErrorCode::kParse, fmt::format("{}:{}: test \"{}\" is not ppN or tgN with N from 1 to {} "
                                                       "(llama-bench's prompt and generation tests)",
                                                       path, lineno, test.substr(0, 64), int64_t{1} << 22));
    }
    // Optional columns that change what ran: a whole number of rows a pass, flash attention 0 or 1.
    if (const std::string ub = get("n_ubatch"); !ub.empty()) {
      int64_t v = 0;
      const auto [e, c] = std::from_chars(ub.data(), ub.data() + ub.size(), v);
      if (c != std::errc() || e != ub.data() + ub.size() || v < 1 || v > 65536) {
        return make_error(ErrorCode::kParse, fmt::format("{}:{}: n_ubatch \"{}\" is not a whole number of rows from 1 to "
                                                         "65536", path, lineno, ub.substr(0, 64)));
      }
    }
    if (const std::string fa = get("flash_attn"); !fa.empty() && fa != "0" && fa != "1") {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}:{}: flash_attn \"{}\" is not 0 or 1", path, lineno, fa.substr(0, 64)));
    }
    double tps = 0;
    try {
      tps = std::stod(get("tokens_per_s"));
    } catch (const std::exception&) {
      tps = 0;
    }
    // Past ten million tokens a second no GPU runs a decoder: such a figure is a unit or parse slip,
    // and it would price the run at (almost) nothing.
    if (!(tps > 0) || !std::isfinite(tps) || tps > 1e7 || tokens <= 0) {
      return make_error(ErrorCode::kParse, fmt::format("{}:{}: tokens_per_s \"{}\" is not a speed from 0 to 1e7 tokens a "
                                                       "second; llama-bench writes avg_ts there",
                                                       path, lineno, get("tokens_per_s").substr(0, 64)));
    }
    Measurement m;
    m.op = llamacpp_model(get("model"));
    m.op_class = "model";
    m.dims = {{pp ? "prompt" : "generate", tokens}};
    m.dtype = DType::kFloat16;
    m.gpu = llamacpp_gpu(get("gpu_norm").empty() ? get("gpu") : get("gpu_norm"));
    // As llama-bench prints it ("ROCm", "Metal,BLAS"): the backend gpusim models it by.
    auto named = llm_backend(get("backend"));
    if (!named) return make_error(ErrorCode::kParse, fmt::format("{}:{}: {}", path, lineno, named.error().message));
    const std::string backend = *named;
    m.backend = backend;
    m.driver = get("build").empty() ? "llama.cpp" : "llama.cpp " + get("build");
    m.runtime = "llamacpp-" + backend;
    m.timer = "llama-bench: wall time of the test after a warm-up run";
    m.statistic = "mean of 5 runs";
    m.repeats = 5;
    m.time_us = static_cast<double>(tokens) / tps * 1e6;
    m.source = "llamacpp";
    m.source_ref = fmt::format("{}:{}", ref, lineno);
    m.config["family"] = "llm";
    m.config["weights"] = get("quant");
    m.config["test"] = test;
    m.config["model"] = get("model");
    if (!get("flash_attn").empty()) m.config["flash_attn"] = get("flash_attn");
    if (!get("n_ubatch").empty()) m.config["n_ubatch"] = get("n_ubatch");
    if (!get("date").empty()) m.config["date"] = get("date");
    if (!get("source_url").empty()) m.config["source_url"] = get("source_url");
    // llama.cpp's CUDA backend multiplied a prompt by quantized weights with fp16 cuBLAS (the weights
    // dequantized by a kernel first) until PR #8075 (2024-06-23, build b3216) made mul_mat_q the
    // default: rows dated before it, of an earlier build number, or of the January 2024 branch
    // sl/backend-sched (PR #4766's thread) ran that path.
    if (backend == "cuda" || backend == "hip") {
      const std::string date = get("date"), build = get("build");
      int number = 0;
      if (const size_t open = build.find('('); open != std::string::npos) number = std::atoi(build.c_str() + open + 1);
      if ((!date.empty() && date < "2024-06-23") || (number > 0 && number < 3216) || build == "sl/backend-sched") {
        m.config["cuda_prompt"] = "cublas";
      }
    }
    if (m.op.empty()) m.config["unpriced"] = fmt::format("no description of model \"{}\" in models/llm", get("model"));
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<Measurement>> read_measurements(const std::string& path, std::vector<std::string>* notes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string f = it->path().string();
      if (it->is_regular_file() && (ends_with(f, ".csv") || ends_with(f, ".csv.xz") || ends_with(f, ".json") ||
                                    ends_with(f, ".json.xz") || ends_with(f, ".db") || ends_with(f, ".sqlite"))) {
        files.push_back(f);
      }
    }
    if (ec) return make_error(ErrorCode::kIo, fmt::format("{}: cannot list the directory: {}", path, ec.message()));
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return make_error(ErrorCode::kIo, fmt::format("{}: no measurement files (*.csv, *.csv.xz, *.json, *.json.xz, "
                                                    "*.db) in the directory",
                                                    path));
    }
    std::vector<Measurement> all;
    for (const std::string& f : files) {
      // In a directory, only the formats gpusim reads; the rest are named in the notes.
      std::string skip;
      if (ends_with(f, ".csv") || ends_with(f, ".csv.xz")) {
        const std::string h = csv_header(f);
        if (h.rfind("op,", 0) != 0 && h.find("infer_step_time") == std::string::npos &&
            h.find("tokens_per_s") == std::string::npos) {
          skip = "a CSV of no format gpusim reads (NeuSight per-op rows, timm benchmark rows, llama-bench rows)";
        }
      } else if (ends_with(f, ".json") || ends_with(f, ".json.xz")) {
        auto j = read_json(f);
        const std::string schema = j && j->is_object() ? j->value("schema", "") : "";
        if (schema != "gpusim.run/1" && schema != "gpusim.calibration/1") {
          skip = "JSON without a measurement schema (a manifest or other data)";
        }
      }
      if (!skip.empty()) {
        if (notes) notes->push_back(fmt::format("skipped {}: {}", f, skip));
        continue;
      }
      auto r = read_measurements(f, notes);
      if (!r) return r.error();
      all.insert(all.end(), std::make_move_iterator(r->begin()), std::make_move_iterator(r->end()));
    }
    return all;
  }
  if (!fs::exists(path, ec)) {
    return make_error(ErrorCode::kIo,
                      fmt::format("{}: no such file or directory; pass a NeuSight CSV (.csv, .csv.xz), a gpusim run or "
                                  "calibration JSON, a store (.db) or a directory of them (the training split lives in "
                                  "../shared/truth beside a checkout)",
                                  path));
  }
  if (ends_with(path, ".csv") || ends_with(path, ".csv.xz")) {
    if (csv_header(path).find("infer_step_time") != std::string::npos) return read_timm_csv(path);
    if (csv_header(path).find("tokens_per_s") != std::string::npos) return read_llamacpp_csv(path);
    return read_neusight_csv(path);
  }
  if (ends_with(path, ".db") || ends_with(path, ".sqlite")) {
    auto s = MeasurementStore::open_read(path);
    if (!s) return s.error();
    return s->query();
  }
  if (ends_with(path, ".json") || ends_with(path, ".json.xz")) {
    auto j = read_json(path);
    if (!j) return j.error();
    const std::string schema = j->is_object() ? j->value("schema", "") : "";
    if (schema == "gpusim.run/1") return read_run_json(path);
    if (schema == "gpusim.calibration/1") return read_calibration_json(path);
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: schema \"{}\" holds no measurements gpusim reads; expected gpusim.run/1 "
                                  "(`gpusim run --json`) or gpusim.calibration/1 (calibration raw data)",
                                  path, schema));
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: unknown kind of measurement file; expected *.csv, *.csv.xz (NeuSight), *.json, "
                                "*.json.xz (gpusim run or calibration), *.db (a measurement store) or a directory",
                                path));
}

}  // namespace gpusim
