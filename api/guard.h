// The exception firewall of the public API: every Session and Program call runs its body through
// guarded(), so an unexpected exception (a bug, or memory running out) becomes an error Result
// naming the call, never a terminate in the caller's process.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <new>
#include <utility>

#include "gpusim/cancel.h"
#include "gpusim/result.h"

namespace gpusim::api {

template <typename F>
auto guarded(const char* call, F&& body) noexcept -> decltype(body()) {
  try {
    return std::forward<F>(body)();
  } catch (const Cancelled&) {
    return Error{ErrorCode::kLimit, fmt::format("{}: cancelled: the request's time limit passed or the server is "
                                                "stopping", call)};
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kLimit, fmt::format("{}: out of memory; the request needs more memory than is free", call)};
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInternal,
                 fmt::format("{}: internal error: {} (a bug in gpusim: please report it with the input)", call, e.what())};
  } catch (...) {
    return Error{ErrorCode::kInternal, fmt::format("{}: internal error: an unknown exception (a bug in gpusim: please "
                                                   "report it with the input)",
                                                   call)};
  }
}

}  // namespace gpusim::api
