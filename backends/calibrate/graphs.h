// One-kernel graphs built in code: the GEMM, convolution, reduction and fused elementwise kernels
// calibration measures (kernels.cpp) and the backend benchmarks time (bench/bench_backends.cpp).
// Each graph holds one kernel's nodes (fused when there are several), fp32, opset 17.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpusim/graph.h"

namespace gpusim::calibrate {

struct OneKernelGraph {
  std::string cls;         // "gemm", "conv", "reduction", "elementwise"
  std::string name;        // "MatMul 256x256x256"
  Graph g;
  std::vector<int> nodes;  // the kernel: these nodes, fused (anchor 0)
  double work = 0;         // FLOPs or bytes, to order a class by size
};

OneKernelGraph matmul_graph(int64_t m, int64_t n, int64_t k);                 // [m,k] x weight [k,n]
OneKernelGraph conv_graph(int64_t cin, int64_t cout, int64_t hw, int64_t ks);  // ks x ks, same padding, batch 1
OneKernelGraph softmax_graph(int64_t rows, int64_t cols);                    // over the last axis
OneKernelGraph reduce_mean_graph(int64_t rows, int64_t cols);                // over the last axis, keepdims
OneKernelGraph silu_chain_graph(int64_t n);  // x * sigmoid(x) * k + x, four nodes fused

}  // namespace gpusim::calibrate
