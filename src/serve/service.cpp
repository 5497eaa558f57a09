// gpusim serve (service.h): routes, the model cache, the worker pool and the limits.
#include "service.h"

#include <httplib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpusim/gpusim.h"
#include "gpusim/json_text.h"

namespace gpusim::serve {
namespace {

using nlohmann::json;

// ---- a bounded worker pool -----------------------------------------------------------------------

class WorkerPool {
 public:
  WorkerPool(int threads, int queue) : max_queue_(static_cast<size_t>(std::max(1, queue))) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // False when the queue is full.
  bool submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (jobs_.size() >= max_queue_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // done, and nothing left to run
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  size_t max_queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool done_ = false;
};

// ---- the model cache -----------------------------------------------------------------------------

// Uploaded bytes by content hash (bounded in bytes), and imported models by hash and dims (bounded
// in entries); both least recently used first out.
class ModelCache {
 public:
  ModelCache(int64_t max_bytes, int max_imported) : max_bytes_(max_bytes), max_imported_(max_imported) {}

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
    std::lock_guard<std::mutex> l(mu_);
    if (imported_.count(key)) return;
    imported_order_.push_front(key);
    imported_[key] = {m, imported_order_.begin()};
    while (static_cast<int>(imported_.size()) > max_imported_) {
      imported_.erase(imported_order_.back());
      imported_order_.pop_back();
    }
  }
  std::pair<size_t, int64_t> stats() {
    std::lock_guard<std::mutex> l(mu_);
    return {bytes_.size(), total_};
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
  };
  std::mutex mu_;
  int64_t max_bytes_;
  int max_imported_;
  int64_t total_ = 0;
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

void send_error(httplib::Response& res, int status, const Error& e) {
  res.status = status;
  res.set_content(error_document(e), "application/json");
}

void send_json(httplib::Response& res, const std::string& doc) { res.set_content(doc, "application/json"); }

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

Error body_too_large(int64_t limit) {
  return make_error(ErrorCode::kLimit,
                    fmt::format("the request body is over this server's limit of {} bytes (gpusim serve --max-body-mb)", limit));
}

Error model_too_large(size_t size, int64_t limit) {
  return make_error(ErrorCode::kLimit, fmt::format("the model is {} bytes; this server takes models up to {} bytes "
                                                   "(gpusim serve --max-model-mb)",
                                                   size, limit));
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
  WorkerPool pool;
  httplib::Server server;
  std::optional<Validation> truth_records;  // opts.truth, read on first use
  std::mutex truth_mu;
  std::atomic<int64_t> requests{0}, errors{0}, timeouts{0}, rejected{0};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool bound = false;

  explicit Impl(ServiceOptions o)
      : opts(std::move(o)),
        session(SessionOptions{opts.profile_dirs, {}}),
        cache(opts.model_cache_bytes, opts.imported_cache_entries),
        pool(opts.workers > 0 ? opts.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
             opts.queue) {
    routes();
  }

  // Parses the request: a JSON object, or raw ONNX bytes with options in the query string.
  Result<Request> parse(const httplib::Request& req) {
    Request r;
    const std::string type = req.get_header_value("Content-Type");
    if (type.rfind("application/octet-stream", 0) == 0 || type.rfind("application/onnx", 0) == 0) {
      if (static_cast<int64_t>(req.body.size()) > opts.max_model_bytes) {
        return model_too_large(req.body.size(), opts.max_model_bytes);
      }
      r.raw_model = std::make_shared<const std::string>(req.body);
      for (const auto& [k, v] : req.params) {
        if (k.rfind("dim.", 0) == 0) {  // dim.batch=1, the easy form in a URL
          if (!r.body.contains("dim")) r.body["dim"] = json::array();
          r.body["dim"].push_back(k.substr(4) + "=" + v);
        } else if (k == "dim" || k == "gpus") {
          if (!r.body.contains(k)) r.body[k] = json::array();
          r.body[k].push_back(v);
        } else if (k == "top" || k == "beam_width" || k == "samples" || k == "seed") {
          try {
            r.body[k] = std::stoll(v);
          } catch (const std::exception&) {
            return bad_request(fmt::format("query parameter {}=\"{}\" is not an integer", k, v));
          }
        } else {
          r.body[k] = v;
        }
      }
      return r;
    }
    if (req.body.empty()) return r;
    try {
      r.body = json::parse(req.body);
    } catch (const json::exception& e) {
      return bad_request(fmt::format("the request body is not valid JSON ({}); send a JSON object, or the ONNX model "
                                     "itself as application/octet-stream",
                                     e.what()));
    }
    if (!r.body.is_object()) return bad_request("the request body must be a JSON object");
    return r;
  }

  // A string field, checked.
  static Result<std::string> str(const json& b, const char* key, bool required) {
    if (!b.contains(key)) {
      if (required) return bad_request(fmt::format("\"{}\" is missing", key));
      return std::string();
    }
    if (!b[key].is_string()) return bad_request(fmt::format("\"{}\" must be a string, got {}", key, b[key].dump(-1, ' ', false, kInvalidUtf8)));
    return b[key].get<std::string>();
  }

  static Result<std::vector<std::string>> strings(const json& b, const char* key) {
    std::vector<std::string> out;
    if (!b.contains(key)) return out;
    const json& v = b[key];
    if (v.is_string()) {
      // "a,b" as --gpus takes it
      std::string s = v.get<std::string>();
      size_t start = 0;
      for (size_t p = 0; p <= s.size(); ++p) {
        if (p == s.size() || s[p] == ',') {
          if (p > start) out.push_back(s.substr(start, p - start));
          start = p + 1;
        }
      }
      return out;
    }
    if (!v.is_array()) return bad_request(fmt::format("\"{}\" must be an array of strings", key));
    for (const json& e : v) {
      if (!e.is_string()) return bad_request(fmt::format("\"{}\" must be an array of strings, has {}", key, e.dump(-1, ' ', false, kInvalidUtf8)));
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
          if (!v.is_number_integer()) return bad_request(fmt::format("\"dims\": \"{}\" must be an integer, got {}", k, v.dump(-1, ' ', false, kInvalidUtf8)));
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

  // The imported-model cache key: the same bytes with the same dims and name import alike.
  static std::string import_key(const std::string& id, const std::vector<std::string>& dims, const std::string& name) {
    return fmt::format("{}|{}|{}", id, fmt::join(dims, ","), name);
  }

  Result<Model> model(const Request& r) {
    auto d = dims(r.body);
    if (!d) return d.error();
    std::shared_ptr<const std::string> bytes = r.raw_model;
    std::string id;
    if (!bytes) {
      auto mid = str(r.body, "model_id", false);
      if (!mid) return mid.error();
      auto b64 = str(r.body, "model_base64", false);
      if (!b64) return b64.error();
      if (!mid->empty()) {
        bytes = cache.bytes(*mid);
        if (!bytes) {
          return make_error(ErrorCode::kNotFound, fmt::format("model_id \"{}\" is not on this server (evicted or never "
                                                        "uploaded); POST the model to /v1/models again",
                                                        *mid));
        }
        id = *mid;
      } else if (!b64->empty()) {
        auto decoded = base64_decode(*b64);
        if (!decoded) return bad_request("\"model_base64\" is not base64");
        if (static_cast<int64_t>(decoded->size()) > opts.max_model_bytes) {
          return model_too_large(decoded->size(), opts.max_model_bytes);
        }
        bytes = std::make_shared<const std::string>(std::move(*decoded));
      } else {
        return bad_request("no model: give \"model_id\" (from POST /v1/models), \"model_base64\", or POST the .onnx "
                           "bytes as application/octet-stream");
      }
    }
    auto name = str(r.body, "model_name", false);
    if (!name) return name.error();
    const std::string shown = name->empty() ? "model.onnx" : *name;
    if (id.empty()) id = cache.put(bytes, content_hash(*bytes));
    const std::string key = import_key(id, *d, shown);
    if (auto m = cache.imported(key)) return *m;
    auto m = session.open_model_bytes(*bytes, shown, {*d});
    if (!m) return m.error();
    cache.keep_imported(key, *m);
    return m;
  }

  Result<GpuProfile> gpu(const json& b, const char* key = "gpu") {
    auto yaml = str(b, "gpu_yaml", false);
    if (!yaml) return yaml.error();
    if (!yaml->empty()) return session.gpu_from_yaml(*yaml, "gpu_yaml");
    auto name = str(b, key, true);
    if (!name) return name.error();
    if (name->find('/') != std::string::npos || name->ends_with(".yaml")) {
      return bad_request(fmt::format("\"gpu\": \"{}\" is a path; the server takes profile names (GET /v1/profiles) "
                                     "or the profile's text in \"gpu_yaml\"",
                                     *name));
    }
    return session.gpu(*name);
  }

  // "dtype": unset, or fp32/fp16/bf16.
  static Result<std::optional<DType>> dtype(const json& b) {
    auto name = str(b, "dtype", false);
    if (!name) return name.error();
    if (name->empty()) return std::optional<DType>();
    if (auto d = float_dtype_from_name(*name)) return std::optional<DType>(*d);
    return bad_request(fmt::format("\"dtype\": \"{}\" is not supported; expected fp32, fp16 or bf16", *name));
  }

  Result<PredictRequest> predict_request(const json& b, const Model& m) {
    PredictRequest p;
    auto d = dtype(b);
    if (!d) return d.error();
    p.dtype = *d;
    auto rt = str(b, "runtime", false);
    if (!rt) return rt.error();
    if (rt->find('/') != std::string::npos) {
      return bad_request(fmt::format("\"runtime\": \"{}\" is a path; the server takes runtime names", *rt));
    }
    p.runtime = *rt;
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
    auto m = session.open_model_bytes(*r.raw_model, shown, {*d});
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
      out["note"] = "kept; give the dims it needs with each request: " + m.error().message;
    } else {
      return m.error();
    }
    return out.dump(2, ' ', false, kInvalidUtf8);
  }

  Result<std::string> do_predict(const Request& r) {
    auto m = model(r);
    if (!m) return m.error();
    auto g = gpu(r.body);
    if (!g) return g.error();
    auto req = predict_request(r.body, *m);
    if (!req) return req.error();
    auto p = session.predict(*m, *g, *req);
    if (!p) return p.error();
    return prediction_document(*p, *g);
  }

  Result<std::string> do_compare(const Request& r) {
    auto m = model(r);
    if (!m) return m.error();
    auto gpus = strings(r.body, "gpus");
    if (!gpus) return gpus.error();
    if (gpus->empty()) return bad_request("\"gpus\" is missing: name the profiles to compare");
    auto req = predict_request(r.body, *m);
    if (!req) return req.error();
    auto rows = session.compare(*m, *gpus, *req);
    if (!rows) return rows.error();
    return compare_document(m->source(), *rows);
  }

  Result<std::string> do_plan(const Request& r) {
    auto m = model(r);
    if (!m) return m.error();
    auto g = gpu(r.body);
    if (!g) return g.error();
    SearchOptions o;
    const json& b = r.body;
    auto sched = str(b, "scheduler", false);
    if (!sched) return sched.error();
    if (!sched->empty()) o.scheduler = *sched;
    auto obj = str(b, "objective", false);
    if (!obj) return obj.error();
    if (!obj->empty()) {
      auto ob = objective_from_name(*obj);
      if (!ob) return bad_request(fmt::format("\"objective\": \"{}\" is not one of latency, throughput, energy, memory", *obj));
      o.objective = *ob;
    }
    auto d = dtype(b);
    if (!d) return d.error();
    o.dtype = *d;
    for (const SearchOptionRange& f : kSearchOptionRanges) {
      if (!b.contains(f.name)) continue;
      if (!b[f.name].is_number_integer() || b[f.name].get<int64_t>() < f.lo || b[f.name].get<int64_t>() > f.hi) {
        return bad_request(fmt::format("\"{}\": {} is out of range; give an integer from {} to {}", f.name,
                                       b[f.name].dump(-1, ' ', false, kInvalidUtf8), f.lo, f.hi));
      }
      o.*f.field = static_cast<int>(b[f.name].get<int64_t>());
    }
    if (b.contains("seed")) {
      if (!b["seed"].is_number_integer()) return bad_request("\"seed\" must be an integer");
      o.seed = b["seed"].get<uint64_t>();
    }
    if (b.contains("memory_budget_gb")) {
      if (!b["memory_budget_gb"].is_number() || !(b["memory_budget_gb"].get<double>() > 0)) {
        return bad_request(fmt::format("\"memory_budget_gb\": {} must be a positive number", b["memory_budget_gb"].dump(-1, ' ', false, kInvalidUtf8)));
      }
      o.memory_budget_gb = b["memory_budget_gb"].get<double>();
    }
    auto res = session.plan(*m, *g, o);
    if (!res) return res.error();
    return plan_search_document(m->source(), m->graph(), *g, o, *res);
  }

  Result<std::string> do_validate(const Request& r) {
    const json& b = r.body;
    ValidateOptions o;
    o.profile_dirs = session.profile_dirs();
    auto gpus = strings(b, "gpus");
    if (!gpus) return gpus.error();
    o.gpus = *gpus;
    auto rt = str(b, "runtime", false);
    if (!rt) return rt.error();
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
        if (!recs) return recs.error();
        truth_records = Validation{std::move(*recs), {}};
      }
      records = truth_records->records;
    }
    auto rep = gpusim::validate(records, o);
    if (!rep) return rep.error();
    return validation_document(*rep, records, "datasheet", source, o.runtime);
  }

