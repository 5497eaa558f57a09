// gpusim serve (service.h): routes, the model cache, the worker pool and the limits.
#include "service.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "gpusim/cancel.h"
#include "base/closest.h"
#include "gpusim/gpusim.h"
#include "base/json_text.h"
#include "http_server.h"

namespace gpusim::serve {
namespace {

using nlohmann::json;

// ---- the model cache -----------------------------------------------------------------------------

// The heap a block of `n` bytes takes: glibc's malloc adds an 8-byte header and rounds to 16, at
// least 32 a block.
int64_t heap(size_t n) { return n == 0 ? 0 : std::max<int64_t>(32, static_cast<int64_t>((n + 8 + 15) / 16 * 16)); }
// A string's heap: none while it fits the string itself (15 characters).
int64_t heap_string(const std::string& s) { return s.size() > 15 ? heap(s.size() + 1) : 0; }

}  // namespace

// What an imported model holds in memory, estimated block by block (the strings and vectors each
// structure allocates, with malloc's overhead, the name index's entries and buckets, the
// attribute maps' nodes) and its bytes. Bounds the imported-graph cache in bytes, so one model
// under many names, or many dims, cannot hold gigabytes; the test measures it against malloc's
// own count (it was 1.8x low when it counted only the structures' sizes).
int64_t imported_bytes(const Model& m) {
  const Graph& g = m.graph();
  int64_t b = heap(static_cast<size_t>(m.size_bytes()));
  b += heap(g.tensors.capacity() * sizeof(Tensor)) + heap(g.nodes.capacity() * sizeof(Node));
  for (const Tensor& t : g.tensors) {
    b += heap_string(t.name) + heap_string(t.data_absent) + heap(t.shape.capacity() * sizeof(int64_t)) +
         heap(t.sequence_shapes.capacity() * sizeof(Shape));
    for (const Shape& sh : t.sequence_shapes) b += heap(sh.capacity() * sizeof(int64_t));
    if (t.value) b += heap(t.value->ints.capacity() * sizeof(int64_t)) + heap(t.value->reals.capacity() * sizeof(double));
    // The name index: a node (key, id, next pointer, cached hash) and a bucket per entry.
    b += heap(sizeof(std::string) + sizeof(TensorId) + 2 * sizeof(void*)) + heap_string(t.name) + 8;
  }
  for (const Node& n : g.nodes) {
    b += heap_string(n.name) + heap_string(n.op_type) + heap_string(n.domain) +
         heap(n.inputs.capacity() * sizeof(TensorId)) + heap(n.outputs.capacity() * sizeof(TensorId));
    for (const auto& [k, a] : n.attributes) {
      b += heap(sizeof(std::pair<const std::string, Attribute>) + 4 * sizeof(void*)) + heap_string(k) + heap_string(a.s) +
           heap_string(a.tensor_absent) + heap(a.ints.capacity() * sizeof(int64_t)) +
           heap(a.floats.capacity() * sizeof(double)) + heap(a.strings.capacity() * sizeof(std::string)) +
           heap(a.tensor_shape.capacity() * sizeof(int64_t));
      for (const auto& str : a.strings) b += heap_string(str);
      if (a.tensor) b += heap(a.tensor->ints.capacity() * sizeof(int64_t)) + heap(a.tensor->reals.capacity() * sizeof(double));
    }
  }
  for (const std::string& note : g.notes) b += heap_string(note) + static_cast<int64_t>(sizeof(std::string));
  return b;
}

namespace {

// Uploaded bytes by content hash (bounded in bytes), and imported models by hash, dims and name
// (bounded in estimated bytes and in entries); both least recently used first out.
class ModelCache {
 public:
  ModelCache(int64_t max_bytes, int64_t max_imported_bytes, int max_imported)
      : max_bytes_(max_bytes), max_imported_bytes_(max_imported_bytes), max_imported_(max_imported) {}

  std::string put(std::shared_ptr<const std::string> bytes, const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = bytes_.find(id); it != bytes_.end()) {
      touch(order_, it->second.pos);
      return id;
    }
    order_.push_front(id);
    total_ += static_cast<int64_t>(bytes->size());
    bytes_[id] = {std::move(bytes), order_.begin()};
    while (total_ > max_bytes_ && order_.size() > 1) {
      const std::string victim = order_.back();
      order_.pop_back();
      total_ -= static_cast<int64_t>(bytes_[victim].data->size());
      bytes_.erase(victim);
      for (auto it = imported_.begin(); it != imported_.end();) {
        if (it->first.rfind(victim + "|", 0) == 0) {
          imported_total_ -= it->second.bytes;
          imported_order_.erase(it->second.pos);
          it = imported_.erase(it);
        } else {
          ++it;
        }
      }
    }
    return id;
  }
  std::shared_ptr<const std::string> bytes(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = bytes_.find(id);
    if (it == bytes_.end()) return nullptr;
    touch(order_, it->second.pos);
    return it->second.data;
  }
  std::optional<Model> imported(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = imported_.find(key);
    if (it == imported_.end()) return std::nullopt;
    touch(imported_order_, it->second.pos);
    return it->second.model;
  }
  void keep_imported(const std::string& key, const Model& m) {
    const int64_t size = imported_bytes(m);
    std::lock_guard<std::mutex> l(mu_);
    if (imported_.count(key) || size > max_imported_bytes_) return;  // one over the whole budget is not kept
    imported_order_.push_front(key);
    imported_[key] = {m, imported_order_.begin(), size};
    imported_total_ += size;
    while (static_cast<int>(imported_.size()) > max_imported_ || imported_total_ > max_imported_bytes_) {
      auto victim = imported_.find(imported_order_.back());
      imported_total_ -= victim->second.bytes;
      imported_.erase(victim);
      imported_order_.pop_back();
    }
  }
  struct Stats {
    size_t models = 0;
    int64_t bytes = 0, imported_bytes = 0;
  };
  Stats stats() {
    std::lock_guard<std::mutex> l(mu_);
    return {bytes_.size(), total_, imported_total_};
  }

 private:
  static void touch(std::list<std::string>& order, std::list<std::string>::iterator& pos) {
    order.splice(order.begin(), order, pos);
    pos = order.begin();
  }
  struct Bytes {
    std::shared_ptr<const std::string> data;
    std::list<std::string>::iterator pos;
  };
  struct Imported {
    Model model;
    std::list<std::string>::iterator pos;
    int64_t bytes = 0;
  };
  std::mutex mu_;
  int64_t max_bytes_, max_imported_bytes_;
  int max_imported_;
  int64_t total_ = 0, imported_total_ = 0;
  std::list<std::string> order_, imported_order_;
  std::map<std::string, Bytes> bytes_;
  std::map<std::string, Imported> imported_;
};

// ---- helpers -------------------------------------------------------------------------------------

// An HTTP status for an error: the request's fault is 4xx, the server's 5xx.
int http_status(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound: return 404;  // a name that is not there (profile, model id)
    case ErrorCode::kIo: return 500;        // requests name no files: a read failing is the server's
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kDevice:
    case ErrorCode::kInternal: return 500;
    case ErrorCode::kLimit: return 413;
    default: return 400;
  }
}

std::optional<std::string> base64_decode(const std::string& in) {
  static const auto table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const std::string a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < a.size(); ++i) t[static_cast<unsigned char>(a[i])] = static_cast<int>(i);
    t[static_cast<unsigned char>('-')] = 62;  // the URL-safe alphabet too
    t[static_cast<unsigned char>('_')] = 63;
    return t;
  }();
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (const unsigned char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const int v = table[c];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

Error bad_request(std::string msg) { return make_error(ErrorCode::kInvalidArgument, std::move(msg)); }

Error model_too_large(size_t size, int64_t limit) {
  return make_error(ErrorCode::kLimit, fmt::format("the model is {} bytes; this server takes models up to {} bytes "
                                                   "(gpusim serve --max-model-mb)",
                                                   size, limit));
}

// The library speaks to the command line ("--dim batch=N", "or pass a path to a .yaml file"); over
// HTTP the same advice names the request's fields, and never offers paths.
// An API option as a request field: `dims batch=N` -> "dims": {"batch": N}, `dtype fp16` ->
// "dtype": "fp16", `gpu` -> "gpu".
std::string http_spelling(std::string_view name, std::string_view value) {
  return keyword_spelling(name, value, KeywordSyntax::kJson);
}

// A library message in the service's words: options as request fields (wording.h), and the
// CLI's profile listing as the endpoint that lists profiles.
std::string api_wording(std::string m) {
  m = reword_options(m, http_spelling);
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex(R"(^runtime: )"), "\"runtime\": "},
      {std::regex(R"( \(or (pass|give) a path to a [^;)]*(; `gpusim profiles list` shows[^)]*)?\))"), " (GET /v1/profiles lists them)"},
      {std::regex(R"( or give a path)"), ""},
      {std::regex(R"(`gpusim profiles list`)"), "GET /v1/profiles"},
  };
  for (const auto& [re, to] : rules) m = std::regex_replace(m, re, to);
  return m;
}

