// gpusim serve's connection layer (http_server.h): deadlines, caps and sizes per connection, over
// cpp-httplib's request handling.
#include "http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
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
    if (!wait_for(sock_, POLLIN, deadline_, stopping_)) return -1;
    return fill_now();
  }
  // What has arrived, without waiting: > 0 bytes, 0 at the peer's end, < 0 when nothing is there
  // (errno EAGAIN) or on error.
  ssize_t fill_now() {
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    }
    char tmp[16384];
    ssize_t n;
    do {
      n = ::recv(sock_, tmp, sizeof(tmp), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
    return n;
  }
  // The status of the last answer written (its status line), 0 before any.
  int status() const { return status_; }
  void clear_status() { status_ = 0; }
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
    // httplib writes an answer's status line and headers in one piece: note its status.
    if (size >= 12 && std::string_view(ptr, 7) == "HTTP/1." && ptr[8] == ' ') {
      int v = 0;
      for (int i = 9; i < 12 && ptr[i] >= '0' && ptr[i] <= '9'; ++i) v = v * 10 + (ptr[i] - '0');
      status_ = v;
    }
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
  int status_ = 0;
};

// What a body costs while its request is answered, in copies of its length: the bytes, the parsed
// document, what is decoded from it, and the allocator's slack (measured: 12 concurrent 60 MB JSON
// bodies of one base64 string held about 3.9 copies each; bench/RESULTS.md, issue 56).
constexpr int64_t kBodyCopies = 4;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string_view trimmed(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// What a log or an error may quote of a client's bytes: printable, and short.
std::string quoted(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return v.size() > 64 ? out + "..." : out;
}

// The task queue httplib's accept loop hands each socket to: run at once on the accepting thread,
// where process_and_close_socket only counts the connection and gives it to the waiting room.
class AcceptInline : public httplib::TaskQueue {
 public:
  explicit AcceptInline(std::function<void()> on_shutdown) : on_shutdown_(std::move(on_shutdown)) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { on_shutdown_(); }

 private:
  std::function<void()> on_shutdown_;
};

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

Framing read_framing(std::string_view head) {
  Framing f;
  auto refused = [&f](std::string why) {
    f.problem = std::move(why);
    return f;
  };
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) {
      return refused("a line of the request's head ends in a bare LF; end every line with CRLF");
    }
    if (head[i] == '\r' && (i + 1 >= head.size() || head[i + 1] != '\n')) {
      return refused("the request's head holds a CR that does not end a line");
    }
  }
  size_t at = head.find("\r\n");
  if (at == std::string_view::npos) return refused("the request's head does not end its request line");
  const std::string_view line = head.substr(0, at);
  const std::string_view method = line.substr(0, line.find(' '));
  const std::string_view version = line.substr(line.rfind(' ') + 1);
  at += 2;
  int lengths = 0, codings = 0;
  std::string_view length, coding;
  while (at < head.size()) {
    size_t eol = head.find("\r\n", at);
    if (eol == std::string_view::npos) eol = head.size();
    const std::string_view h = head.substr(at, eol - at);
    at = eol + 2;
    if (h.empty()) break;
    if (h.front() == ' ' || h.front() == '\t') {
      return refused(fmt::format("the header line \"{}\" continues the previous one (obsolete line folding); send each header "
                         "on one line",
                         quoted(h)));
    }
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return refused(fmt::format("the header line \"{}\" has no name and colon", quoted(h)));
    }
    const std::string_view name = h.substr(0, colon);
    if (name.find_first_of(" \t") != std::string_view::npos) {
      return refused(fmt::format("the header name \"{}\" has white space before its colon; RFC 9112 refuses it",
                                 quoted(name)));
    }
    const std::string_view value = trimmed(h.substr(colon + 1));
    if (iequals(name, "content-length")) {
      ++lengths;
      length = value;
      if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) {
        return refused(fmt::format("Content-Length: \"{}\" is not a number of bytes", quoted(value)));
      }
      f.length = 0;
      for (char d : value) f.length = std::min(f.length * 10 + (d - '0'), int64_t{1} << 50);  // past any limit
    } else if (iequals(name, "transfer-encoding")) {
      ++codings;
      coding = value;
    }
  }
  if (lengths > 1) return refused(fmt::format("the request has {} Content-Length headers; send one", lengths));
  if (codings > 0) {
    if (lengths > 0) {
      return refused("the request has both Content-Length and Transfer-Encoding, which a proxy and this server could "
                     "frame differently (RFC 9112 6.1); send one of them");
    }
    if (codings > 1 || !iequals(coding, "chunked")) {
      return refused(fmt::format("Transfer-Encoding: \"{}\" is not taken; send the body with a Content-Length, or "
                                 "with Transfer-Encoding: chunked alone",
                                 quoted(coding)));
    }
    if (version == "HTTP/1.0") return refused("an HTTP/1.0 request cannot be sent with Transfer-Encoding");
    f.chunked = true;
  }
  const bool bodyless = method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE";
  if (bodyless && (f.chunked || f.length > 0)) {
    return refused(fmt::format("a {} request carries a body ({}); send {} without one", quoted(method),
                               f.chunked ? "Transfer-Encoding" : fmt::format("Content-Length: {}", length),
                               quoted(method)));
  }
  return f;
}

