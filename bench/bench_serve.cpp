// bench_serve: load figures for gpusim serve. Starts the service in-process on a free loopback
// port, uploads a model once, then runs C concurrent clients (each its own keep-alive connection)
// posting /v1/predict by model id for S seconds. Reports requests per second, p50/p99/max latency,
// errors, and the process's resident memory sampled every second (start, peak, end) — the service
// must hold its memory while it serves.
//
// Under attack (issue 30): --slow N runs N more clients beside them that trickle a request's
// headers a byte a second (reconnecting when the server cuts them off at its header deadline);
// --amplify K then posts K concurrent 60 MB JSON bodies of empty objects and reports the peak
// resident memory while they are refused (the bodies are sent from one buffer over raw sockets, so
// the figure is the server's); --cancel LONG.onnx then measures how long a request cancelled at its
// time limit (504) keeps its worker: a one-worker server, a 1 s limit, 100,000 random plans of
// LONG.onnx (batch 1), and the latency of a quick predict of MODEL sent the moment the 504 arrives,
// against the same predict alone.
//
// Idle connections (issue 56): --idle N holds N connections that send nothing (reopened whenever the
// server closes one at its deadline), and a prober asks /healthz every 200 ms on a fresh connection
// the whole time: its latency (p50, max) is what a load balancer's health check sees.
//
//   bench_serve MODEL.onnx GPU [--clients 4] [--seconds 60] [--workers 2] [--dtype fp16] [--dim batch=1]
//               [--slow 0] [--idle 0] [--amplify 0] [--amplify-string 0|1] [--cancel LONG.onnx] [--check 0|1]
//
// --check 1 exits 1 unless issue 56's targets hold: the process's peak RSS at most 2 GB over the
// whole run, every /healthz probe answered within 100 ms, no client request failed.
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
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

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A client that trickles a request's headers, a byte a second, reconnecting whenever the server
// closes it; counts the connections the server cut off.
void slow_client(int port, const std::atomic<bool>& stop, std::atomic<int64_t>& cut) {
  while (!stop.load()) {
    const int fd = connect_to(port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const std::string start = "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    bool open = ::send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0;
    while (open && !stop.load()) {
      for (int i = 0; i < 10 && !stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      open = ::send(fd, "x", 1, MSG_NOSIGNAL) == 1;
      char buf[512];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n > 0 && std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 408", 0) == 0)) open = false;
    }
    if (!stop.load()) ++cut;
    ::close(fd);
  }
}


// N connections that never send a byte, each reopened when the server closes it.
void idle_clients(int port, int n, const std::atomic<bool>& stop, std::atomic<int64_t>& reopened) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) fds.push_back(connect_to(port));
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (int& fd : fds) {
      char b;
      if (fd >= 0 && ::recv(fd, &b, 1, MSG_DONTWAIT) != 0) continue;  // still open (EAGAIN)
      if (fd >= 0) ::close(fd);
      fd = connect_to(port);
      ++reopened;
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
}

// /healthz on a fresh connection every 200 ms: milliseconds to the whole answer (-1: none).
void health_prober(int port, const std::atomic<bool>& stop, std::vector<double>& ms) {
  while (!stop.load()) {
    const auto t0 = std::chrono::steady_clock::now();
    const int fd = connect_to(port);
    double took = -1;
    if (fd >= 0) {
      const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
      (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
      timeval tv{10, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      std::string got;
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) got.append(buf, static_cast<size_t>(n));
      ::close(fd);
      if (got.rfind("HTTP/1.1 200", 0) == 0) {
        took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    ms.push_back(took);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: bench_serve MODEL.onnx GPU [--clients N] [--seconds S] [--workers N] [--dtype T] "
                       "[--dim NAME=VALUE]...\n");
    return 2;
  }
  const std::string model_path = argv[1], gpu = argv[2];
  int clients = 4, seconds = 60, workers = 2, slow = 0, amplify = 0, idle = 0;
  bool amplify_string = false, check = false;
  std::string cancel;
  std::string dtype = "fp16";
  nlohmann::json dims = nlohmann::json::array();
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--clients") clients = std::stoi(v);
    else if (k == "--seconds") seconds = std::stoi(v);
    else if (k == "--workers") workers = std::stoi(v);
    else if (k == "--dtype") dtype = v;
    else if (k == "--dim") dims.push_back(v);
    else if (k == "--slow") slow = std::stoi(v);
    else if (k == "--idle") idle = std::stoi(v);
    else if (k == "--amplify-string") amplify_string = v == "1";
    else if (k == "--check") check = v == "1";
    else if (k == "--amplify") amplify = std::stoi(v);
    else if (k == "--cancel") cancel = v;
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
  o.max_connections = std::max(1024, clients + slow + idle + 64);
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
  std::atomic<int64_t> errors{0}, cut{0};
  std::mutex error_mu;
  std::map<std::string, int> error_kinds;
  std::vector<std::thread> slow_threads;
  for (int i = 0; i < slow; ++i) slow_threads.emplace_back([&] { slow_client(*port, stop, cut); });
  std::atomic<int64_t> reopened{0};
  std::vector<double> health_ms;
  if (idle > 0) {
    slow_threads.emplace_back([&] { idle_clients(*port, idle, stop, reopened); });
    slow_threads.emplace_back([&] { health_prober(*port, stop, health_ms); });
  }
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
        if (!res || res->status != 200) {
          ++errors;
          std::lock_guard<std::mutex> l(error_mu);
          error_kinds[res ? fmt::format("HTTP {}", res->status) : fmt::format("no answer ({})", httplib::to_string(res.error()))]++;
        }
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
  for (auto& t : slow_threads) t.join();

  // Amplification: K concurrent 60 MB bodies of empty JSON objects, refused at the value limit.
  double amp_base = 0, amp_peak = 0;
  std::vector<int> amp_status;
  if (amplify > 0) {
    // Empty objects (refused at the JSON value limit), or with --amplify-string one 60 MB base64
    // string, which passes every structure limit and is parsed and decoded before it is refused.
    std::string big;
    if (amplify_string) {
      big = "{\"gpu\": \"nvidia-t4\", \"model_base64\": \"" + std::string((60u << 20) - 64, 'A') + "\"}";
    } else {
      big = "{\"runs\": [";
      big.reserve(60 << 20);
      while (big.size() < (60u << 20)) big += "{},";
      big += "{}]}";
    }
    amp_base = rss_mb();
    amp_peak = amp_base;
    std::atomic<bool> amp_done{false};
    std::thread sampler([&] {
      while (!amp_done.load()) {
        amp_peak = std::max(amp_peak, rss_mb());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    std::vector<std::thread> posts;
    amp_status.assign(static_cast<size_t>(amplify), 0);
    for (int i = 0; i < amplify; ++i) {
      posts.emplace_back([&, i] {
        const int fd = connect_to(*port);
        if (fd < 0) {
          amp_status[static_cast<size_t>(i)] = -1;
          return;
        }
        const std::string head = fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                             "application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                             amplify_string ? "/v1/predict" : "/v1/validate", big.size());
        bool ok = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size());
        for (size_t sent = 0; ok && sent < big.size();) {
          const ssize_t n = ::send(fd, big.data() + sent, std::min<size_t>(1 << 20, big.size() - sent), MSG_NOSIGNAL);
          ok = n > 0;
          sent += ok ? static_cast<size_t>(n) : 0;
        }
        char buf[64] = {};
        const ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, 0);
        ::close(fd);
        amp_status[static_cast<size_t>(i)] = n > 12 ? std::atoi(buf + 9) : -1;
      });
    }
    for (auto& t : posts) t.join();
    amp_done = true;
    sampler.join();
  }
  svc.stop();
  server.join();

  // Cancellation: how long a 504'd request keeps its (only) worker.
  double alone_ms = 0, after_504_ms = 0, the_504_s = 0;
  int quick_status = 0, slow_status = 0;
  if (!cancel.empty()) {
    std::ifstream lf(cancel, std::ios::binary);
    const std::string long_bytes((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
    gpusim::serve::ServiceOptions co;
    co.port = 0;
    co.workers = 1;
    co.request_timeout_s = 1.0;
    gpusim::serve::Service cs(co);
    auto cp = cs.bind();
    std::thread cserver([&] { (void)cs.run(); });
    httplib::Client cl("127.0.0.1", *cp);
    cl.set_read_timeout(std::chrono::seconds(120));
    std::string query = "/v1/predict?gpu=" + gpu + "&dtype=" + dtype;
    const std::string long_query = "/v1/plan?gpu=" + gpu + "&dtype=" + dtype + "&dim.batch=1&scheduler=random&samples=100000";
    for (const auto& d : dims) query += "&dim=" + d.get<std::string>();
    (void)cl.Post(query.c_str(), bytes, "application/octet-stream");  // imported and cached
    auto t0 = std::chrono::steady_clock::now();
    auto q = cl.Post(query.c_str(), bytes, "application/octet-stream");
    alone_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    auto l = cl.Post(long_query.c_str(), long_bytes, "application/octet-stream");
    the_504_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slow_status = l ? l->status : -1;
    t0 = std::chrono::steady_clock::now();
    q = cl.Post(query.c_str(), bytes, "application/octet-stream");
    after_504_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    quick_status = q ? q->status : -1;
    cs.stop();
    cserver.join();
  }

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
  for (const auto& [kind, n] : error_kinds) fmt::print("  error: {} x{}\n", kind, n);
  fmt::print("latency p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms\n", pct(0.50), pct(0.99), all.empty() ? 0 : all.back());
  fmt::print("rss start {:.1f} MB, at 10 s {:.1f} MB, peak {:.1f} MB, end {:.1f} MB\n", rss_start, rss_10s, rss_peak,
             rss_series.empty() ? rss_start : rss_series.back());
  if (slow > 0) fmt::print("slow clients {} beside them: cut off at the header deadline {} times\n", slow, cut.load());
  if (idle > 0) {
    std::vector<double> ok;
    for (double v : health_ms) {
      if (v >= 0) ok.push_back(v);
    }
    std::sort(ok.begin(), ok.end());
    fmt::print("idle connections {} beside them (reopened {} times): /healthz answered {} of {}, p50 {:.2f} ms, max "
               "{:.2f} ms\n",
               idle, reopened.load(), ok.size(), health_ms.size(), ok.empty() ? 0 : ok[ok.size() / 2],
               ok.empty() ? 0 : ok.back());
  }
  if (amplify > 0) {
    fmt::print("amplification: {} x 60 MB bodies of {}: statuses {}; rss {:.1f} MB before, peak {:.1f} MB\n", amplify,
               amplify_string ? "one base64 string" : "empty objects", fmt::join(amp_status, ","), amp_base, amp_peak);
  }
  if (!cancel.empty()) {
    fmt::print("cancellation: the long request answered {} after {:.2f} s; a quick predict then took {:.1f} ms "
               "(alone {:.1f} ms), status {}: the worker was freed {:.0f} ms after the 504\n",
               slow_status, the_504_s, after_504_ms, alone_ms, quick_status, std::max(0.0, after_504_ms - alone_ms));
  }
  if (check) {
    std::vector<std::string> missed;
    const double peak = std::max(rss_peak, amp_peak);
    if (peak > 2048) missed.push_back(fmt::format("peak RSS {:.0f} MB is over 2048 MB", peak));
    double worst = 0;
    int unanswered = 0;
    for (double v : health_ms) {
      if (v < 0) ++unanswered;
      worst = std::max(worst, v);
    }
    if (unanswered > 0) missed.push_back(fmt::format("{} /healthz probes unanswered", unanswered));
    if (worst > 100) missed.push_back(fmt::format("/healthz took {:.1f} ms, over 100 ms", worst));
    if (errors.load() > 0) missed.push_back(fmt::format("{} client requests failed", errors.load()));
    fmt::print("check (issue 56: peak <= 2 GB, /healthz <= 100 ms, no errors): {}\n",
               missed.empty() ? "met" : fmt::format("MISSED: {}", fmt::join(missed, "; ")));
    if (!missed.empty()) return 1;
  }
  return errors.load() == 0 ? 0 : 1;
}
