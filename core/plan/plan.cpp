#include "gpusim/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gpusim/kernel_work.h"

namespace gpusim {

bool runs_on_device(const Graph& g, const Node& n) { return node_work(g, n).has_value(); }

}  // namespace gpusim
