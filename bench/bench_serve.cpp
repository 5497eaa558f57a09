// bench_serve: load figures for gpusim serve. Starts the service in-process on a free loopback
// port, uploads a model once, then runs C concurrent clients (each its own keep-alive connection)
// posting /v1/predict by model id for S seconds. Reports requests per second, p50/p99/max latency,
// errors, and the process's resident memory sampled every second (start, peak, end) — the service
// must hold its memory while it serves.
//
//   bench_serve MODEL.onnx GPU [--clients 4] [--seconds 60] [--workers 2] [--dtype fp16] [--dim batch=1]
#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "service.h"

namespace {

double rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: bench_serve MODEL.onnx GPU [--clients N] [--seconds S] [--workers N] [--dtype T] "
                       "[--dim NAME=VALUE]...\n");
    return 2;
  }
  const std::string model_path = argv[1], gpu = argv[2];
  int clients = 4, seconds = 60, workers = 2;
  std::string dtype = "fp16";
  nlohmann::json dims = nlohmann::json::array();
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--clients") clients = std::stoi(v);
    else if (k == "--seconds") seconds = std::stoi(v);
    else if (k == "--workers") workers = std::stoi(v);
    else if (k == "--dtype") dtype = v;
    else if (k == "--dim") dims.push_back(v);
    else {
      fmt::print(stderr, "bench_serve: unknown option {}\n", k);
      return 2;
    }
  }
  std::ifstream f(model_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.empty()) {
    fmt::print(stderr, "bench_serve: {}: cannot read\n", model_path);
    return 1;
  }
  gpusim::serve::ServiceOptions o;
  o.port = 0;
  o.workers = workers;
  o.queue = std::max(64, clients * 2);
  gpusim::serve::Service svc(o);
  auto port = svc.bind();
  if (!port) {
    fmt::print(stderr, "bench_serve: {}\n", port.error().message);
    return 1;
  }
  std::thread server([&] { (void)svc.run(); });
  const double rss_start = rss_mb();

  httplib::Client up("127.0.0.1", *port);
  auto r = up.Post("/v1/models", bytes, "application/octet-stream");
  if (!r || r->status != 200) {
    fmt::print(stderr, "bench_serve: upload failed: {}\n", r ? r->body : "no answer");
    svc.stop();
    server.join();
    return 1;
  }
  const std::string id = nlohmann::json::parse(r->body).at("model_id");
  const std::string body = nlohmann::json{{"model_id", id}, {"gpu", gpu}, {"dtype", dtype}, {"dims", dims}}.dump();
  // One request first: its answer must be a prediction, and it warms the imported-model cache.
  auto first = up.Post("/v1/predict", body, "application/json");
  if (!first || first->status != 200) {
    fmt::print(stderr, "bench_serve: predict failed: {}\n", first ? first->body : "no answer");
    svc.stop();
    server.join();
    return 1;
  }
  const double predicted_ms = nlohmann::json::parse(first->body).at("total_us").get<double>() / 1e3;

  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cl("127.0.0.1", *port);
      cl.set_keep_alive(true);
      cl.set_tcp_nodelay(true);
      cl.set_read_timeout(std::chrono::seconds(120));
      while (!stop.load()) {
        const auto t0 = std::chrono::steady_clock::now();
        auto res = cl.Post("/v1/predict", body, "application/json");
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (!res || res->status != 200) ++errors;
        else lat[static_cast<size_t>(c)].push_back(ms);
      }
    });
  }
  double rss_peak = rss_start;
  std::vector<double> rss_series;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double m = rss_mb();
    rss_series.push_back(m);
    rss_peak = std::max(rss_peak, m);
  }
  stop = true;
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  svc.stop();
  server.join();

  std::vector<double> all;
  for (const auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * static_cast<double>(all.size())))];
  };
  // Memory after the first 10 s against the last second: growth while serving.
  const double rss_10s = rss_series.size() > 10 ? rss_series[9] : rss_start;
  fmt::print("model {} on {} ({}), {} clients, {} workers, {} s\n", model_path, gpu, dtype, clients, workers, seconds);
  fmt::print("predicted latency {:.3f} ms\n", predicted_ms);
  fmt::print("requests {} ok, {} errors; {:.1f} req/s\n", all.size(), errors.load(), static_cast<double>(all.size()) / wall);
  fmt::print("latency p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms\n", pct(0.50), pct(0.99), all.empty() ? 0 : all.back());
  fmt::print("rss start {:.1f} MB, at 10 s {:.1f} MB, peak {:.1f} MB, end {:.1f} MB\n", rss_start, rss_10s, rss_peak,
             rss_series.empty() ? rss_start : rss_series.back());
  return errors.load() == 0 ? 0 : 1;
}
