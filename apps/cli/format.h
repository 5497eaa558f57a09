// Human-readable figures for the CLI's tables.
#pragma once

#include <cstdint>
#include <string>

namespace gpusim::cli {

std::string si(double v);        // 4.09e9 -> "4.09 G"
std::string bytes_str(double b); // 102200000 -> "102.2 MB" (decimal units, as datasheets use)

}  // namespace gpusim::cli
