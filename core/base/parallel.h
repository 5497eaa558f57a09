// The base layer's one thread pool: work spread over threads that live for one call, the calling
// thread among them. Three shapes, one implementation (run_on_threads):
//   for_each_index  work(i) for every i, handed out one at a time (uneven items balance);
//   for_each_chunk  f(begin, end) over contiguous equal chunks (a CPU kernel's rows);
//   run_cancellable the same body on N threads, each pulling its own items, stopped by the
//                   caller's cancel token (cancel.h).
// Nothing is kept between calls: no global pool, no state (the simulator stays re-entrant).
//
// Usage:
//   gpusim::base::for_each_index(files.size(), 0, [&](size_t i) { digest(files[i]); });
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "gpusim/cancel.h"

namespace gpusim::base {

// The machine's cores (at least 1).
inline int core_count() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// body(k) on `threads` threads (k = 0 on the calling thread), joined before returning.
template <typename F>
void run_on_threads(int threads, F&& body) {
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back([&body, k] { body(k); });
  body(0);
  for (std::thread& t : pool) t.join();
}

// work(i) for every i in [0, n) on up to `threads` threads (0: the machine's cores).
template <typename F>
void for_each_index(size_t n, int threads, F&& work) {
  if (n == 0) return;
  const size_t t = std::min<size_t>(n, static_cast<size_t>(threads > 0 ? threads : core_count()));
  std::atomic<size_t> next{0};
  run_on_threads(static_cast<int>(t), [&](int) {
    for (size_t i = next++; i < n; i = next++) work(i);
  });
}

// f(begin, end) over [0, n) in one contiguous chunk per thread, at most 16 threads; inline when
// n x work_per_item is small (under 64 Ki), where threads would cost more than they save.
template <typename F>
void for_each_chunk(int64_t n, int64_t work_per_item, F&& f) {
  int64_t t = std::min<int64_t>(std::min(core_count(), 16), n);
  if (t <= 1 || n * std::max<int64_t>(work_per_item, 1) < (1 << 16)) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t chunk = (n + t - 1) / t;
  t = (n + chunk - 1) / chunk;
  run_on_threads(static_cast<int>(t), [&](int k) { f(k * chunk, std::min(n, (k + 1) * chunk)); });
}

// `work` on `threads` threads, this one among them, joined. The pool's threads see no scope:
// `work` reads the caller's token (current_cancel_token(), taken before the call) to stop early; a
// Cancelled thrown in any thread ends that thread's share, and this thread throws Cancelled once
// all have joined if the caller's work was cancelled.
template <typename F>
void run_cancellable(int threads, F&& work) {
  run_on_threads(std::max(1, threads), [&](int) {
    try {
      work();
    } catch (const Cancelled&) {
    }
  });
  check_cancelled();
}

}  // namespace gpusim::base
