// A wmma GEMM main loop whose operand loads are staged in registers (8 a thread in flight), and an
// epilogue that stages two fragments through shared memory with block barriers between them.
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void __launch_bounds__(128) w(const __half* __restrict__ a, const __half* __restrict__ b,
                                                    __half* __restrict__ c, int ksteps) {
  __shared__ __align__(32) __half sA[32 * 24];
  __shared__ __align__(32) __half sB[16 * 40];
  __shared__ __align__(32) float sC[4 * 256];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  for (int kt = 0; kt < ksteps; ++kt) {
    __half ra[4], rb[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) ra[u] = a[(blockIdx.x * 32 + (threadIdx.x + u * 128) / 16) * 1024 + kt * 16 + threadIdx.x % 16];
#pragma unroll
    for (int u = 0; u < 4; ++u) rb[u] = b[(kt * 16 + (threadIdx.x + u * 128) / 32) * 1024 + threadIdx.x % 32];
#pragma unroll
    for (int u = 0; u < 4; ++u) sA[((threadIdx.x + u * 128) / 16) * 24 + threadIdx.x % 16] = ra[u];
#pragma unroll
    for (int u = 0; u < 4; ++u) sB[((threadIdx.x + u * 128) / 32) * 40 + threadIdx.x % 32] = rb[u];
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, sA + (warp % 2) * 16 * 24, 24);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::load_matrix_sync(fb, sB + j * 16, 40);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    wmma::store_matrix_sync(sC + warp * 256, acc[j], 16, wmma::mem_row_major);
    __syncthreads();
    for (int q = 0; q < 8; ++q) {
      int e = q * 32 + lane;
      c[(blockIdx.x * 32 + (warp % 2) * 16 + e / 16) * 1024 + j * 16 + e % 16] = __float2half(sC[warp * 256 + e]);
    }
    __syncthreads();
  }
}
