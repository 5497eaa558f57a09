// A k-loop of four 16-byte loads issued together, stored to LDS, a barrier, then MFMAs from LDS;
// after it a volatile read-back loop and a 2-byte store per value (the test's listing: README.md).
typedef float f4 __attribute__((ext_vector_type(4)));
typedef _Float16 h4 __attribute__((ext_vector_type(4)));
extern "C" __global__ void __launch_bounds__(64) mfma_loop(const uint4* __restrict__ a, volatile float* partial,
                                                          __half* out, int steps) {
  __shared__ uint4 tile[256];
  f4 acc = {0, 0, 0, 0};
  const int l = threadIdx.x;
  for (int s = 0; s < steps; ++s) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = a[(s * 4 + u) * 64 + l];
#pragma unroll
    for (int u = 0; u < 4; ++u) tile[u * 64 + l] = v[u];
    __syncthreads();
    const h4 x = *reinterpret_cast<const h4*>(&tile[l]);
    const h4 y = *reinterpret_cast<const h4*>(&tile[64 + l]);
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(x, y, acc, 0, 0, 0);
    __syncthreads();
  }
  float sum = acc[0] + acc[1] + acc[2] + acc[3];
  for (int k = 0; k < 4; ++k) sum += partial[k * 64 + l];
  out[l] = __float2half(sum);
}