// A request id: the client's X-Request-Id when it is a sane token, else this process's next.
class RequestIds {
 public:
  RequestIds() : prefix_(fmt::format("{:08x}", std::random_device{}())) {}
  std::string next() { return fmt::format("{}-{:06d}", prefix_, ++n_); }
  std::string from(const std::string& client) {
    const bool sane = !client.empty() && client.size() <= 64 &&
                      std::all_of(client.begin(), client.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                      });
    return sane ? client : next();
  }

 private:
  std::string prefix_;
  std::atomic<int64_t> n_{0};
};

// The request being answered on this connection's thread (each connection is served by one).
struct RequestContext {
  std::string id;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};
thread_local RequestContext current;

// The memory a request's work holds of the server's budget, on the worker computing it.
thread_local Reservation* current_work = nullptr;

// What predicting a graph and writing its answer take per node and tensor (a 100,000-node ReLU chain
// peaked at 550 MB predicting it and writing its 110 MB answer: 2.5 KB each; bench/RESULTS.md, issue 56).
constexpr double kWorkBytesPerNode = 3 << 10;
// An import's own peak, reserved before the protobuf is parsed (the same chain's import peaked 134 MB
// above the process's start: 1.3 KB a node).
constexpr double kImportBytesPerNode = 2 << 10;
// A plan search's state and its ranked plans' document (the same chain's `plan --json` peaked at
// 1.16 GB: 5.8 KB each), and a comparison's prediction kept per GPU (85 MB a GPU for that chain:
// 0.42 KB each) beside the graph.
constexpr double kPlanBytesPerNode = 6 << 10;
constexpr double kCompareBytesPerNode = 1.5 * 1024, kCompareBytesPerNodeAndGpu = 512;

// The profiles one comparison may name (the project ships about 80; a list of thousands is work
// for minutes, not a question).
constexpr size_t kMaxComparedGpus = 1024;

// Prometheus counters and the request latency histogram.
class Metrics {
 public:
  static constexpr double kBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  static constexpr size_t kNumBuckets = sizeof(kBuckets) / sizeof(kBuckets[0]);
  void record(const std::string& route, int status, double seconds) {
    std::lock_guard<std::mutex> l(mu_);
    ++counts_[{route, status}];
    for (size_t i = 0; i < kNumBuckets; ++i) {
      if (seconds <= kBuckets[i]) ++buckets_[i];
    }
    ++observed_;
    sum_ += seconds;
  }
  std::string text() {
    std::lock_guard<std::mutex> l(mu_);
    std::string out =
        "# HELP gpusim_requests_total Requests answered, by route and HTTP status.\n"
        "# TYPE gpusim_requests_total counter\n";
    for (const auto& [k, n] : counts_) {
      out += fmt::format("gpusim_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
    }
    out +=
        "# HELP gpusim_request_duration_seconds Time from a request's headers to its answer.\n"
        "# TYPE gpusim_request_duration_seconds histogram\n";
    for (size_t i = 0; i < kNumBuckets; ++i) {
      out += fmt::format("gpusim_request_duration_seconds_bucket{{le=\"{}\"}} {}\n", kBuckets[i], buckets_[i]);
    }
    out += fmt::format("gpusim_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", observed_);
    out += fmt::format("gpusim_request_duration_seconds_sum {}\ngpusim_request_duration_seconds_count {}\n", sum_, observed_);
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> counts_;
  std::array<int64_t, kNumBuckets> buckets_{};
  int64_t observed_ = 0;
  double sum_ = 0;
};

// A route label for metrics and the access log: the route's template, never a client's string.
std::string route_label(const std::string& path) {
  static const std::set<std::string> fixed = {"/healthz",    "/openapi.json", "/metrics",     "/v1/profiles",
                                              "/v1/models",  "/v1/predict",   "/v1/compare",  "/v1/plan",
                                              "/v1/validate", "/v1/generate"};
  if (fixed.count(path)) return path;
  if (path.rfind("/v1/profiles/", 0) == 0) return "/v1/profiles/{name}";
  return "other";
}

// The methods a known path answers (empty: not a path of this API).
std::string allowed_methods(const std::string& path) {
  if (path == "/healthz" || path == "/openapi.json" || path == "/metrics" || path == "/v1/profiles" ||
      path.rfind("/v1/profiles/", 0) == 0) {
    return "GET, HEAD";
  }
  if (path == "/v1/models" || path == "/v1/predict" || path == "/v1/compare" || path == "/v1/plan" ||
      path == "/v1/validate" || path == "/v1/generate") {
    return "POST";
  }
  return "";
}


// A host name from a Host header or an Origin URL, lower case, without port or brackets.
std::string host_name(std::string h) {
  if (auto scheme = h.find("://"); scheme != std::string::npos) h = h.substr(scheme + 3);
  if (auto slash = h.find('/'); slash != std::string::npos) h = h.substr(0, slash);
  if (!h.empty() && h[0] == '[') {
    const auto close = h.find(']');
    h = close == std::string::npos ? h.substr(1) : h.substr(1, close - 1);
  } else if (auto colon = h.find(':'); colon != std::string::npos && h.find(':', colon + 1) == std::string::npos) {
    h = h.substr(0, colon);
  }
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return h;
}

bool is_ip_literal(const std::string& h) {
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

// Constant-time comparison of a presented token with the configured one.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

// The fields each POST route reads; anything else is refused with the closest of these.
const std::vector<std::string>& fields_of(const std::string& path) {
  static const std::vector<std::string> models = {"model_name", "dims", "dim"};
  static const std::vector<std::string> predict = {"model_id", "model_base64", "model_name", "dims",    "dim",  "gpu",
                                                   "gpu_yaml", "dtype",        "tiles",      "runtime", "plan",
                                                   "allow_tf32", "host"};
  static const std::vector<std::string> compare = {
      "model_id", "model_base64", "model_name", "dims",     "dim",    "gpus",    "dtype",   "tiles",
      "runtime",  "plan",         "allow_tf32", "host",     "llm",    "llm_text", "weights", "prompt",
      "generate", "batch",        "ubatch",     "backend",  "flash_attention", "cuda_prompt", "runtimes",
      "gpu",      "batches", "prices"};
  static const std::vector<std::string> plan = {"model_id",  "model_base64", "model_name", "dims",      "dim",
                                                "gpu",       "gpu_yaml",     "dtype",      "tiles",     "scheduler",
                                                "objective", "top",          "beam_width", "samples",   "seed",
                                                "memory_budget_gb", "allow_tf32"};
  static const std::vector<std::string> validate = {"gpus", "runtime", "runs"};
  static const std::vector<std::string> generate = {
      "llm",     "llm_text", "model_id", "model_base64", "model_name", "gpu",     "gpu_yaml",        "weights",     "prompt",
      "generate", "batch",   "ubatch",   "backend",      "flash_attention", "cuda_prompt", "dtype", "runtime", "tiles",
      "allow_tf32", "host"};
  static const std::vector<std::string> none;
  if (path == "/v1/models") return models;
  if (path == "/v1/predict") return predict;
  if (path == "/v1/compare") return compare;
  if (path == "/v1/plan") return plan;
  if (path == "/v1/validate") return validate;
  if (path == "/v1/generate") return generate;
  return none;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t p = 0; p <= s.size(); ++p) {
    if (p == s.size() || s[p] == ',') {
      if (p > start) out.push_back(s.substr(start, p - start));
      start = p + 1;
    }
  }
  return out;
}

}  // namespace

// What one request asks, from a JSON body or from query parameters beside a raw ONNX body.
struct Request {
  json body = json::object();
  std::shared_ptr<const std::string> raw_model;  // when the body is the model itself
};

struct Service::Impl {
  ServiceOptions opts;
  Session session;
  ModelCache cache;
  JobThreads pool;  // the compute workers, with the bounded queue
  RequestIds ids;
  GuardedServer server;
  Metrics metrics;
  std::optional<Validation> truth_records;  // opts.truth, read on first use
  std::mutex truth_mu;
  std::atomic<int64_t> requests{0}, errors{0}, timeouts{0}, rejected{0}, cancelled{0};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool bound = false;
  std::mutex tokens_mu;
  std::set<std::shared_ptr<CancelToken>> in_flight;  // the work of requests not yet answered
  std::atomic<bool> stopping{false};

  static ConnectionLimits limits_of(const ServiceOptions& o) {
    ConnectionLimits l;
    l.max_connections = o.max_connections;
    l.max_requests_per_connection = o.max_requests_per_connection;
    l.header_timeout_s = o.header_timeout_s;
    l.body_timeout_s = o.body_timeout_s;
    l.idle_timeout_s = o.idle_timeout_s;
    l.max_body_bytes = o.max_body_bytes;
    l.memory_budget_bytes = o.memory_budget_bytes;
    return l;
  }

  explicit Impl(ServiceOptions o)
      : opts(std::move(o)),
        session(SessionOptions{opts.profile_dirs, {}}),
        cache(opts.model_cache_bytes, opts.imported_cache_bytes, opts.imported_cache_entries),
        pool(opts.workers > 0 ? opts.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
             static_cast<size_t>(std::max(1, opts.queue))),
        server(limits_of(opts), [](const Error& e, const std::string& id) { return error_json(e, id); },
               [this] { return ids.next(); }) {
    routes();
  }

