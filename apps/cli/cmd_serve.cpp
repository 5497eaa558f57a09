// gpusim serve [--host 127.0.0.1] [--port 8080] [--workers N] [--queue N] [--max-body-mb N]
//              [--max-model-mb N] [--max-nodes N] [--timeout-s S] [--cache-mb N] [--import-cache-mb N] [--profiles DIR]...
//              [--truth PATH] [--token-file FILE] [--allow-host NAME]... [--max-connections N]
//              [--header-timeout-s S] [--body-timeout-s S] [--max-json-depth N] [--max-json-values N] [--quiet]
// The Session API over HTTP/JSON (apps/serve/service.h; OpenAPI at /openapi.json). Prints the
// address it listens on, then serves until SIGTERM or SIGINT, which stop it gracefully: no new
// connections, in-flight requests answered, then exit 0.
#include <fmt/format.h>

#include <cctype>
#include <csignal>
#include <fstream>
#include <iterator>
#include <mutex>
#include <cstdio>
#include <pthread.h>
#include <thread>

#include "gpusim/gpusim.h"
#include "commands.h"
#include "common.h"
#include "service.h"

namespace gpusim::cli {

void add_serve(CLI::App& app, int& rc) {
  struct Args {
    serve::ServiceOptions o;
    double max_body_mb = 64, max_model_mb = 32, cache_mb = 256, import_cache_mb = 512, memory_mb = 1024;
    std::string token_file;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("serve", "Answer predict, compare, plan, profiles and validate over HTTP/JSON");
  cmd->add_option("--host", a->o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a->o.port, "Port (default 8080; 0 picks a free one and prints it)")->check(CLI::Range(0, 65535));
  cmd->add_option("--workers", a->o.workers, "Threads computing answers (default: one per core)")->check(CLI::Range(0, 1024));
  cmd->add_option("--queue", a->o.queue, "Requests that may wait for a worker before 503 (default 64)")->check(CLI::Range(1, 100000));
  cmd->add_option("--max-body-mb", a->max_body_mb, "Largest request body (default 64 MB; over it: 413)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-mb", a->max_model_mb, "Largest model (default 32 MB; over it: 413)")->check(CLI::PositiveNumber);
  cmd->add_option("--memory-mb", a->memory_mb,
                  "Memory the requests in flight may hold together: bodies and each graph's prediction and answer "
                  "(default 1024; a request that cannot reserve its share waits 2 s, then gets 503; 0: no budget)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--max-nodes", a->o.max_nodes, "Largest graph in nodes (default 100000; over it: 413)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--timeout-s", a->o.request_timeout_s, "Time one request may take (default 60 s; over it: 504)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cache-mb", a->cache_mb, "Uploaded models kept, in MB (default 256; least recently used out)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--profiles", a->o.profile_dirs, "Extra directory of GPU profiles, searched first (repeatable)");
  cmd->add_option("--truth", a->o.truth, "Measurements /v1/validate uses when a request posts none");
  cmd->add_option("--import-cache-mb", a->import_cache_mb,
                  "Imported graphs kept, in MB of their estimated memory (default 512; least recently used out)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--token-file", a->token_file,
                  "File holding a bearer token: every route but /healthz then needs \"Authorization: Bearer TOKEN\"");
  cmd->add_option("--allow-host", a->o.allowed_hosts,
                  "A DNS name clients may use for this server (Host and Origin); IP addresses and localhost always "
                  "work (repeatable)");
  cmd->add_option("--max-connections", a->o.max_connections, "Open connections, idle ones included, before new ones get 503 (default 1024)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--header-timeout-s", a->o.header_timeout_s,
                  "Time a request's headers may take to arrive (default 10 s; over it: 408 and closed)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--body-timeout-s", a->o.body_timeout_s, "Time a request's body may take to arrive (default 60 s)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-json-depth", a->o.max_json_depth, "Deepest nesting of a JSON body (default 64)")
      ->check(CLI::Range(2, 10000));
  cmd->add_option("--max-json-values", a->o.max_json_values, "Most values in a JSON body (default 250000)")
      ->check(CLI::Range(int64_t{16}, int64_t{100000000}));
  cmd->add_flag("--quiet", a->quiet, "No access log (by default one line per request on stderr, with its request id)");
  cmd->callback([a, &rc] {
    a->o.max_body_bytes = static_cast<int64_t>(a->max_body_mb * (1 << 20));
    a->o.max_model_bytes = static_cast<int64_t>(a->max_model_mb * (1 << 20));
    a->o.model_cache_bytes = static_cast<int64_t>(a->cache_mb * (1 << 20));
    a->o.imported_cache_bytes = static_cast<int64_t>(a->import_cache_mb * (1 << 20));
    a->o.memory_budget_bytes = static_cast<int64_t>(a->memory_mb * (1 << 20));
    if (!a->token_file.empty()) {
      // A token is a line; 4 KiB bounds a wrong file (/dev/zero), and a directory or FIFO is refused.
      auto read = gpusim::read_user_file(a->token_file, 4096, "the token file");
      if (!read) {
        fmt::print(stderr, "gpusim serve: --token-file {}\n", cli::say(read.error()));
        rc = 2;
        return;
      }
      std::string token = *read;
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
      if (token.empty() || token.find_first_of(" \t\r\n") != std::string::npos) {
        fmt::print(stderr, "gpusim serve: --token-file {}: {}; put one token (no spaces) in the file\n", a->token_file,
                   token.empty() ? "is empty" : "holds more than one word");
        rc = 2;
        return;
      }
      a->o.token = token;
    }
    if (!a->quiet) {
      auto mu = std::make_shared<std::mutex>();
      a->o.log = [mu](const std::string& line) {
        std::lock_guard<std::mutex> l(*mu);
        fmt::print(stderr, "{}\n", line);
      };
    }
    // SIGTERM and SIGINT go to one thread that stops the server; every other thread blocks them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server
    serve::Service svc(a->o);
    auto port = svc.bind();
    if (!port) {
      fmt::print(stderr, "gpusim serve: {}\n", cli::say(port.error()));
      rc = 1;
      return;
    }
    fmt::print("gpusim serve: listening on http://{}:{} (GET /openapi.json for the API; SIGTERM stops)\n", a->o.host,
               *port);
    std::fflush(stdout);
    std::thread waiter([&svc, stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      if (sig == SIGTERM || sig == SIGINT) svc.stop();
    });
    auto st = svc.run();
    // run() returned: stopped by a signal, or failed. Wake the waiter if it still waits.
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    if (!st) {
      fmt::print(stderr, "gpusim serve: {}\n", cli::say(st.error()));
      rc = 1;
      return;
    }
    fmt::print("gpusim serve: stopped\n");
    rc = 0;
  });
}

}  // namespace gpusim::cli