  // Runs `work` on the pool within the time limit and answers with its document or its error.
  void compute(const httplib::Request& req, httplib::Response& res,
               std::function<Result<std::string>(const Request&)> work) {
    auto parsed = parse(req);
    if (!parsed) {
      ++errors;
      send_error(res, http_status(parsed.error()), parsed.error());
      return;
    }
    auto promise = std::make_shared<std::promise<Result<std::string>>>();
    auto future = promise->get_future();
    auto job = [promise, work = std::move(work), r = std::move(*parsed)]() mutable {
      try {
        promise->set_value(work(r));
      } catch (const std::exception& e) {
        promise->set_value(make_error(ErrorCode::kInternal, fmt::format("internal error: {}", e.what())));
      }
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
      ++timeouts;
      send_error(res, 504, make_error(ErrorCode::kLimit, fmt::format("the request ran past the server's limit of {} s "
                                                                     "(gpusim serve --timeout-s); ask for less (a "
                                                                     "smaller model, a cheaper scheduler)",
                                                                     opts.request_timeout_s)));
      return;
    }
    Result<std::string> out = future.get();
    if (!out) {
      ++errors;
      send_error(res, http_status(out.error()), out.error());
      return;
    }
    send_json(res, *out);
  }

  static constexpr const char* kPostRoutes[] = {"/v1/models", "/v1/predict", "/v1/compare", "/v1/plan", "/v1/validate"};