  // The workers finish (cancelled work ends at its next check) while every member they use lives.
  ~Impl() { pool.shutdown(); }

  static std::string error_json(const Error& e, const std::string& id) {
    json doc = {{"schema", "gpusim.error/1"},
                {"error", {{"code", std::string(error_code_name(e.code))}, {"message", api_wording(e.message)}}}};
    if (!id.empty()) doc["request_id"] = id;
    return doc.dump(2, ' ', false, kInvalidUtf8);
  }

  void log(const std::string& line) {
    if (opts.log) opts.log(line);
  }

  void send_error(httplib::Response& res, int status, const Error& e) {
    res.status = status;
    res.set_content(error_json(e, current.id), "application/json");
  }

  // ---- parsing, under limits ----

  // A JSON body parsed under depth and value limits: one linear pass over its structure (brackets
  // and commas outside strings) refuses a deeply nested or huge body before any of it becomes a
  // document, so the DOM built afterwards is bounded by the limits. (nlohmann's callback parser
  // cannot stop early cheaply: it rescans each container as every member ends, quadratic in a
  // large array.)
  Result<json> parse_json(const std::string& text) {
    const JsonScan scan = scan_json(text, opts.max_json_depth, opts.max_json_values);
    if (scan.too_deep_at != std::string_view::npos) {
      return make_error(ErrorCode::kLimit, fmt::format("the JSON body nests deeper than {} levels (gpusim serve "
                                                       "--max-json-depth)",
                                                       opts.max_json_depth));
    }
    if (scan.too_many_values) {
      return make_error(ErrorCode::kLimit, fmt::format("the JSON body has over {} values (gpusim serve "
                                                       "--max-json-values)",
                                                       opts.max_json_values));
    }
    try {
      return json::parse(text);
    } catch (const json::exception& e) {
      return bad_request(fmt::format("the request body is not valid JSON ({})", e.what()));
    }
  }

  // Refuses a field this route does not read, naming the closest one it does.
  static Status known_fields(const std::string& path, const std::vector<std::string>& given, const char* where) {
    const std::vector<std::string>& known = fields_of(path);
    for (const std::string& f : given) {
      if (std::find(known.begin(), known.end(), f) != known.end()) continue;
      const auto near = closest_names(f, known, 1, std::max<size_t>(2, f.size() / 3));
      // The name as sent, but never more of it than a reader needs (a 60 MiB key was echoed whole).
      const std::string shown = f.size() > 64 ? f.substr(0, 64) + fmt::format("... ({} bytes)", f.size()) : f;
      return bad_request(fmt::format("{} \"{}\" is not a field of POST {}{}; its fields: {}", where, shown, path,
                                     near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near[0]),
                                     fmt::join(known, ", ")));
    }
    return Ok{};
  }