bool MemoryBudget::reserve(int64_t bytes, double wait_s) {
  if (max_ <= 0 || bytes <= 0) return true;
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = after(wait_s);
  // A reservation larger than the whole budget waits for an empty server, then takes it all.
  const int64_t need = std::min(bytes, max_);
  if (!cv_.wait_until(l, deadline, [&] { return used_.load() + need <= max_; })) return false;
  used_ += bytes;
  return true;
}

void MemoryBudget::release(int64_t bytes) {
  if (max_ <= 0 || bytes <= 0) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    used_ -= bytes;
  }
  cv_.notify_all();
}

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

// A client connection: its socket, what it has sent not yet read, and where it stands.
struct GuardedServer::Connection {
  Connection(socket_t s, const ConnectionLimits& l, const std::atomic<bool>& stopping) : sock(s), strm(s, l, stopping) {}
  socket_t sock;
  DeadlineStream strm;
  int served = 0;                 // requests answered on it
  Clock::time_point deadline;     // in the room: when it is given up (or, closing, closed)
  bool started = false;           // bytes of the next head are in: the header deadline runs
  bool closing = false;           // answered and shut for writing: drained until closed
  int64_t drained = 0;
};

// The waiting room: one thread polls every connection that has no whole request head yet, reads
// what arrives, hands a connection whose head is in to a connection thread, and answers 408 or
// closes at the deadlines. Connections being closed are drained here too, so that a client still
// writing a body gets its answer rather than a reset, without a thread waiting on it.
class GuardedServer::Room {
 public:
  explicit Room(GuardedServer& s) : s_(s) {
    if (::pipe(wake_) != 0) wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { loop(); });
  }
  ~Room() {
    stop();
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }
  void add(std::unique_ptr<Connection> c) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!done_) {
        incoming_.push_back(std::move(c));
        c = nullptr;
      }
    }
    if (c) {
      s_.finish(std::move(c), false);
      return;
    }
    wake();
  }
  // Connections held now (waiting and closing).
  size_t size() const { return held_.load(); }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (done_) return;
      done_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void wake() {
    const char b = 1;
    if (wake_[1] >= 0) (void)!::write(wake_[1], &b, 1);
  }
  void close_now(Connection& c) {
    if (!c.closing) {
      --s_.stats_.open;
      --s_.stats_.waiting;
    }
    ::shutdown(c.sock, SHUT_RDWR);
    ::close(c.sock);
  }
  void loop() {
    std::vector<std::unique_ptr<Connection>> conns;
    std::vector<pollfd> fds;
    for (;;) {
      bool done;
      {
        std::lock_guard<std::mutex> l(mu_);
        done = done_;
        for (auto& c : incoming_) {
          if (!c->closing) ++s_.stats_.waiting;
          conns.push_back(std::move(c));
        }
        incoming_.clear();
      }
      held_ = conns.size();
      if (done) {
        for (auto& c : conns) close_now(*c);
        held_ = 0;
        return;
      }
      auto now = Clock::now();
      int64_t wait_ms = 1000;
      for (const auto& c : conns) {
        wait_ms = std::min<int64_t>(wait_ms, std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now).count() + 1);
      }
      fds.assign(1, pollfd{wake_[0], POLLIN, 0});
      for (const auto& c : conns) fds.push_back(pollfd{c->sock, POLLIN, 0});
      const int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait_ms)));
      if (r < 0 && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (fds[0].revents & POLLIN) {
        char buf[256];
        (void)!::read(wake_[0], buf, sizeof(buf));
      }
      now = Clock::now();
      std::vector<std::unique_ptr<Connection>> kept;
      kept.reserve(conns.size());
      for (size_t i = 0; i < conns.size(); ++i) {
        std::unique_ptr<Connection> c = std::move(conns[i]);
        const bool readable = r > 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        if (c->closing) {
          if (readable) {
            char buf[16384];
            const ssize_t n = ::recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
            if (n > 0) c->drained += n;
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) || c->drained > (8 << 20)) {
              close_now(*c);
              continue;
            }
          }
          if (now >= c->deadline) {
            close_now(*c);
            continue;
          }
          kept.push_back(std::move(c));
          continue;
        }
        if (readable) {
          const ssize_t n = c->strm.fill_now();
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            close_now(*c);  // the client went away
            continue;
          }
          if (n > 0 && !c->started) {
            c->started = true;
            c->deadline = after(s_.limits_.header_timeout_s);
          }
          if (c->strm.head() || static_cast<int64_t>(c->strm.buffered()) > s_.limits_.max_header_bytes) {
            --s_.stats_.waiting;
            dispatch(std::move(c));
            continue;
          }
        }
        if (now >= c->deadline) {
          if (c->started) {
            ++s_.stats_.header_timeouts;
            --s_.stats_.waiting;
            s_.refuse(c->sock, 408,
                      Error{ErrorCode::kLimit, fmt::format("the request's headers did not arrive within {} s "
                                                           "(gpusim serve --header-timeout-s)",
                                                           s_.limits_.header_timeout_s)});
            begin_closing(*c);
            kept.push_back(std::move(c));
          } else {
            close_now(*c);  // nothing sent: a new or idle keep-alive connection past its wait
          }
          continue;
        }
        kept.push_back(std::move(c));
      }
      conns = std::move(kept);
    }
  }
  // Answered: shut for writing, drained until the client closes or a second passes.
  void begin_closing(Connection& c) {
    --s_.stats_.open;
    c.closing = true;
    c.deadline = after(1.0);
    ::shutdown(c.sock, SHUT_WR);
  }
  void dispatch(std::unique_ptr<Connection> c) {
    Connection* raw = c.release();
    if (s_.threads_->submit([this, raw] { s_.serve(std::unique_ptr<Connection>(raw)); })) return;
    c.reset(raw);  // not taken: stopping, or every thread busy with the queue full
    s_.refuse(c->sock, 503,
              Error{ErrorCode::kUnavailable, "the server's connection threads are all busy; retry shortly"},
              "Retry-After: 1\r\n");
    begin_closing(*c);
    std::lock_guard<std::mutex> l(mu_);
    incoming_.push_back(std::move(c));
  }

  GuardedServer& s_;
  int wake_[2] = {-1, -1};
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> incoming_;
  std::atomic<size_t> held_{0};
  bool done_ = false;
  std::thread thread_;
};

