// Test support: runs the built gpusim program (GPUSIM_BINARY) and captures its exit code and
// output, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace gpusim::test {

struct Run {
  int rc;
  std::string out;  // stdout and stderr together
};

inline Run run_gpusim(const std::string& args) {
  const std::string cmd = std::string(GPUSIM_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed: " + cmd};
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace gpusim::test
