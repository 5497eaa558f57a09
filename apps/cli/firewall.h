// The gpusim program's exception firewall: commands report expected failures as messages and exit
// codes; anything thrown past them is a bug, reported as one (exit 70, EX_SOFTWARE), never an abort
// with a core dump. `parse_error` handles CLI11's parse errors (help, version, usage: exit 0 or 2).
// A header so the test suite checks the same code main() runs (tests/apps/cli/test_cli_firewall.cpp).
#pragma once

#include <cstdio>
#include <exception>
#include <new>

namespace gpusim::cli {

template <typename Body, typename OnParseError>
int firewall(Body&& body, OnParseError&& parse_error) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gpusim: out of memory; the command needs more memory than is free\n");
    return 70;
  } catch (const std::exception& e) {
    if (const int code = parse_error(e); code >= 0) return code;
    std::fprintf(stderr, "gpusim: internal error: %s (a bug in gpusim: please report it with the command and its input)\n",
                 e.what());
    return 70;
  } catch (...) {
    std::fprintf(stderr, "gpusim: internal error: an unknown exception (a bug in gpusim: please report it with the "
                         "command and its input)\n");
    return 70;
  }
}

}  // namespace gpusim::cli
