#include <cuda_fp16.h>
extern "C" __global__ void k(const __half* __restrict__ a, float* __restrict__ o, volatile float* p, int n) {
  __shared__ __half s[1024];
  float acc = 0;
  for (int kt = 0; kt < n; ++kt) {
    #pragma unroll 2
    for (int e = threadIdx.x; e < 1024; e += 256) {
      float v = 0.0f;
      if (e + kt < n) v = __half2float(a[e + kt * 1024]);
      s[e] = __float2half(v);
    }
    __syncthreads();
    acc += __half2float(s[threadIdx.x ^ kt]);
    __syncthreads();
  }
  float r = 0; for (int q = 0; q < 4; ++q) r += p[q * 1024 + threadIdx.x];
  o[threadIdx.x] = acc + r;
}