  // The work behind a POST route; null for a path that is not one.
  std::function<Result<std::string>(const Request&)> endpoint(const std::string& path) {
    if (path == "/v1/models") return [this](const Request& r) { return do_upload(r); };
    if (path == "/v1/predict") return [this](const Request& r) { return do_predict(r); };
    if (path == "/v1/compare") return [this](const Request& r) { return do_compare(r); };
    if (path == "/v1/plan") return [this](const Request& r) { return do_plan(r); };
    if (path == "/v1/validate") return [this](const Request& r) { return do_validate(r); };
    return nullptr;
  }

  void routes() {
    server.set_payload_max_length(static_cast<size_t>(opts.max_body_bytes));
    server.set_tcp_nodelay(true);  // small JSON answers must not wait for delayed ACKs (40 ms on Linux)
    server.set_read_timeout(std::chrono::seconds(30));
    server.set_write_timeout(std::chrono::seconds(30));
    server.set_pre_routing_handler([this](const httplib::Request&, httplib::Response&) {
      ++requests;
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own JSON error
      Error e;
      if (res.status == 413) {
        e = body_too_large(opts.max_body_bytes);
      } else if (res.status == 404) {
        e = make_error(ErrorCode::kNotFound, fmt::format("{} {}: no such endpoint; GET /openapi.json lists them", req.method,
                                                   req.path));
      } else {
        e = make_error(res.status >= 500 ? ErrorCode::kInternal : ErrorCode::kInvalidArgument,
                       fmt::format("{} {}: HTTP {}", req.method, req.path, res.status));
      }
      res.set_content(error_document(e), "application/json");
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, 500, make_error(ErrorCode::kInternal, "internal error: " + what));
    });

