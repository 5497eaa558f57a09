// The connection layer of gpusim serve: cpp-httplib's request parsing and routing, under gpusim's
// own handling of each connection, so that no client can hold the server.
//
// - A waiting room: a connection that has not yet sent a whole request head (a new one, an idle
//   keep-alive one, one trickling its headers) is held by one poll thread, not by a thread of its
//   own; only a connection whose head is in takes a connection thread. So a thousand idle or slow
//   clients cost a thousand sockets and buffers, and /healthz is still answered at once.
// - A connection cap counted at accept: past `max_connections` open connections (waiting or being
//   served) a new one is answered 503 (with Retry-After) at once and closed; nothing queues
//   unbounded.
// - Deadlines, not per-read timeouts: the request line and headers must arrive within
//   `header_timeout_s` of the head's first byte (else 408), the body within `body_timeout_s` of
//   the headers (else the connection closes), a keep-alive connection must start its next request
//   within `idle_timeout_s`, and serves at most `max_requests_per_connection` requests. A client
//   trickling a byte a second is cut off at the deadline whatever its pace.
// - Sizes before reading: headers over `max_header_bytes` are answered 431, and a Content-Length
//   over `max_body_bytes` 413, before a byte of the body is read; a chunked body stops being read
//   past the limit.
// - Framing as RFC 9112 says: a head a proxy in front could frame otherwise than this server
//   (Content-Length and Transfer-Encoding both, two lengths, a coding other than chunked, a body on
//   GET or HEAD, folded or bare-LF lines) is answered 400 and the connection closed, and so is any
//   request the parser refuses: no bytes are ever taken for a second request.
// - stop() ends every wait within a tenth of a second.
//
// The routes, their checks and the answers' documents are the service's (service.cpp): it gives
// this layer the error document to send (`error_body`) and the request ids (`next_request_id`).
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <string>
#include <thread>
#include <vector>

#include "gpusim/result.h"

namespace gpusim::serve {

// A fixed set of threads running jobs from a queue (bounded by `max_queue`; unbounded when 0):
// the service's compute workers and the connection threads alike.
class JobThreads {
 public:
  JobThreads(int threads, size_t max_queue);
  ~JobThreads() { shutdown(); }
  JobThreads(const JobThreads&) = delete;
  JobThreads& operator=(const JobThreads&) = delete;
  // False when the queue is full (the job is not taken).
  bool submit(std::function<void()> job);
  // Runs what is queued, then joins the threads; idempotent.
  void shutdown();
  size_t waiting();
  int busy() const { return busy_.load(); }
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void loop();
  size_t max_queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::atomic<int> busy_{0};
  bool done_ = false;
};

// The server's memory budget: bytes reserved by the requests in flight (a body as it is read, the
// work and answer of an imported graph), so that the server's peak stays bounded whatever mix of
// requests arrives; a request that cannot reserve waits a moment, then is refused 503.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t bytes) : max_(bytes) {}
  // Reserves `bytes`, waiting up to `wait_s` for others to release them; false if they do not.
  // No budget (0) reserves everything.
  bool reserve(int64_t bytes, double wait_s);
  void release(int64_t bytes);
  int64_t used() const { return used_.load(); }
  int64_t max() const { return max_; }

 private:
  const int64_t max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int64_t> used_{0};
};

// Bytes held of a budget until it goes.
class Reservation {
 public:
  explicit Reservation(MemoryBudget* b = nullptr) : budget_(b) {}
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() { release(); }
  bool add(int64_t bytes, double wait_s) {
    if (!budget_ || bytes <= 0) return true;
    if (!budget_->reserve(bytes, wait_s)) return false;
    held_ += bytes;
    return true;
  }
  void release() {
    if (budget_ && held_ > 0) budget_->release(held_);
    held_ = 0;
  }
  int64_t held() const { return held_; }
  MemoryBudget* budget() const { return budget_; }

 private:
  MemoryBudget* budget_;
  int64_t held_ = 0;
};

struct ConnectionLimits {
  int max_connections = 1024;  // open connections, waiting or served (min(this, 128) serve heads)
  int max_requests_per_connection = 100;
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  double idle_timeout_s = 5;
  double write_timeout_s = 30;
  int64_t max_header_bytes = 64 << 10;
  int64_t max_body_bytes = 64ll << 20;
  // Memory the server's requests in flight may hold together (0: no budget). A body reserves
  // four times its length (the bytes, the parsed document, what is decoded from it) before it
  // is read; a chunked one, four times the body limit.
  int64_t memory_budget_bytes = 1ll << 30;
};

struct ConnectionStats {
  std::atomic<int64_t> open{0};             // connections open now
  std::atomic<int64_t> accepted{0};         // connections served (or refused) since start
  std::atomic<int64_t> refused{0};          // answered 503: over the connection cap
  std::atomic<int64_t> header_timeouts{0};  // answered 408: headers not in within the deadline
  std::atomic<int64_t> too_large{0};        // answered 413 or 431 before reading
  std::atomic<int64_t> bad_framing{0};      // answered 400 and closed: framing RFC 9112 refuses
  std::atomic<int64_t> waiting{0};          // connections in the waiting room now
  std::atomic<int64_t> over_budget{0};      // answered 503: the memory budget was held by others
};

// A request head (request line and headers through the blank line) as RFC 9112 frames its body:
// why the rules refuse it, or the body's Content-Length and whether it is chunked.
struct Framing {
  std::optional<std::string> problem;
  int64_t length = -1;  // Content-Length (saturated past any limit), -1 when none is given
  bool chunked = false;
};
Framing read_framing(std::string_view head);

// Set by a route for the request it is answering: close the connection after this answer (an
// early refusal leaves the body unread, so the connection cannot carry another request).
void close_connection_after_response();

class GuardedServer : public httplib::Server {
 public:
  GuardedServer(ConnectionLimits limits, std::function<std::string(const Error&, const std::string& request_id)> error_body,
                std::function<std::string()> next_request_id);
  ~GuardedServer() override;
  const ConnectionStats& stats() const { return stats_; }
  MemoryBudget& budget() { return budget_; }
  const ConnectionLimits& limits() const { return limits_; }
  // Ends every connection's waits (within 0.1 s) and stops the server.
  void shutdown();
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
  // library): past it a burst of connections waits for the client's SYN retries, seconds each.
  // Listens again on the bound port's socket with the system's maximum.
  void widen_backlog(int port);

  struct Connection;
  class Room;

 private:
  // On the accepting thread: counts the connection against the cap and hands it to the room.
  bool process_and_close_socket(socket_t sock) override;
  // On a connection thread: the requests whose heads are in; then back to the room or closed.
  void serve(std::unique_ptr<Connection> c);
  // Answered and done: closed now, or (`linger`) shut for writing and drained by the room.
  void finish(std::unique_ptr<Connection> c, bool linger);
  void refuse(socket_t sock, int status, const Error& e, const char* extra_headers = "");
  void stop_connections();

  ConnectionLimits limits_;
  std::function<std::string(const Error&, const std::string&)> error_body_;
  std::function<std::string()> next_request_id_;
  ConnectionStats stats_;
  MemoryBudget budget_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<JobThreads> threads_;
  std::unique_ptr<Room> room_;
};

}  // namespace gpusim::serve