  // Parses the request: a JSON object, or raw ONNX bytes with options in the query string. The
  // Content-Type was checked before the body was read (pre-routing).
  Result<Request> parse(const httplib::Request& req) {
    Request r;
    const std::string type = req.get_header_value("Content-Type");
    const bool raw = type.rfind("application/octet-stream", 0) == 0 || type.rfind("application/onnx", 0) == 0;
    if (!raw && !req.params.empty()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : req.params) names.push_back(k);
      return bad_request(fmt::format("query parameter \"{}\": with a JSON body every option goes in the body (query "
                                     "parameters are read only beside a raw model body, application/octet-stream)",
                                     names[0]));
    }
    if (raw) {
      if (static_cast<int64_t>(req.body.size()) > opts.max_model_bytes) {
        return model_too_large(req.body.size(), opts.max_model_bytes);
      }
      r.raw_model = std::make_shared<const std::string>(req.body);
      std::vector<std::string> names;
      for (const auto& [k, v] : req.params) {
        if (k.rfind("dim.", 0) == 0) {  // dim.batch=1, the easy form in a URL
          if (!r.body.contains("dim")) r.body["dim"] = json::array();
          r.body["dim"].push_back(k.substr(4) + "=" + v);
          names.push_back("dim");
        } else if (k == "dim" || k == "dims" || k == "gpus") {
          if (!r.body.contains(k)) r.body[k] = json::array();
          for (const std::string& piece : split_commas(v)) r.body[k].push_back(piece);
          names.push_back(k);
        } else if (k == "top" || k == "beam_width" || k == "samples" || k == "seed" || k == "prompt" || k == "generate" ||
                   k == "batch" || k == "ubatch") {
          int64_t n = 0;
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (ec != std::errc() || end != v.data() + v.size()) {
            return bad_request(fmt::format("query parameter {}=\"{}\" is not an integer", k, v));
          }
          r.body[k] = n;
          names.push_back(k);
        } else if (k == "allow_tf32") {
          if (v != "true" && v != "false") {
            return bad_request(fmt::format("query parameter {}=\"{}\" is not true or false", k, v.substr(0, 64)));
          }
          r.body[k] = v == "true";
          names.push_back(k);
        } else if (k == "memory_budget_gb") {
          char* end = nullptr;
          const double x = std::strtod(v.c_str(), &end);
          if (v.empty() || end != v.c_str() + v.size()) {
            return bad_request(fmt::format("query parameter {}=\"{}\" is not a number", k, v));
          }
          r.body[k] = x;
          names.push_back(k);
        } else {
          r.body[k] = v;
          names.push_back(k);
        }
      }
      if (auto st = known_fields(req.path, names, "query parameter"); !st) return st.error();
      return r;
    }
    if (req.body.empty()) return r;
    auto body = parse_json(req.body);
    if (!body) return body.error();
    r.body = std::move(*body);
    if (!r.body.is_object()) return bad_request("the request body must be a JSON object");
    std::vector<std::string> names;
    for (const auto& [k, v] : r.body.items()) names.push_back(k);
    if (auto st = known_fields(req.path, names, "field"); !st) return st.error();
    return r;
  }

  // A string field, checked.
  static Result<std::string> str(const json& b, const char* key, bool required) {
    if (!b.contains(key)) {
      if (required) return bad_request(fmt::format("\"{}\" is missing", key));
      return std::string();
    }
    if (!b[key].is_string()) {
      return bad_request(fmt::format("\"{}\" must be a string, got a {}", key, b[key].type_name()));
    }
    return b[key].get<std::string>();
  }

  // "allow_tf32": fp32 GEMMs and convolutions as TF32 (TargetOptions); unset: false.
  static Result<TargetOptions> target_options(const json& b) {
    TargetOptions o;
    if (!b.contains("allow_tf32")) return o;
    if (!b["allow_tf32"].is_boolean()) {
      return bad_request(fmt::format("\"allow_tf32\" must be true or false, got a {}", b["allow_tf32"].type_name()));
    }
    o.allow_tf32 = b["allow_tf32"].get<bool>();
    return o;
  }

  static Result<std::vector<std::string>> strings(const json& b, const char* key) {
    std::vector<std::string> out;
    if (!b.contains(key)) return out;
    const json& v = b[key];
    if (v.is_string()) return split_commas(v.get<std::string>());  // "a,b" as --gpus takes it
    if (!v.is_array()) return bad_request(fmt::format("\"{}\" must be an array of strings", key));
    for (const json& e : v) {
      if (!e.is_string()) return bad_request(fmt::format("\"{}\" must be an array of strings, has a {}", key, e.type_name()));
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  // "dims": {"batch": 1} or ["batch=1"] (or "dim" from the query string).
  static Result<std::vector<std::string>> dims(const json& b) {
    std::vector<std::string> out;
    for (const char* key : {"dims", "dim"}) {
      if (!b.contains(key)) continue;
      const json& d = b[key];
      if (d.is_object()) {
        for (const auto& [k, v] : d.items()) {
          if (!v.is_number_integer()) {
            return bad_request(fmt::format("\"dims\": \"{}\" must be an integer, got a {}", k, v.type_name()));
          }
          out.push_back(fmt::format("{}={}", k, v.get<int64_t>()));
        }
      } else {
        auto s = strings(b, key);
        if (!s) return s.error();
        for (auto& x : *s) out.push_back(std::move(x));
      }
    }
    return out;
  }

  // ---- names, never paths ----

  // The one check every field naming a server-side file (a GPU profile, a runtime) goes through:
  // a name, as GET /v1/profiles lists them, never a path, an absolute path, a traversal or a
  // file name. The name is then looked up in the server's configured directories only.
  static Status plain_name(const char* field, const std::string& v, const char* listing) {
    const bool ok = !v.empty() && v.size() <= 128 && v[0] != '.' && !v.ends_with(".yaml") && !v.ends_with(".yml") &&
                    !v.ends_with(".json") &&
                    std::all_of(v.begin(), v.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
                             c == ' ' || c == '+';
                    });
    if (ok) return Ok{};
    return bad_request(fmt::format("\"{}\": \"{}\" is not a name; the server takes names only, never paths or file "
                                   "names ({})",
                                   field, v, listing));
  }

  // A file of the server's own directories that did not load: the client learns that, not what the
  // file holds (its reason goes to the server's log).
  Error server_file_error(const char* what, const std::string& name, const Error& e) {
    log(fmt::format("{} {} \"{}\" cannot be used: {}", current.id, what, name, e.message));
    return make_error(ErrorCode::kInternal, fmt::format("{} \"{}\" on this server cannot be read; the server's log has "
                                                        "the reason (request {})",
                                                        what, name, current.id));
  }

  Result<GpuProfile> gpu_named(const char* field, const std::string& name) {
    if (auto st = plain_name(field, name, "GET /v1/profiles lists them; or send the profile's text in \"gpu_yaml\""); !st) {
      return st.error();
    }
    // A name no profile has is kNotFound (with the closest names); any other failure is a file of
    // the server's directories that did not load.
    auto p = session.gpu(name);
    if (!p && p.error().code != ErrorCode::kNotFound) return server_file_error("profile", name, p.error());
    return p;
  }

  // The runtime a request names, loaded from the server's runtime directories (none when unnamed).
  Result<std::optional<RuntimeModel>> runtime_named(const char* field, const std::string& name) {
    if (name.empty()) return std::optional<RuntimeModel>();
    if (auto st = plain_name(field, name, "runtimes are named by the files of the server's runtime directories, e.g. "
                                           "pytorch-eager"); !st) {
      return st.error();
    }
    const std::vector<std::string> dirs = default_runtime_dirs();
    auto r = find_runtime(name, dirs);
    if (r) return std::optional<RuntimeModel>(std::move(*r));
    // A name the runtime directories do not list is unknown; a listed one that fails to load is a
    // file of the server's that is broken.
    const std::vector<std::string> known = list_runtimes(dirs);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return make_error(ErrorCode::kNotFound, fmt::format("\"{}\": {}", field, r.error().message));
    }
    return server_file_error("runtime", name, r.error());
  }

  // The host a request names or describes ("" when none): a host profile of the server's host
  // directories or key=value pairs, never a path (no request reads a file it names).
  Result<std::string> host_named(const json& b) {
    auto h = str(b, "host", false);
    if (!h) return h.error();
    if (h->find('/') != std::string::npos || h->find('\\') != std::string::npos || h->ends_with(".yaml") ||
        h->size() > 256) {
      return bad_request(fmt::format("\"host\": \"{}\" is not a host profile's name or a description; name one of "
                                     "the server's (e.g. windows) or describe it as key=value pairs, e.g. "
                                     "os=windows,single_thread=2200",
                                     h->substr(0, 64)));
    }
    return h;
  }

  // ---- the model, the GPU and the options of a request ----

  // The imported-model cache key: the same bytes with the same dims and name import alike.
  static std::string import_key(const std::string& id, const std::vector<std::string>& dims, const std::string& name) {
    return fmt::format("{}|{}|{}", id, fmt::join(dims, ","), name);
  }

  // A request's model bytes: the body itself, an uploaded model_id, or model_base64; with the name
  // messages use and the cache id ("" until cached).
  struct ModelBytes {
    std::shared_ptr<const std::string> bytes;
    std::string id, shown;
  };

  Result<ModelBytes> model_bytes(const Request& r) {
    ModelBytes out;
    out.bytes = r.raw_model;
    if (!out.bytes) {
      auto mid = str(r.body, "model_id", false);
      if (!mid) return mid.error();
      auto b64 = str(r.body, "model_base64", false);
      if (!b64) return b64.error();
      if (!mid->empty() && !b64->empty()) return bad_request("give \"model_id\" or \"model_base64\", not both");
      if (!mid->empty()) {
        out.bytes = cache.bytes(*mid);
        if (!out.bytes) {
          return make_error(ErrorCode::kNotFound, fmt::format("model_id \"{}\" is not on this server (evicted or never "
                                                              "uploaded); POST the model to /v1/models again",
                                                              mid->substr(0, 64)));
        }
        out.id = *mid;
      } else if (!b64->empty()) {
        auto decoded = base64_decode(*b64);
        if (!decoded) return bad_request("\"model_base64\" is not base64");
        if (static_cast<int64_t>(decoded->size()) > opts.max_model_bytes) {
          return model_too_large(decoded->size(), opts.max_model_bytes);
        }
        out.bytes = std::make_shared<const std::string>(std::move(*decoded));
      } else {
        return bad_request("no model: give \"model_id\" (from POST /v1/models), \"model_base64\", or POST the .onnx "
                           "bytes as application/octet-stream");
      }
    }
    auto name = str(r.body, "model_name", false);
    if (!name) return name.error();
    out.shown = name->empty() ? "model.onnx" : *name;
    return out;
  }

  // The request's model; at `batch` (every input's leading axis, ModelOptions::batch) when given.
  Result<Model> model(const Request& r, std::optional<int64_t> batch = std::nullopt) {
    auto d = dims(r.body);
    if (!d) return d.error();
    auto mb = model_bytes(r);
    if (!mb) return mb.error();
    if (mb->id.empty()) mb->id = cache.put(mb->bytes, content_hash(*mb->bytes));
    const std::string key = import_key(mb->id, *d, mb->shown) + (batch ? fmt::format("|batch={}", *batch) : "");
    if (auto m = cache.imported(key)) return *m;
    ModelOptions mo = model_options(*d);
    mo.batch = batch;
    auto m = session.open_model_bytes(*mb->bytes, mb->shown, mo);
    if (!m) return m.error();
    cache.keep_imported(key, *m);
    return m;
  }

  // How the service imports: the node limit, and the import's memory reserved once its node count
  // is known, before the graph is parsed.
  ModelOptions model_options(std::vector<std::string> dims) {
    ModelOptions mo;
    mo.dims = std::move(dims);
    mo.max_nodes = opts.max_nodes;
    mo.admit = [this](int64_t nodes) { return reserve(static_cast<double>(nodes) * kImportBytesPerNode, nodes, "import"); };
    return mo;
  }

  static double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

  // Reserves `bytes` of the budget for this request's work (`nodes` and `what` for the message).
  Status reserve(double bytes, int64_t nodes, const char* what) {
    if (!current_work || !current_work->budget()) return Ok{};
    const int64_t need = static_cast<int64_t>(bytes);
    const int64_t budget = current_work->budget()->max();
    if (budget > 0 && need > budget) {
      return make_error(ErrorCode::kLimit, fmt::format("the model's {} nodes need about {:.1f} MiB to {}, more than the "
                                                       "server's memory budget of {:.1f} MiB (gpusim serve --memory-mb)",
                                                       nodes, mib(need), what, mib(budget)));
    }
    if (!current_work->add(need, 2.0)) {
      return make_error(ErrorCode::kUnavailable, fmt::format("the server's memory budget ({:.1f} MiB) is held by the "
                                                             "requests in flight and this model needs {:.1f} MiB of it "
                                                             "to {}; retry shortly",
                                                             mib(budget), mib(need), what));
    }
    return Ok{};
  }

  // Reserves the memory a graph's prediction and answer will take, before they are built: waits a
  // moment for other requests to release theirs, then refuses (503; 413 when it is more than the
  // whole budget).
  Status reserve_work(const Model& m, double bytes_per_item) {
    const size_t items = m.graph().nodes.size() + m.graph().tensors.size();
    return reserve(static_cast<double>(items) * bytes_per_item, static_cast<int64_t>(m.graph().nodes.size()),
                   "predict and answer");
  }


  Result<GpuProfile> gpu(const json& b) {
    auto yaml = str(b, "gpu_yaml", false);
    if (!yaml) return yaml.error();
    if (!yaml->empty()) {
      if (b.contains("gpu")) return bad_request("give \"gpu\" or \"gpu_yaml\", not both");
      return session.gpu_from_yaml(*yaml, "gpu_yaml");
    }
    auto name = str(b, "gpu", true);
    if (!name) return name.error();
    return gpu_named("gpu", *name);
  }

  // "dtype": unset, or fp32/fp16/bf16/int8/fp8.
  static Result<std::optional<DType>> dtype(const json& b) {
    auto name = str(b, "dtype", false);
    if (!name) return name.error();
    if (name->empty()) return std::optional<DType>();
    if (auto d = retype_dtype_from_name(*name)) return std::optional<DType>(*d);
    return bad_request(fmt::format("\"dtype\": \"{}\" is not supported; expected fp32, fp16, bf16, int8 or fp8",
                                   name->substr(0, 64)));
  }

  // "tiles": generated | library; unset: the runtime's (generated for gpusim's own, library for a
  // framework's).
  Result<TileSpace> tiles(const json& b, const std::string& runtime) {
    auto name = str(b, "tiles", false);
    if (!name) return name.error();
    if (name->empty()) return session.runtime_tiles(runtime);
    auto t = parse_tile_space(*name, "\"tiles\"");
    if (!t) return bad_request(fmt::format("\"tiles\": \"{}\" is not a tile space; expected generated or library",
                                           name->substr(0, 64)));
    return t;
  }

  // "dtype" and "runtime": how a graph's kernels are typed and launched.
  Result<PredictRequest> graph_request(const json& b) {
    PredictRequest p;
    auto d = dtype(b);
    if (!d) return d.error();
    p.dtype = *d;
    auto rt = str(b, "runtime", false);
    if (!rt) return rt.error();
    if (auto st = runtime_named("runtime", *rt); !st) return st.error();
    p.runtime = *rt;
    auto host = host_named(b);
    if (!host) return host.error();
    p.host = *host;
    return p;
  }

  Result<PredictRequest> predict_request(const json& b, const Model& m) {
    auto req = graph_request(b);
    if (!req) return req.error();
    PredictRequest p = std::move(*req);
    if (b.contains("plan")) {
      const std::string text = b["plan"].is_string() ? b["plan"].get<std::string>() : b["plan"].dump(-1, ' ', false, kInvalidUtf8);
      auto plan = session.load_plan(m, text, "plan");
      if (!plan) return plan.error();
      p.plan = std::move(*plan);
    }
    return p;
  }

  // ---- handlers (run on a worker) ----

  Result<std::string> do_upload(const Request& r) {
    if (!r.raw_model) {
      return bad_request("POST the .onnx file's bytes as the body, with Content-Type: application/octet-stream");
    }
    auto d = dims(r.body);
    if (!d) return d.error();
    auto name = str(r.body, "model_name", false);
    if (!name) return name.error();
    const std::string shown = name->empty() ? "model.onnx" : *name;
    const std::string id = cache.put(r.raw_model, content_hash(*r.raw_model));
    json out = {{"schema", "gpusim.model/1"}, {"model_id", id}, {"name", shown},
                {"size_bytes", r.raw_model->size()}};
    // Imported now with the dims given (if any), so a broken file is refused at once; a model
    // that only needs dims is kept and imported when a request gives them.
    auto m = session.open_model_bytes(*r.raw_model, shown, model_options(*d));
    if (m) {
      cache.keep_imported(import_key(id, *d, shown), *m);
      json inputs = json::array();
      for (TensorId t : m->graph().inputs) {
        const Tensor& ten = m->graph().tensor(t);
        inputs.push_back({{"name", ten.name}, {"dtype", std::string(dtype_name(ten.dtype))}, {"shape", ten.shape}});
      }
      out["imported"] = true;
      out["inputs"] = inputs;
      out["nodes"] = m->graph().nodes.size();
    } else if (m.error().code == ErrorCode::kShape) {
      out["imported"] = false;
      out["note"] = "kept; give the dims it needs with each request: " + api_wording(m.error().message);
    } else {
      return m.error();
    }
    return out.dump(2, ' ', false, kInvalidUtf8);
  }

  Result<std::string> do_predict(const Request& r) {
    auto m = model(r);
    if (!m) return m.error();
    if (auto st = reserve_work(*m, kWorkBytesPerNode); !st) return st.error();
    auto g = gpu(r.body);
    if (!g) return g.error();
    auto req = predict_request(r.body, *m);
    if (!req) return req.error();
    auto t = tiles(r.body, req->runtime);
    if (!t) return t.error();
    auto to = target_options(r.body);
    if (!to) return to.error();
    auto p = session.predict(*m, session.target(*g, *t, *to), *req);
    if (!p) return p.error();
    return prediction_document(*p, *g);
  }

  Result<std::string> do_compare(const Request& r) {
    if (r.body.contains("runtimes") || r.body.contains("batches")) return compare_runtimes(r);
    if (r.body.contains("gpu")) {
      return bad_request("\"gpu\" names the one GPU of a comparison of \"runtimes\"; to compare GPUs, name them in "
                         "\"gpus\"");
    }
    auto gpus = strings(r.body, "gpus");
    if (!gpus) return gpus.error();
    if (gpus->empty()) return bad_request("\"gpus\" is missing: name the profiles to compare");
    if (gpus->size() > kMaxComparedGpus) {
      return bad_request(fmt::format("\"gpus\" names {} profiles; a comparison takes at most {}", gpus->size(),
                                     kMaxComparedGpus));
    }
    for (const std::string& n : *gpus) {
      check_cancelled();  // each load reads the profile directories: a long list is minutes
      auto g = gpu_named("gpus", n);  // each a name of the server's profiles, checked before compare reads it
      if (!g) return g.error();
    }
    // A language model's description compares its generation, as `gpusim compare` does.
    if (!r.raw_model && (r.body.contains("llm") || r.body.contains("llm_text"))) return compare_description(r, *gpus);
    for (const char* f : {"weights", "prompt", "generate", "batch", "ubatch", "backend", "flash_attention",
                          "cuda_prompt", "prices"}) {
      if (r.body.contains(f)) {
        return bad_request(fmt::format("\"{}\" applies to a language model's generation: give its description as "
                                       "\"llm\" or \"llm_text\" (an ONNX decoder's generation is /v1/generate's, one "
                                       "GPU at a time)",
                                       f));
      }
    }
    auto m = model(r);
    if (!m) return m.error();
    if (auto st = reserve_work(*m, kCompareBytesPerNode + kCompareBytesPerNodeAndGpu * static_cast<double>(gpus->size()));
        !st) {
      return st.error();
    }
    auto req = predict_request(r.body, *m);
    if (!req) return req.error();
    auto t = tiles(r.body, req->runtime);
    if (!t) return t.error();
    auto to = target_options(r.body);
    if (!to) return to.error();
    auto rows = session.compare(*m, *gpus, *t, *req, *to);
    if (!rows) return rows.error();
    return compare_document(m->source(), *rows);
  }

  // /v1/compare with "runtimes": the runtimes that run a graph on one GPU ("gpu"), ranked at each of
  // "batches" (gpusim.compare-runtimes/1, as `gpusim compare --runtimes`).
  Result<std::string> compare_runtimes(const Request& r) {
    constexpr size_t kMaxBatches = 16;
    if (!r.body.contains("runtimes")) {
      return bad_request("\"batches\" goes with \"runtimes\" (the runtimes to rank, or \"all\")");
    }
    for (const char* f : {"gpus", "runtime", "tiles", "plan", "llm", "llm_text", "weights", "prompt", "generate", "batch",
                          "ubatch", "backend", "flash_attention", "cuda_prompt", "prices"}) {
      if (r.body.contains(f)) {
        return bad_request(fmt::format("\"{}\" does not apply with \"runtimes\", which ranks the runtimes that run "
                                       "an ONNX graph on one GPU (\"gpu\"), each in its own tile space",
                                       f));
      }
    }
    auto runtimes = strings(r.body, "runtimes");
    if (!runtimes) return runtimes.error();
    auto g = gpu(r.body);
    if (!g) return g.error();
    std::vector<std::optional<int64_t>> batches;
    if (r.body.contains("batches")) {
      const json& b = r.body["batches"];
      if (!b.is_array() || b.empty()) return bad_request("\"batches\" must be a non-empty array of batch sizes");
      if (b.size() > kMaxBatches) {
        return bad_request(fmt::format("\"batches\" gives {} sizes; a comparison takes at most {}", b.size(), kMaxBatches));
      }
      for (const json& e : b) {
        if (!e.is_number_integer() || e.get<int64_t>() < 1) {
          return bad_request(fmt::format("\"batches\": {} is not a batch size; give integers of 1 or more",
                                         e.dump(-1, ' ', false, kInvalidUtf8)));
        }
        batches.emplace_back(e.get<int64_t>());
      }
    } else {
      batches.emplace_back(std::nullopt);
    }
    RuntimeComparisonOptions ro;
    ro.runtimes = *runtimes;
    std::vector<RuntimeComparison> out;
    std::string source;
    for (const std::optional<int64_t>& b : batches) {
      check_cancelled();
      auto m = model(r, b);
      if (!m) return m.error();
      if (auto st = reserve_work(*m, kCompareBytesPerNode + kCompareBytesPerNodeAndGpu * 16); !st) return st.error();
      auto req = predict_request(r.body, *m);
      if (!req) return req.error();
      auto to = target_options(r.body);
      if (!to) return to.error();
      auto c = session.compare_runtimes(*m, *g, ro, *req, *to);
      if (!c) return c.error();
      source = m->source();
      out.push_back(std::move(*c));
    }
    return runtime_comparison_document(source, out);
  }

  Result<std::string> do_plan(const Request& r) {
    auto m = model(r);
    if (!m) return m.error();
    if (auto st = reserve_work(*m, kPlanBytesPerNode); !st) return st.error();
    auto g = gpu(r.body);
    if (!g) return g.error();
    SearchOptions o;
    const json& b = r.body;
    auto sched = str(b, "scheduler", false);
    if (!sched) return sched.error();
    if (!sched->empty()) {
      auto k = parse_scheduler(sched->substr(0, 64), "\"scheduler\":");
      if (!k) return k.error();
      o.scheduler = *k;
    }
    auto obj = str(b, "objective", false);
    if (!obj) return obj.error();
    if (!obj->empty()) {
      auto ob = parse_objective(obj->substr(0, 64), "\"objective\":");
      if (!ob) return ob.error();
      o.objective = *ob;
    }
    auto d = dtype(b);
    if (!d) return d.error();
    o.dtype = *d;
    for (const SearchOptionRange& f : kSearchOptionRanges) {
      if (!b.contains(f.name)) continue;
      if (!b[f.name].is_number_integer() || b[f.name].get<int64_t>() < f.lo || b[f.name].get<int64_t>() > f.hi) {
        return bad_request(fmt::format("\"{}\": {} is out of range; give an integer from {} to {}", f.name,
                                       b[f.name].dump(-1, ' ', false, kInvalidUtf8).substr(0, 64), f.lo, f.hi));
      }
      o.*f.field = static_cast<int>(b[f.name].get<int64_t>());
    }
    if (b.contains("seed")) {
      if (!b["seed"].is_number_integer() || b["seed"].get<int64_t>() < 0) {
        return bad_request("\"seed\" must be a non-negative integer");
      }
      o.seed = b["seed"].get<uint64_t>();
    }
    {
      std::vector<std::string> given;
      for (const char* f : {"beam_width", "samples", "seed"}) {
        if (b.contains(f)) given.emplace_back(f);
      }
      if (auto st = check_scheduler_settings(o.scheduler, given); !st) return st.error();
    }
    if (b.contains("memory_budget_gb")) {
      if (!b["memory_budget_gb"].is_number() || !(b["memory_budget_gb"].get<double>() > 0)) {
        return bad_request(fmt::format("\"memory_budget_gb\": {} must be a positive number",
                                       b["memory_budget_gb"].dump(-1, ' ', false, kInvalidUtf8).substr(0, 64)));
      }
      o.memory_budget_gb = b["memory_budget_gb"].get<double>();
    }
    auto t = tiles(b, "");
    if (!t) return t.error();
    auto to = target_options(b);
    if (!to) return to.error();
    auto res = session.plan(*m, session.target(*g, *t, *to), o);
    if (!res) return res.error();
    return plan_search_document(m->source(), m->graph(), *g, o, *res);
  }

  // A generation's token counts: "prompt", "generate", "batch" and "ubatch", each an integer when given.
  static Status generation_counts(const json& b, GenerationOptions& o) {
    struct IntField {
      const char* name;
      int64_t GenerationOptions::*field;
    };
    for (const IntField& f : {IntField{"prompt", &GenerationOptions::prompt}, IntField{"generate", &GenerationOptions::generate},
                              IntField{"batch", &GenerationOptions::batch}, IntField{"ubatch", &GenerationOptions::ubatch}}) {
      if (!b.contains(f.name)) continue;
      if (!b[f.name].is_number_integer()) {
        return bad_request(fmt::format("\"{}\" must be an integer, got a {}", f.name, b[f.name].type_name()));
      }
      o.*f.field = b[f.name].get<int64_t>();
    }
    return Ok{};
  }

  // A generation (llm.h): of a language model's description — "llm" names a bundled one
  // (models/llm), or "llm_text" is one's text (gpusim.llm/1 YAML or a config.json) — as llama.cpp
  // runs it; or of an ONNX decoder with a KV cache (model_id, model_base64 or the .onnx bytes as the
  // body), its own graph pass by pass.
  // The description a generation names: "llm" (a bundled description's name) or "llm_text" (a
  // gpusim.llm/1 YAML or a config.json), one of them.
  Result<LlmSpec> description(const json& b) {
    auto name = str(b, "llm", false);
    if (!name) return name.error();
    auto text = str(b, "llm_text", false);
    if (!text) return text.error();
    if (name->empty() == text->empty()) {
      return bad_request("give the model as \"llm\" (a bundled description's name, such as llama-2-7b), \"llm_text\" "
                         "(a gpusim.llm/1 YAML or a config.json), or an ONNX decoder with a KV cache (\"model_id\", "
                         "\"model_base64\" or the .onnx bytes as the body), one of them");
    }
    if (!name->empty()) {
      if (auto st = plain_name("llm", *name, "the bundled descriptions are named as models/llm's files, e.g. "
                                             "llama-2-7b; or send a description's text as \"llm_text\"");
          !st) {
        return st.error();
      }
    }
    auto spec = name->empty() ? session.llm_from_text(*text, "llm_text") : session.llm(*name);
    // A name no description has is kNotFound; any other failure is a file of the server's own
    // directories that did not load, whose content the client does not learn.
    if (!spec && !name->empty() && spec.error().code != ErrorCode::kNotFound) {
      return server_file_error("language-model description", *name, spec.error());
    }
    return spec;
  }

  // A description's generation options: "weights", the counts, "backend", "cuda_prompt",
  // "flash_attention", "runtime" and "host"; the graph's fields refused, naming the one given.
  Result<GenerationOptions> description_options(const json& b) {
    for (const char* f : {"dtype", "tiles", "allow_tf32", "model_name", "dims", "dim", "plan"}) {
      if (b.contains(f)) {
        return bad_request(fmt::format("\"{}\" applies to an ONNX graph or decoder (give it as \"model_id\", "
                                       "\"model_base64\" or the .onnx bytes as the body); a description's generation runs "
                                       "llama.cpp's kernels: its weights are \"weights\", its kernels \"backend\"'s",
                                       f));
      }
    }
    GenerationOptions o;
    auto weights = str(b, "weights", false);
    if (!weights) return weights.error();
    if (!weights->empty()) o.weights = *weights;
    if (auto st = generation_counts(b, o); !st) return st.error();
    auto backend = str(b, "backend", false);
    if (!backend) return backend.error();
    o.backend = *backend;
    auto cuda_prompt = str(b, "cuda_prompt", false);
    if (!cuda_prompt) return cuda_prompt.error();
    o.cuda_prompt = *cuda_prompt;
    if (b.contains("flash_attention")) {
      if (!b["flash_attention"].is_boolean()) {
        return bad_request(fmt::format("\"flash_attention\" must be true or false, got a {}", b["flash_attention"].type_name()));
      }
      o.flash_attention = b["flash_attention"].get<bool>();
    }
    auto rt = str(b, "runtime", false);
    if (!rt) return rt.error();
    auto loaded = runtime_named("runtime", *rt);
    if (!loaded) return loaded.error();
    o.runtime = std::move(*loaded);
    auto host = host_named(b);
    if (!host) return host.error();
    o.host = *host;
    return o;
  }

  Result<std::string> do_generate(const Request& r) {
    const json& b = r.body;
    if (r.raw_model || b.contains("model_id") || b.contains("model_base64")) return generate_decoder(r);
    auto spec = description(b);
    if (!spec) return spec.error();
    auto g = gpu(b);
    if (!g) return g.error();
    auto o = description_options(b);
    if (!o) return o.error();
    auto p = session.generate(*spec, session.target(*g, TileSpace::kLibrary, {}), *o);
    if (!p) return p.error();
    return generation_json(*p);
  }

  // /v1/compare of a language model: a description's generation ("llm" or "llm_text") on each GPU
  // of "gpus", as /v1/generate predicts it on one (gpusim.compare-generation/1).
  Result<std::string> compare_description(const Request& r, const std::vector<std::string>& gpus) {
    const json& b = r.body;
    auto spec = description(b);
    if (!spec) return spec.error();
    auto o = description_options(b);
    if (!o) return o.error();
    // "prices": {"nvidia-rtx-4090": 1599, "nvidia-h100-sxm": "2.49/h"}, as the CLI's --price.
    std::vector<std::string> price_texts;
    if (b.contains("prices")) {
      if (!b["prices"].is_object()) {
        return bad_request("\"prices\" must be an object of GPU name to dollars (1599, to buy) or \"USD/h\" (\"2.49/h\", "
                           "to rent)");
      }
      for (const auto& [k, v] : b["prices"].items()) {
        if (!v.is_number() && !v.is_string()) {
          return bad_request(fmt::format("\"prices\": \"{}\" must be a number of dollars or a string \"USD/h\", got a {}",
                                         k, v.type_name()));
        }
        price_texts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
      }
    }
    auto rows = session.compare_generation(*spec, gpus, *o);
    if (!rows) return rows.error();
    auto priced = gpu_prices(price_texts, *rows);
    if (!priced) return priced.error();
    return compare_generation_json(spec->name.empty() ? std::string("llm_text") : spec->name, *rows, *priced);
  }

  // An ONNX decoder's generation: each pass the graph predicted as /v1/predict predicts it ("dtype",
  // "runtime", "tiles"), sized from "prompt", "generate" and "batch".
  Result<std::string> generate_decoder(const Request& r) {
    const json& b = r.body;
    for (const char* f : {"llm", "llm_text", "weights", "ubatch", "backend", "flash_attention", "cuda_prompt"}) {
      if (b.contains(f)) {
        return bad_request(fmt::format(
            "\"{}\" does not apply to an ONNX decoder's generation: its passes are sized from \"prompt\", \"generate\" "
            "and \"batch\" and run in the graph's own types (\"dtype\" re-types them); \"llm\" and \"llm_text\" give a "
            "description instead of a graph, and \"weights\", \"ubatch\", \"backend\", \"flash_attention\" and "
            "\"cuda_prompt\" describe llama.cpp",
            f));
      }
    }
    auto mb = model_bytes(r);
    if (!mb) return mb.error();
    auto g = gpu(b);
    if (!g) return g.error();
    GenerationOptions o;
    if (auto st = generation_counts(b, o); !st) return st.error();
    o.max_nodes = opts.max_nodes;
    auto req = graph_request(b);
    if (!req) return req.error();
    auto t = tiles(b, req->runtime);
    if (!t) return t.error();
    auto to = target_options(b);
    if (!to) return to.error();
    auto p = session.generate_decoder_bytes(*mb->bytes, mb->shown, session.target(*g, *t, *to), o, *req);
    if (!p) return p.error();
    return generation_json(*p);
  }

  Result<std::string> do_validate(const Request& r) {
    const json& b = r.body;
    ValidateOptions o;
    o.profile_dirs = session.profile_dirs();
    auto gpus = strings(b, "gpus");
    if (!gpus) return gpus.error();
    for (const std::string& n : *gpus) {
      if (auto st = plain_name("gpus", n, "GET /v1/profiles lists them"); !st) return st.error();
    }
    o.gpus = *gpus;
    auto rt = str(b, "runtime", false);
    if (!rt) return rt.error();
    if (auto st = runtime_named("runtime", *rt); !st) return st.error();
    o.runtime = *rt;
    o.threads = 1;
    std::vector<Measurement> records;
    std::string source = opts.truth;
    if (b.contains("runs")) {
      if (!b["runs"].is_array()) return bad_request("\"runs\" must be an array of gpusim.run/1 documents");
      for (size_t i = 0; i < b["runs"].size(); ++i) {
        auto recs = parse_run_json(b["runs"][i].dump(-1, ' ', false, kInvalidUtf8), fmt::format("runs[{}]", i));
        if (!recs) return recs.error();
        records.insert(records.end(), recs->begin(), recs->end());
      }
      source = "request";
    } else {
      if (opts.truth.empty()) {
        return bad_request("no measurements: post \"runs\" (gpusim.run/1 documents), or start the server with "
                           "--truth DIR");
      }
      std::lock_guard<std::mutex> l(truth_mu);
      if (!truth_records) {
        auto recs = read_measurements(opts.truth);
        if (!recs) return server_file_error("truth data", "--truth", recs.error());
        truth_records = Validation{std::move(*recs), {}};
      }
      records = truth_records->records;
    }
    auto rep = gpusim::validate(records, o);
    if (!rep) return rep.error();
    return validation_document(*rep, records, "datasheet", source, o.runtime);
  }

  // ---- running a request's work ----

  // Runs `work` on the pool within the time limit and answers with its document or its error. Past
  // the limit the work is cancelled: it stops at its next check and frees its worker.
  void compute(const httplib::Request& req, httplib::Response& res,
               std::function<Result<std::string>(const Request&)> work) {
    auto parsed = parse(req);
    if (!parsed) {
      ++errors;
      send_error(res, http_status(parsed.error()), parsed.error());
      return;
    }
    auto token = std::make_shared<CancelToken>();
    {
      std::lock_guard<std::mutex> l(tokens_mu);
      if (stopping) token->cancel();
      in_flight.insert(token);
    }
    struct Done {
      Impl& s;
      std::shared_ptr<CancelToken> t;
      ~Done() {
        std::lock_guard<std::mutex> l(s.tokens_mu);
        s.in_flight.erase(t);
      }
    } done{*this, token};
    auto promise = std::make_shared<std::promise<Result<std::string>>>();
    auto future = promise->get_future();
    // The work's share of the memory budget: held until the answer is handed over, or, when the
    // request is answered 504 first, until its work stops.
    auto held = std::make_shared<Reservation>(&server.budget());
    auto job = [this, promise, token, held, id = current.id, work = std::move(work), r = std::move(*parsed)]() mutable {
      current.id = id;  // the worker's log lines carry the request's id
      current_work = held.get();
      struct Clear {
        ~Clear() { current_work = nullptr; }
      } clear;
      if (token->cancelled()) {  // answered 504 (or stopping) while it waited in the queue
        ++cancelled;
        promise->set_value(make_error(ErrorCode::kLimit, "cancelled before it started"));
        return;
      }
      CancelScope scope(token.get());
      try {
        promise->set_value(work(r));
      } catch (const Cancelled&) {
        promise->set_value(make_error(ErrorCode::kLimit, "cancelled"));
      } catch (const std::exception& e) {
        promise->set_value(make_error(ErrorCode::kInternal, fmt::format("internal error: {}", e.what())));
      }
      if (token->cancelled()) ++cancelled;
    };
    if (!pool.submit(std::move(job))) {
      ++rejected;
      res.set_header("Retry-After", "1");
      send_error(res, 503, make_error(ErrorCode::kUnavailable,
                                      fmt::format("the server is busy: {} requests are waiting; retry shortly", opts.queue)));
      return;
    }
    const auto limit = std::chrono::duration<double>(opts.request_timeout_s);
    if (future.wait_for(limit) != std::future_status::ready) {
      token->cancel();
      ++timeouts;
      send_error(res, 504, make_error(ErrorCode::kLimit, fmt::format("the request ran past the server's limit of {} s "
                                                                     "(gpusim serve --timeout-s) and was cancelled; ask "
                                                                     "for less (a smaller model, a cheaper scheduler)",
                                                                     opts.request_timeout_s)));
      return;
    }
    Result<std::string> out = future.get();
    if (!out) {
      held->release();
      ++errors;
      if (token->cancelled() && stopping) {
        send_error(res, 503, make_error(ErrorCode::kUnavailable, "the server is stopping; the request was cancelled"));
        return;
      }
      send_error(res, http_status(out.error()), out.error());
      return;
    }
    res.body = std::move(*out);  // not copied: an answer can be tens of megabytes
    res.set_header("Content-Type", "application/json");
    held->release();
  }

  static constexpr const char* kPostRoutes[] = {"/v1/models", "/v1/predict", "/v1/compare", "/v1/plan", "/v1/validate",
                                                "/v1/generate"};

  // The work behind a POST route; null for a path that is not one.
  std::function<Result<std::string>(const Request&)> endpoint(const std::string& path) {
    if (path == "/v1/models") return [this](const Request& r) { return do_upload(r); };
    if (path == "/v1/predict") return [this](const Request& r) { return do_predict(r); };
    if (path == "/v1/compare") return [this](const Request& r) { return do_compare(r); };
    if (path == "/v1/plan") return [this](const Request& r) { return do_plan(r); };
    if (path == "/v1/validate") return [this](const Request& r) { return do_validate(r); };
    if (path == "/v1/generate") return [this](const Request& r) { return do_generate(r); };
    return nullptr;
  }

  // What a POST route's body may be: the content types it reads, for the 415 answer.
  static std::string wanted_types(const std::string& path) {
    if (path == "/v1/models") return "application/octet-stream (the .onnx file's bytes; application/onnx also)";
    if (path == "/v1/validate") return "application/json";
    return "application/json, or the .onnx file's bytes as application/octet-stream with the options as query parameters";
  }
  static bool accepts_type(const std::string& path, const std::string& type) {
    const std::string t = type.substr(0, type.find(';'));
    const bool raw = t == "application/octet-stream" || t == "application/onnx";
    const bool js = t == "application/json";
    if (path == "/v1/models") return raw;
    if (path == "/v1/validate") return js;
    return raw || js;
  }

  // Checks made on the headers alone, before the body is read: the Host and Origin, the token, the
  // method, the content type. A refusal closes the connection (the body is left unread).
  std::optional<std::pair<int, Error>> refusal(const httplib::Request& req, httplib::Response& res) {
    auto host_allowed = [&](const std::string& h) {
      const std::string name = host_name(h);
      if (name.empty()) return false;
      if (is_ip_literal(name) || name == "localhost") return true;
      if (host_name(opts.host) == name) return true;
      return std::any_of(opts.allowed_hosts.begin(), opts.allowed_hosts.end(),
                         [&](const std::string& a) { return host_name(a) == name; });
    };
    const std::string host = req.get_header_value("Host");
    if (!host_allowed(host)) {
      return std::pair{403, make_error(ErrorCode::kInvalidArgument,
                                       fmt::format("Host \"{}\" is not this server's name; start it with --allow-host "
                                                   "NAME to answer requests for that name (names other than IP "
                                                   "addresses and localhost are refused: DNS rebinding)",
                                                   host.substr(0, 128)))};
    }
    if (req.has_header("Origin") && !host_allowed(req.get_header_value("Origin"))) {
      return std::pair{403, make_error(ErrorCode::kInvalidArgument,
                                       fmt::format("Origin \"{}\" may not call this server (a web page of another site); "
                                                   "start it with --allow-host NAME to allow that origin's host",
                                                   req.get_header_value("Origin").substr(0, 128)))};
    }
    if (!opts.token.empty() && req.path != "/healthz") {
      const std::string auth = req.get_header_value("Authorization");
      const std::string scheme = "Bearer ";
      if (auth.rfind(scheme, 0) != 0 || !same_token(auth.substr(scheme.size()), opts.token)) {
        res.set_header("WWW-Authenticate", "Bearer");
        return std::pair{401, make_error(ErrorCode::kInvalidArgument,
                                         "this server needs \"Authorization: Bearer TOKEN\" (the token of its "
                                         "--token-file)")};
      }
    }
    const std::string allow = allowed_methods(req.path);
    const bool known_method = (allow.find(req.method) != std::string::npos);
    if (!allow.empty() && !known_method) {
      res.set_header("Allow", allow);
      return std::pair{405, make_error(ErrorCode::kInvalidArgument,
                                       fmt::format("{} {}: this path answers {} only", req.method.substr(0, 16), req.path,
                                                   allow))};
    }
    if (req.method == "POST" && !allow.empty()) {
      const std::string type = req.get_header_value("Content-Type");
      const std::string length = req.get_header_value("Content-Length");
      const bool has_body = (!length.empty() && length != "0") || req.has_header("Transfer-Encoding");
      if ((has_body || !type.empty()) && !accepts_type(req.path, type)) {
        return std::pair{415, make_error(ErrorCode::kInvalidArgument,
                                         fmt::format("POST {}: Content-Type \"{}\" is not read here; send {}", req.path,
                                                     type.substr(0, 128), wanted_types(req.path)))};
      }
    }
    return std::nullopt;
  }

  void routes() {
    server.set_payload_max_length(static_cast<size_t>(opts.max_body_bytes));
    server.set_tcp_nodelay(true);  // small JSON answers must not wait for delayed ACKs (40 ms on Linux)
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      current.id = ids.from(req.get_header_value("X-Request-Id"));
      current.start = std::chrono::steady_clock::now();
      res.set_header("X-Request-Id", current.id);
      if (auto r = refusal(req, res)) {
        send_error(res, r->first, r->second);
        close_connection_after_response();
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.has_header("X-Request-Id")) res.set_header("X-Request-Id", current.id.empty() ? ids.next() : current.id);
      if (!res.body.empty()) return;  // a handler's own JSON error
      Error e;
      if (res.status == 413) {
        e = make_error(ErrorCode::kLimit, fmt::format("the request body is over this server's limit of {} bytes "
                                                      "(gpusim serve --max-body-mb)",
                                                      opts.max_body_bytes));
      } else if (res.status == 404) {
        e = make_error(ErrorCode::kNotFound, fmt::format("{} {}: no such endpoint; GET /openapi.json lists them",
                                                         req.method.substr(0, 16), req.path.substr(0, 256)));
      } else {
        e = make_error(res.status >= 500 ? ErrorCode::kInternal : ErrorCode::kInvalidArgument,
                       fmt::format("{} {}: HTTP {}", req.method.substr(0, 16), req.path.substr(0, 256), res.status));
      }
      res.set_content(error_json(e, current.id), "application/json");
    });
    server.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, 500, make_error(ErrorCode::kInternal, "internal error: " + what));
    });
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - current.start).count();
      metrics.record(route_label(req.path), res.status, s);
      log(fmt::format("{} {} {} {} {:.1f} ms", current.id, req.method.substr(0, 16), route_label(req.path), res.status,
                      s * 1e3));
    });

    server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      const auto st = cache.stats();
      res.set_content(json{{"status", "ok"},
                           {"version", version()},
                           {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
                           {"requests", requests.load()},
                           {"errors", errors.load()},
                           {"timeouts", timeouts.load()},
                           {"rejected", rejected.load()},
                           {"cancelled", cancelled.load()},
                           {"connections", server.stats().open.load()},
                           {"models_cached", st.models},
                           {"model_cache_bytes", st.bytes},
                           {"imported_cache_bytes", st.imported_bytes}}
                          .dump(2, ' ', false, kInvalidUtf8),
                      "application/json");
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      const auto st = cache.stats();
      const ConnectionStats& cs = server.stats();
      std::string out = metrics.text();
      auto gauge = [&](const char* name, const char* help, const std::string& value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
      };
      auto counter = [&](const char* name, const char* help, int64_t value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
      };
      gauge("gpusim_queue_depth", "Requests waiting for a worker.", std::to_string(pool.waiting()));
      gauge("gpusim_workers_busy", "Workers computing an answer.", std::to_string(pool.busy()));
      gauge("gpusim_workers", "Worker threads.", std::to_string(pool.threads()));
      gauge("gpusim_connections_open", "Open client connections.", std::to_string(cs.open.load()));
      gauge("gpusim_memory_reserved_bytes", "Memory the requests in flight hold of the budget.",
            std::to_string(server.budget().used()));
      gauge("gpusim_memory_budget_bytes", "The requests' memory budget (0: none).", std::to_string(server.budget().max()));
      gauge("gpusim_connections_waiting", "Open connections without a whole request head (idle or sending it).",
            std::to_string(cs.waiting.load()));
      out += "# HELP gpusim_cache_bytes Bytes held by the model caches.\n# TYPE gpusim_cache_bytes gauge\n";
      out += fmt::format("gpusim_cache_bytes{{cache=\"uploaded\"}} {}\ngpusim_cache_bytes{{cache=\"imported\"}} {}\n", st.bytes,
                         st.imported_bytes);
      out += "# HELP gpusim_rejected_total Requests and connections refused before any work.\n"
             "# TYPE gpusim_rejected_total counter\n";
      out += fmt::format("gpusim_rejected_total{{reason=\"queue_full\"}} {}\n", rejected.load());
      out += fmt::format("gpusim_rejected_total{{reason=\"connections\"}} {}\n", cs.refused.load());
      out += fmt::format("gpusim_rejected_total{{reason=\"header_timeout\"}} {}\n", cs.header_timeouts.load());
      out += fmt::format("gpusim_rejected_total{{reason=\"too_large\"}} {}\n", cs.too_large.load());
      out += fmt::format("gpusim_rejected_total{{reason=\"framing\"}} {}\n", cs.bad_framing.load());
      out += fmt::format("gpusim_rejected_total{{reason=\"memory\"}} {}\n", cs.over_budget.load());
      counter("gpusim_timeouts_total", "Requests answered 504: past the time limit.", timeouts.load());
      counter("gpusim_cancelled_total", "Requests whose work was cancelled (time limit, or stopping).", cancelled.load());
      counter("gpusim_connections_total", "Connections accepted.", cs.accepted.load());
      res.set_content(out, "text/plain; version=0.0.4");
    });
    server.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(openapi_document(), "application/json");
    });
    server.Get("/v1/profiles", [this](const httplib::Request&, httplib::Response& res) {
      auto list = session.profiles();
      // A broken file of the server's directories shows as such, not with what it holds.
      for (auto& [entry, p] : list) {
        if (!p) {
          log(fmt::format("{} profile file {} cannot be used: {}", current.id, entry.path, p.error().message));
          p = make_error(p.error().code, "this profile's file on the server cannot be read; the server's log has the reason");
        }
      }
      res.set_content(profile_list_document(list), "application/json");
    });
    server.Get(R"(/v1/profiles/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      auto p = gpu_named("name", req.matches[1].str());
      if (!p) {
        send_error(res, http_status(p.error()), p.error());
        return;
      }
      res.set_content(profile_document(*p), "application/json");
    });
    for (const char* path : kPostRoutes) {
      server.Post(path, [this, path](const httplib::Request& q, httplib::Response& s) { compute(q, s, endpoint(path)); });
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> l(tokens_mu);
      stopping = true;
      for (const auto& t : in_flight) t->cancel();
    }
    server.shutdown();
  }
};