    server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      const auto [models, bytes] = cache.stats();
      send_json(res, json{{"status", "ok"},
                          {"version", version()},
                          {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
                          {"requests", requests.load()},
                          {"errors", errors.load()},
                          {"timeouts", timeouts.load()},
                          {"rejected", rejected.load()},
                          {"models_cached", models},
                          {"model_cache_bytes", bytes}}
                         .dump(2, ' ', false, kInvalidUtf8));
    });
    server.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) { send_json(res, openapi_document()); });
    server.Get("/v1/profiles", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, profile_list_document(session.profiles()));
    });
    server.Get(R"(/v1/profiles/([A-Za-z0-9._-]+))", [this](const httplib::Request& req, httplib::Response& res) {
      auto p = session.gpu(req.matches[1].str());
      if (!p) {
        send_error(res, http_status(p.error()), p.error());
        return;
      }
      send_json(res, profile_document(*p));
    });
    for (const char* path : kPostRoutes) {
      server.Post(path, [this, path](const httplib::Request& q, httplib::Response& s) { compute(q, s, endpoint(path)); });
    }
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
  s.bound = true;
  return port;
}

Status Service::run() {
  if (!impl_->bound) {
    auto p = bind();
    if (!p) return p.error();
  }
  if (!impl_->server.listen_after_bind()) {
    return make_error(ErrorCode::kIo, "the server stopped listening with an error");
  }
  return Ok{};
}

Service::Answer Service::answer(const std::string& path, const std::string& body, const std::string& content_type) {
  Impl& s = *impl_;
  auto fail = [](int status, const Error& e) { return Answer{status, error_document(e)}; };
  auto work = s.endpoint(path);
  if (!work) {
    return fail(404, make_error(ErrorCode::kNotFound, fmt::format("POST {}: no such endpoint; GET /openapi.json lists them", path)));
  }
  if (static_cast<int64_t>(body.size()) > s.opts.max_body_bytes) {
    return fail(413, body_too_large(s.opts.max_body_bytes));
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
  if (impl_ && impl_->server.is_running()) impl_->server.stop();
}

}  // namespace gpusim::serve