GuardedServer::GuardedServer(ConnectionLimits limits,
                             std::function<std::string(const Error&, const std::string&)> error_body,
                             std::function<std::string()> next_request_id)
    : limits_(limits),
      error_body_(std::move(error_body)),
      next_request_id_(std::move(next_request_id)),
      budget_(limits.memory_budget_bytes) {
  limits_.max_connections = std::max(1, limits_.max_connections);
  const int threads = std::min(limits_.max_connections, 128);
  // Every open connection is a descriptor: the soft limit (often 1024) is raised toward the hard
  // one so the cap, not the descriptor table, decides who is refused.
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    const rlim_t want = static_cast<rlim_t>(limits_.max_connections) * 2 + 512;
    if (r.rlim_cur < want) {
      r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(r.rlim_max, want);
      (void)::setrlimit(RLIMIT_NOFILE, &r);
    }
  }
  threads_ = std::make_unique<JobThreads>(threads, static_cast<size_t>(limits_.max_connections));
  room_ = std::make_unique<Room>(*this);
  new_task_queue = [this] { return new AcceptInline([this] { stop_connections(); }); };
}

GuardedServer::~GuardedServer() { stop_connections(); }

void GuardedServer::stop_connections() {
  stopping_ = true;
  if (threads_) threads_->shutdown();  // each ends its waits within 0.1 s
  if (room_) room_->stop();
}

