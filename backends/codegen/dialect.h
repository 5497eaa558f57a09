// The kernel dialect shared by the CUDA C++ and GLSL emitters: a per-target prelude that maps
// the dialect's names onto each language, and the buffer declarations and entry point around a
// kernel's body. A generator writes its kernel once; see codegen.h for the names it may use:
//
//   LID_X/Y/Z  thread id in the group     GRP_X/Y/Z  group id     NGRP_X/Y/Z  groups launched
//   BLOCK_X/Y/Z threads per group (constants)
//   b0, b1 ... the buffers; LDk(i) loads element i of buffer k as float (or int for i32 buffers),
//   STk(i, v) stores v (converting to fp16 storage where the buffer is fp16)
//   LDVk(i, a, o) / STVk(i, a, o)  (buffers with Arg::vector = V > 1) load / store V consecutive
//   elements from element i (a multiple of V) into / from a[o] ... a[o + V - 1] (a float or int
//   array) as one access of at most 16 bytes (float4, int4, fp16 packed in uint4; GLSL through a
//   second view `bkv` of the binding)
//   SHARED float tile[256];   (file scope, in decls)      BARRIER();   (group barrier + fence)
//   HALF_T / TO_HALF(x) / FROM_HALF(x)  the fp16 type and conversions (fp16-storage kernels)
//   FN float helper(float x) { ... }   (file scope; helpers cannot see the buffers)
//   math: expf logf sqrtf rsqrtf fabsf fminf fmaxf powf floorf ceilf rintf truncf fmodf sinf cosf
//         tanf tanhf erff sinhf coshf asinf acosf atanf asinhf acoshf atanhf exp2f log2f,
//         INF_F, NAN_F; isnan/isinf; int/float casts written int(x) / float(x)
#pragma once

#include <string>

#include "codegen.h"

namespace gpusim::codegen {

// Everything in front of a kernel's decls: version/includes, the dialect macros and helpers.
// fp16 preludes add HALF_T (the fp16 type, for shared tiles), TO_HALF(x) and FROM_HALF(x); a
// kWmma prelude includes the CUDA warp matrix header.
std::string prelude(backend::Language lang, bool fp16_storage, MatrixPath matrix = MatrixPath::kNone);

}  // namespace gpusim::codegen
