// gpusim serve: the Session API over HTTP/JSON (cpp-httplib). The routes, their request bodies and
// their answers are documented in openapi.json beside this file, which /openapi.json serves as is.
//
//   GET  /healthz                 liveness and counters
//   GET  /openapi.json            the OpenAPI 3 document
//   GET  /v1/profiles             every GPU profile (as `gpusim profiles list --json`)
//   GET  /v1/profiles/{name}      one profile (gpusim.profile/1)
//   POST /v1/models               upload an ONNX model (raw bytes); answers its id (content hash)
//   POST /v1/predict              gpusim.predict/1
//   POST /v1/compare              gpusim.compare/1
//   POST /v1/plan                 gpusim.plan-search/1
//   POST /v1/validate             gpusim.validate/1 against the server's --truth or posted runs
//
// Requests name a model by "model_id" (from /v1/models), carry it base64-encoded in
// "model_base64", or POST the raw ONNX bytes with the options as query parameters. Errors are
// gpusim.error/1 documents with a 4xx (the request) or 5xx (the server) status and the request's
// id (also in the X-Request-Id header of every answer). GET /metrics answers Prometheus text.
//
// Safe on a network: a request names GPUs, runtimes and profiles by name only, never a path, and
// no error echoes a file's contents; JSON bodies are parsed under depth and value limits; unknown
// fields are refused; JSON routes take application/json only and the Host (and Origin) must be
// this server's, so a web page cannot post to it; an optional bearer token guards every route but
// /healthz. Connections have deadlines and a cap (http_server.h).
//
// Work runs on a pool of `workers` threads with a bounded queue: a full queue answers 503 at once,
// and a request that runs past `request_timeout_s` answers 504 and its work is cancelled
// (gpusim/cancel.h: the import, planner, simulator and validation check it), freeing its worker
// within a fraction of a second; stop() cancels everything in flight. Uploaded models are kept by
// content hash in a cache bounded in bytes, imported graphs in one bounded by their estimated
// memory, least recently used first out.
//
// Usage:
//   gpusim::serve::Service svc({.port = 0});
//   auto port = svc.bind();          // a free port when 0
//   std::thread t([&] { svc.run(); });
//   ... svc.stop(); t.join();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpusim/result.h"

namespace gpusim {
class Model;
}

namespace gpusim::serve {

struct ServiceOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (bind() returns it)
  int workers = 0;                 // compute threads; 0: the hardware's
  int queue = 64;                  // requests waiting for a worker before 503
  int64_t max_body_bytes = 64ll << 20;
  int64_t max_model_bytes = 32ll << 20;
  // Graphs of more nodes are refused (413) before their passes run: a node costs a few kilobytes
  // through import, prediction and the answer, and ResNet-50 has 120, BERT-base about 1,000.
  int64_t max_nodes = 100000;
  // Memory the requests in flight may hold together: bodies (four times their length, reserved
  // before they are read), imports (2 KiB a node, reserved before the graph is parsed) and each
  // graph's prediction and answer (about 3 KiB a node and tensor). A request
  // that cannot reserve waits up to 2 s, then gets 503; 0: no budget.
  int64_t memory_budget_bytes = 1ll << 30;
  double request_timeout_s = 60;   // past it: 504, and the work is cancelled (its worker freed)
  int64_t model_cache_bytes = 256ll << 20;     // uploaded model bytes kept
  int64_t imported_cache_bytes = 512ll << 20;  // imported graphs kept (their estimated memory)
  int imported_cache_entries = 16;             // ... and at most this many (per model, dims and name)
  std::vector<std::string> profile_dirs;       // searched first, as --profiles
  std::string truth;                           // measurements /v1/validate uses by default ("" none)
  // Connections (http_server.h): cap (open connections, idle ones included: they wait in one poll
  // thread's room, not in a thread each), deadlines, keep-alive.
  int max_connections = 1024;
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  double idle_timeout_s = 5;
  int max_requests_per_connection = 100;
  // JSON bodies: nesting depth and values (objects, arrays, scalars) parsed before 400/413.
  int max_json_depth = 64;
  int64_t max_json_values = 250000;
  // Same-origin safety: Host (and Origin, when sent) must be an IP address, "localhost", or one of
  // these names (a DNS name pointing here is refused unless listed: DNS rebinding).
  std::vector<std::string> allowed_hosts;
  // Bearer token every route but /healthz requires ("" none): Authorization: Bearer TOKEN.
  std::string token;
  // One line per request (request id, method, path, status, milliseconds) and per server-side
  // error detail; null: none.
  std::function<void(const std::string&)> log;
};

class Service {
 public:
  explicit Service(ServiceOptions opts);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Binds the listening socket; returns the port (the chosen one when opts.port is 0).
  Result<int> bind();
  // Serves until stop(); in-flight requests finish first.
  Status run();
  // Stops accepting, lets in-flight requests finish, and makes run() return. Safe from any thread.
  void stop();

  // One POST (/v1/models, /v1/predict, ...) answered in-process on the calling thread, as its route
  // answers over HTTP but without the socket, the worker pool or the time limit: the HTTP status
  // and the JSON document. For embedding the request handling, and for fuzzing it (fuzz/).
  struct Answer {
    int status = 200;
    std::string body;
  };
  Answer answer(const std::string& path, const std::string& body, const std::string& content_type = "application/json");

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What an imported model holds in memory, as the service's import cache counts it (block by block,
// with malloc's overhead).
int64_t imported_bytes(const Model& m);

// The OpenAPI document the service serves (apps/serve/openapi.json, compiled in).
const std::string& openapi_document();

}  // namespace gpusim::serve
