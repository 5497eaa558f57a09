// gpusim serve's connection layer (http_server.h): deadlines, caps and sizes per connection, over
// cpp-httplib's request handling.
#include "http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace gpusim::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool close_after = false;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits for `events` on `sock` until the deadline (or until `stopping`): true when ready.
bool wait_for(int sock, short events, Clock::time_point deadline, const std::atomic<bool>& stopping) {
  for (;;) {
    if (stopping.load(std::memory_order_relaxed)) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// A connection as httplib reads and writes it: buffered reads that fail past the current
// deadline or byte budget, writes that fail past the write timeout.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int sock, const ConnectionLimits& limits, const std::atomic<bool>& stopping)
      : sock_(sock), limits_(limits), stopping_(stopping) {}

  void set_deadline(Clock::time_point d) { deadline_ = d; }
  void set_budget(int64_t bytes) {
    budget_ = bytes;
    consumed_ = 0;
  }
  // Unread bytes already received.
  size_t buffered() const { return buf_.size() - pos_; }
  // Receives more into the buffer: > 0 bytes, 0 at the peer's end, < 0 on timeout or error.
  ssize_t fill() {
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    }
    if (!wait_for(sock_, POLLIN, deadline_, stopping_)) return -1;
    char tmp[16384];
    ssize_t n;
    do {
      n = ::recv(sock_, tmp, sizeof(tmp), 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
    return n;
  }
  // The head (request line and headers, through the blank line) when it is all in the buffer.
  std::optional<std::string_view> head() const {
    const std::string_view v(buf_.data() + pos_, buf_.size() - pos_);
    const size_t end = v.find("\r\n\r\n");
    if (end == std::string_view::npos) return std::nullopt;
    return v.substr(0, end + 4);
  }

  bool is_readable() const override {
    return buffered() > 0 || wait_for(sock_, POLLIN, deadline_, stopping_);
  }
  bool is_writable() const override {
    return wait_for(sock_, POLLOUT, after(limits_.write_timeout_s), stopping_);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ >= budget_) return -1;  // past the body limit: stop reading this request
    if (buffered() == 0) {
      const ssize_t n = fill();
      if (n <= 0) return n < 0 ? -1 : 0;
    }
    const size_t take = std::min({size, buffered(), static_cast<size_t>(budget_ - consumed_)});
    std::copy_n(buf_.data() + pos_, take, ptr);
    pos_ += take;
    consumed_ += static_cast<int64_t>(take);
    return static_cast<ssize_t>(take);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  int sock_;
  const ConnectionLimits& limits_;
  const std::atomic<bool>& stopping_;
  Clock::time_point deadline_ = Clock::now();
  std::string buf_;
  size_t pos_ = 0;
  int64_t budget_ = 0, consumed_ = 0;
};

// Content-Length of a head, -1 when absent or unreadable (httplib then refuses it or reads chunks).
int64_t content_length(std::string_view head) {
  size_t at = 0;
  while (at < head.size()) {
    size_t eol = head.find("\r\n", at);
    if (eol == std::string_view::npos) eol = head.size();
    const std::string_view line = head.substr(at, eol - at);
    at = eol + 2;
    constexpr std::string_view kName = "content-length:";
    if (line.size() <= kName.size()) continue;
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i) {
      match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    }
    if (!match) continue;
    int64_t v = 0;
    bool digits = false;
    for (char c : line.substr(kName.size())) {
      if (c == ' ' || c == '\t') continue;
      if (c < '0' || c > '9') return -1;
      digits = true;
      if (v > (int64_t{1} << 50)) return int64_t{1} << 50;  // absurd: over any limit
      v = v * 10 + (c - '0');
    }
    return digits ? v : -1;
  }
  return -1;
}

// One thread per connection, up to a fixed number: connections are served concurrently, and the
// cap on open connections (checked first thing on each) keeps the queue short.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t n) : threads_(static_cast<int>(n), 0) {}
  void enqueue(std::function<void()> fn) override { threads_.submit(std::move(fn)); }
  void shutdown() override { threads_.shutdown(); }

 private:
  JobThreads threads_;
};

// Closes a connection gracefully: our side's end first, then what the client still sends is read
// and dropped for a moment, so a client that is still writing a body we refused gets our answer
// instead of a reset.
void linger_close(int sock, double seconds, int64_t max_bytes, const std::atomic<bool>& stopping) {
  ::shutdown(sock, SHUT_WR);
  const auto deadline = after(seconds);
  int64_t drained = 0;
  char buf[16384];
  while (drained < max_bytes && wait_for(sock, POLLIN, deadline, stopping)) {
    const ssize_t n = ::recv(sock, buf, sizeof(buf), 0);
    if (n <= 0) break;
    drained += n;
  }
  ::close(sock);
}