void GuardedServer::widen_backlog(int port) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(e.path().filename().string());
    } catch (...) {
      continue;
    }
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    std::string ip;
    int bound = 0;
    address_of(fd, false, ip, bound);
    if (bound == port) (void)::listen(fd, SOMAXCONN);
  }
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
    const ssize_t n = ::send(sock, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

void GuardedServer::finish(std::unique_ptr<Connection> c, bool linger) {
  if (linger && !stopping_) {
    --stats_.open;  // answered: the slot is free while the last bytes drain
    c->closing = true;
    c->deadline = after(1.0);
    ::shutdown(c->sock, SHUT_WR);
    room_->add(std::move(c));
    return;
  }
  if (!c->closing) --stats_.open;
  ::shutdown(c->sock, SHUT_RDWR);
  ::close(c->sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  ++stats_.accepted;
  const int64_t open = ++stats_.open;
  auto c = std::make_unique<Connection>(sock, limits_, stopping_);
  if (open > limits_.max_connections || stopping_) {
    ++stats_.refused;
    refuse(sock, 503,
           Error{ErrorCode::kUnavailable, fmt::format("the server has {} connections open, its limit (gpusim serve "
                                                      "--max-connections); retry shortly",
                                                      limits_.max_connections)},
           "Retry-After: 1\r\n");
    // Over the cap the room takes no more than its share of closing connections.
    finish(std::move(c), room_->size() < static_cast<size_t>(limits_.max_connections) * 4);
    return false;
  }
  // A new connection's first byte is due within the header deadline.
  c->deadline = after(limits_.header_timeout_s);
  room_->add(std::move(c));
  return true;
}

void GuardedServer::serve(std::unique_ptr<Connection> c) {
  DeadlineStream& strm = c->strm;
  for (;;) {
    if (stopping_) return finish(std::move(c), false);
    const std::optional<std::string_view> head = strm.head();
    if (!head || static_cast<int64_t>(head->size()) > limits_.max_header_bytes) {
      ++stats_.too_large;
      refuse(c->sock, 431, Error{ErrorCode::kLimit, fmt::format("the request's headers are over {} bytes",
                                                                limits_.max_header_bytes)});
      return finish(std::move(c), true);
    }
    const Framing framing = read_framing(*head);
    if (framing.problem) {
      ++stats_.bad_framing;
      refuse(c->sock, 400, Error{ErrorCode::kInvalidArgument, *framing.problem});
      return finish(std::move(c), true);
    }
    if (framing.length > limits_.max_body_bytes) {
      ++stats_.too_large;
      refuse(c->sock, 413, Error{ErrorCode::kLimit, fmt::format("the request body ({} bytes, its Content-Length) is over "
                                                                "this server's limit of {} bytes (gpusim serve "
                                                                "--max-body-mb)",
                                                                framing.length, limits_.max_body_bytes)});
      return finish(std::move(c), true);
    }
    // The memory the body will take, reserved before a byte of it is read: admission waits a
    // moment for other requests to finish, then refuses.
    const int64_t body = framing.chunked ? limits_.max_body_bytes : std::max<int64_t>(0, framing.length);
    Reservation held(&budget_);
    if (!held.add(kBodyCopies * body, 2.0)) {
      ++stats_.over_budget;
      refuse(c->sock, 503, Error{ErrorCode::kUnavailable,
                                 fmt::format("the server's memory budget ({} MiB) is held by the requests in flight and "
                                             "this body needs {} MiB of it; retry shortly",
                                             budget_.max() >> 20, (kBodyCopies * body) >> 20)},
             "Retry-After: 1\r\n");
      return finish(std::move(c), true);
    }
    // The body within its deadline, and never more than the limit (a chunked body stops there).
    strm.set_deadline(after(limits_.header_timeout_s + limits_.body_timeout_s));
    strm.set_budget(static_cast<int64_t>(head->size()) + limits_.max_body_bytes + (64 << 10));
    strm.clear_status();
    close_after = false;
    const bool last = c->served + 1 >= std::max(1, limits_.max_requests_per_connection) || stopping_;
    bool closed = false;
    const bool ok = process_request(strm, last, closed, nullptr);
    // A request httplib's parser refused (400 and the like) leaves the stream where the parser
    // stopped: its remaining bytes must never be read as a next request.
    const int st = strm.status();
    const bool refused = st == 400 || st == 411 || st == 413 || st == 414 || st == 417 || st == 431 || st == 501 ||
                         st == 505;
    if (!ok || close_after || refused) return finish(std::move(c), true);
    if (closed || last) return finish(std::move(c), false);
    ++c->served;
    if (strm.head()) continue;  // pipelined: the next head is already in
    // Back to the room: a partial head keeps a header deadline, none waits the keep-alive time.
    c->started = strm.buffered() > 0;
    c->deadline = after(c->started ? limits_.header_timeout_s : limits_.idle_timeout_s);
    room_->add(std::move(c));
    return;
  }
}

}  // namespace gpusim::serve