Service::Service(ServiceOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Service::~Service() { stop(); }

Result<int> Service::bind() {
  Impl& s = *impl_;
  int port = s.opts.port;
  if (port == 0) {
    port = s.server.bind_to_any_port(s.opts.host);
    if (port < 0) return make_error(ErrorCode::kIo, fmt::format("cannot bind {}: no free port", s.opts.host));
  } else if (!s.server.bind_to_port(s.opts.host, port)) {
    return make_error(ErrorCode::kIo, fmt::format("cannot bind {}:{}: the port is in use or not allowed; pick "
                                                  "another with --port (0: any free port)",
                                                  s.opts.host, port));
  }
  s.server.widen_backlog(port);
  s.bound = true;
  return port;
}

Status Service::run() {
  if (!impl_->bound) {
    auto p = bind();
    if (!p) return p.error();
  }
  if (!impl_->server.listen_after_bind()) {
    if (impl_->stopping) return Ok{};
    return make_error(ErrorCode::kIo, "the server stopped listening with an error");
  }
  return Ok{};
}

Service::Answer Service::answer(const std::string& path, const std::string& body, const std::string& content_type) {
  Impl& s = *impl_;
  auto fail = [](int status, const Error& e) { return Answer{status, Impl::error_json(e, "")}; };
  auto work = s.endpoint(path);
  if (!work) {
    return fail(404, make_error(ErrorCode::kNotFound, fmt::format("POST {}: no such endpoint; GET /openapi.json lists them", path)));
  }
  if (static_cast<int64_t>(body.size()) > s.opts.max_body_bytes) {
    return fail(413, make_error(ErrorCode::kLimit, fmt::format("the request body is over this server's limit of {} "
                                                               "bytes (gpusim serve --max-body-mb)",
                                                               s.opts.max_body_bytes)));
  }
  if (!body.empty() && !Impl::accepts_type(path, content_type)) {
    return fail(415, make_error(ErrorCode::kInvalidArgument, fmt::format("POST {}: Content-Type \"{}\" is not read here; "
                                                                         "send {}",
                                                                         path, content_type, Impl::wanted_types(path))));
  }
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", content_type);
  auto parsed = s.parse(req);
  if (!parsed) return fail(http_status(parsed.error()), parsed.error());
  auto out = work(*parsed);
  if (!out) return fail(http_status(out.error()), out.error());
  return Answer{200, std::move(*out)};
}

void Service::stop() {
  if (impl_) impl_->stop();
}

}  // namespace gpusim::serve