const char* reason(int status) {
  switch (status) {
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

JobThreads::JobThreads(int threads, size_t max_queue) : max_queue_(max_queue) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
}

bool JobThreads::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (done_ || (max_queue_ > 0 && jobs_.size() >= max_queue_)) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void JobThreads::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (done_ && threads_.empty()) return;
    done_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

size_t JobThreads::waiting() {
  std::lock_guard<std::mutex> l(mu_);
  return jobs_.size();
}

void JobThreads::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return done_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // done, and nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    ++busy_;
    job();
    --busy_;
  }
}

void close_connection_after_response() { close_after = true; }

GuardedServer::GuardedServer(ConnectionLimits limits,
                             std::function<std::string(const Error&, const std::string&)> error_body,
                             std::function<std::string()> next_request_id)
    : limits_(limits), error_body_(std::move(error_body)), next_request_id_(std::move(next_request_id)) {
  const size_t threads = static_cast<size_t>(std::max(1, limits_.max_connections)) + 8;
  new_task_queue = [threads] { return new ConnectionThreads(threads); };
}

void GuardedServer::shutdown() {
  stopping_ = true;
  if (is_running()) stop();
}

void GuardedServer::refuse(socket_t sock, int status, const Error& e, const char* extra_headers) {
  const std::string id = next_request_id_();
  const std::string body = error_body_(e, id);
  const std::string msg = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-Request-Id: {}\r\n{}"
      "Connection: close\r\n\r\n{}",
      status, reason(status), body.size(), id, extra_headers, body);
  size_t sent = 0;
  const auto deadline = after(1.0);
  while (sent < msg.size() && wait_for(sock, POLLOUT, deadline, stopping_)) {
    const ssize_t n = ::send(sock, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  ++stats_.accepted;
  const int64_t open = ++stats_.open;
  // A connection that ends on a refusal (its body unread) lingers so the client reads the answer;
  // one that ends cleanly closes at once.
  struct Close {
    socket_t s;
    ConnectionStats& st;
    const std::atomic<bool>& stopping;
    bool linger = true;
    ~Close() {
      --st.open;  // answered: the slot is free while the last bytes drain
      if (linger) {
        linger_close(s, 1.0, 8 << 20, stopping);
      } else {
        ::shutdown(s, SHUT_RDWR);
        ::close(s);
      }
    }
  } closer{sock, stats_, stopping_};
  if (open > limits_.max_connections) {
    ++stats_.refused;
    refuse(sock, 503,
           Error{ErrorCode::kUnavailable, fmt::format("the server has {} connections open, its limit (gpusim serve "
                                                      "--max-connections); retry shortly",
                                                      limits_.max_connections)},
           "Retry-After: 1\r\n");
    return false;
  }
  DeadlineStream strm(sock, limits_, stopping_);
  for (int served = 0; served < std::max(1, limits_.max_requests_per_connection); ++served) {
    // The next request's first byte: a new connection has the header deadline, an idle one the
    // keep-alive timeout; then the whole head within the header deadline.
    const double wait_s = served == 0 ? limits_.header_timeout_s : limits_.idle_timeout_s;
    strm.set_deadline(after(wait_s));
    if (strm.buffered() == 0 && strm.fill() <= 0) return served > 0;
    strm.set_deadline(after(limits_.header_timeout_s));
    auto headers_too_large = [&] {
      ++stats_.too_large;
      refuse(sock, 431, Error{ErrorCode::kLimit, fmt::format("the request's headers are over {} bytes",
                                                             limits_.max_header_bytes)});
      return false;
    };
    std::optional<std::string_view> head;
    while (!(head = strm.head())) {
      if (static_cast<int64_t>(strm.buffered()) > limits_.max_header_bytes) return headers_too_large();
      const ssize_t n = strm.fill();
      if (n == 0) return false;  // the client went away
      if (n < 0) {
        if (stopping_) return false;
        ++stats_.header_timeouts;
        refuse(sock, 408, Error{ErrorCode::kLimit, fmt::format("the request's headers did not arrive within {} s "
                                                               "(gpusim serve --header-timeout-s)",
                                                               limits_.header_timeout_s)});
        return false;
      }
    }
    if (static_cast<int64_t>(head->size()) > limits_.max_header_bytes) return headers_too_large();
    if (const int64_t length = content_length(*head); length > limits_.max_body_bytes) {
      ++stats_.too_large;
      refuse(sock, 413, Error{ErrorCode::kLimit, fmt::format("the request body ({} bytes, its Content-Length) is over this "
                                                             "server's limit of {} bytes (gpusim serve --max-body-mb)",
                                                             length, limits_.max_body_bytes)});
      return false;
    }
    // The body within its deadline, and never more than the limit (a chunked body stops there).
    strm.set_deadline(after(limits_.header_timeout_s + limits_.body_timeout_s));
    strm.set_budget(static_cast<int64_t>(head->size()) + limits_.max_body_bytes + (64 << 10));
    close_after = false;
    const bool last = served + 1 >= limits_.max_requests_per_connection || stopping_;
    bool closed = false;
    const bool ok = process_request(strm, last, closed, nullptr);
    closer.linger = close_after || !ok;
    if (!ok || closed || close_after || last) return ok;
  }
  return true;
}

}  // namespace gpusim::serve
