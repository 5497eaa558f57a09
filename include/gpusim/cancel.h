// Cooperative cancellation of long work (a plan search, a prediction, an import, a validation).
// The caller owns a CancelToken and installs it for the work's thread with a CancelScope; the
// library's long loops call check_cancelled(), which throws gpusim::Cancelled once the token is
// cancelled. The public API's exception firewall (Session, Program) turns it into an error Result
// with ErrorCode::kLimit; code that calls the library's lower layers catches it itself.
//
//   auto token = std::make_shared<gpusim::CancelToken>();
//   std::thread([token] { gpusim::CancelScope scope(token.get()); session.plan(...); }).detach();
//   token->cancel();  // the search stops at its next check (well under a second)
//
// A thread with no scope is never cancelled. Work a call hands to threads of its own does not see
// the caller's token unless that thread installs it too.
#pragma once

#include "gpusim/export.h"

#include <atomic>
#include <exception>

namespace gpusim {

class GPUSIM_API CancelToken {
 public:
  void cancel() noexcept { flag_.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return flag_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

// Thrown by check_cancelled(); what() says why.
class GPUSIM_API Cancelled : public std::exception {
 public:
  const char* what() const noexcept override { return "cancelled: the caller stopped this work (a time limit passed)"; }
};

namespace detail {
inline thread_local const CancelToken* current_cancel_token = nullptr;
}

// Installs `token` (may be null) for this thread until the scope ends; scopes nest.
class GPUSIM_API CancelScope {
 public:
  explicit CancelScope(const CancelToken* token) noexcept : prev_(detail::current_cancel_token) {
    detail::current_cancel_token = token;
  }
  ~CancelScope() { detail::current_cancel_token = prev_; }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const CancelToken* prev_;
};

// The token installed for this thread (null when none): to hand to threads the work starts.
inline const CancelToken* current_cancel_token() noexcept { return detail::current_cancel_token; }

// Whether this thread's work has been cancelled.
inline bool cancel_requested() noexcept {
  const CancelToken* t = detail::current_cancel_token;
  return t != nullptr && t->cancelled();
}

// Throws Cancelled when this thread's work has been cancelled. Cheap (a thread-local read and a
// relaxed atomic load): call it once per iteration of a long loop.
inline void check_cancelled() {
  if (cancel_requested()) throw Cancelled();
}


}  // namespace gpusim
