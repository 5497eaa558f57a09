#include "format.h"

#include <fmt/format.h>

#include <cmath>

namespace gpusim::cli {

std::string si(double v) {
  static const char* units[] = {"", " k", " M", " G", " T", " P", " E"};
  int u = 0;
  while (std::fabs(v) >= 1000.0 && u < 6) {
    v /= 1000.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f}", v);
  return fmt::format("{:.{}f}{}", v, std::fabs(v) < 10 ? 2 : (std::fabs(v) < 100 ? 1 : 0), units[u]);
}

std::string bytes_str(double b) {
  static const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1000.0 && u < 6) {
    b /= 1000.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", b);
  return fmt::format("{:.1f} {}", b, units[u]);
}

}  // namespace gpusim::cli
