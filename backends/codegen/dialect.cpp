// The two faces of the kernel dialect. GLSL gets the CUDA float math names as macros and the
// functions it lacks (erf, a tanh that does not overflow, fmod with C's sign); CUDA C++ gets GLSL's
// integer type names and the dialect's id macros. HIP compiles the CUDA text (hiprtc defines the
// same built-ins), with hip_fp16.h in place of cuda_fp16.h.
#include "dialect.h"

#include <fmt/format.h>

namespace gpusim::codegen {

std::string_view storage_name(Storage s) {
  switch (s) {
    case Storage::kF32: return "f32";
    case Storage::kF16: return "f16";
    case Storage::kI32: return "i32";
    case Storage::kU8: return "u8";
    case Storage::kI8: return "i8";
  }
  return "?";
}

int storage_bytes(Storage s) { return s == Storage::kF16 ? 2 : storage_is_byte(s) ? 1 : 4; }

Storage storage_of(DType t, const Options& opts) {
  if (dtype_is_float(t)) return opts.float_storage;
  if (t == DType::kUInt8) return Storage::kU8;
  if (t == DType::kInt8) return Storage::kI8;
  return Storage::kI32;
}

namespace {

constexpr const char* kGlslMath = R"(#define expf exp
#define logf log
#define sqrtf sqrt
#define rsqrtf inversesqrt
#define fabsf abs
#define fminf min
#define fmaxf max
#define powf pow
#define floorf floor
#define ceilf ceil
#define rintf roundEven
#define truncf trunc
#define sinf sin
#define cosf cos
#define tanf tan
#define sinhf sinh
#define coshf cosh
#define asinf asin
#define acosf acos
#define atanf atan
#define asinhf asinh
#define acoshf acosh
#define atanhf atanh
#define exp2f exp2
#define log2f log2
#define INF_F uintBitsToFloat(0x7F800000u)
#define NAN_F uintBitsToFloat(0x7FC00000u)
#define TF32_ROUND(x) uintBitsToFloat((floatBitsToUint(x) + 0x1000u) & 0xFFFFE000u)
#define FN
#define SHARED shared
#define BARRIER() { memoryBarrierShared(); barrier(); }
#define FENCE() memoryBarrierBuffer()
#define UNROLL
#define UNROLL2
#define UNROLL1
#define LID_X int(gl_LocalInvocationID.x)
#define LID_Y int(gl_LocalInvocationID.y)
#define LID_Z int(gl_LocalInvocationID.z)
#define GRP_X int(gl_WorkGroupID.x)
#define GRP_Y int(gl_WorkGroupID.y)
#define GRP_Z int(gl_WorkGroupID.z)
#define NGRP_X int(gl_NumWorkGroups.x)
#define NGRP_Y int(gl_NumWorkGroups.y)
#define NGRP_Z int(gl_NumWorkGroups.z)
float tanhf(float x) { float e = exp(-2.0 * abs(x)); float t = (1.0 - e) / (1.0 + e); return x < 0.0 ? -t : t; }
float fmodf(float x, float y) { return x - y * trunc(x / y); }
// erf: a Taylor series below 0.5 (relative error < 1e-8 there), above it the Numerical Recipes
// erfc approximation (fractional error < 1.2e-7).
float erff(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float z = x * x;
    return 1.1283791670955126 * x * (1.0 + z * (-1.0 / 3.0 + z * (0.1 + z * (-1.0 / 42.0 + z * (1.0 / 216.0 - z / 1320.0)))));
  }
  float t = 1.0 / (1.0 + 0.5 * a);
  float y = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return x < 0.0 ? y - 1.0 : 1.0 - y;
}
)";

constexpr const char* kCudaCommon = R"(typedef unsigned int uint;
#define FN __device__ inline
#define SHARED __shared__
#define BARRIER() __syncthreads()
#define FENCE() __threadfence()
#define UNROLL _Pragma("unroll")
#define UNROLL2 _Pragma("unroll 2")
#define UNROLL1 _Pragma("unroll 1")
#define LID_X int(threadIdx.x)
#define LID_Y int(threadIdx.y)
#define LID_Z int(threadIdx.z)
#define GRP_X int(blockIdx.x)
#define GRP_Y int(blockIdx.y)
#define GRP_Z int(blockIdx.z)
#define NGRP_X int(gridDim.x)
#define NGRP_Y int(gridDim.y)
#define NGRP_Z int(gridDim.z)
#define INF_F __int_as_float(0x7f800000)
#define NAN_F __int_as_float(0x7fc00000)
#define TF32_ROUND(x) __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u)
)";

// LDVk(i, a, o) loads the arg's `vector` consecutive elements from element i (a multiple of
// `vector`) into a[o], a[o + 1], ...; STVk(i, a, o) stores them. One access of at most 16 bytes:
// floats and ints as vec2/vec4 (float2/float4, int2/int4), fp16 as packed pairs in uint/uvec2/
// uvec4 (GLSL unpackHalf2x16/packHalf2x16, CUDA __half2). GLSL reads the buffer through a second
// view of its binding (the block BVk, array bkv), declared by Kernel::source.
//
// RAWVk is the vector's raw type, LDRVk(i) loads it from element i, RAWVZk is a zero of it, and
// FROM_RAWVk(x, j) is element j of vector x as float (the gathers of tile_loads, which keep the
// loads in flight and unpack the values only as they go to shared memory).
std::string vector_macros(backend::Language lang, const Arg& a, size_t k) {
  static const char* kComp[] = {"x", "y", "z", "w"};
  const bool glsl = lang == backend::Language::kGlsl;
  if (storage_is_byte(a.storage)) {  // bytes: one element at a time through the scalar macros
    // A raw vector of at most 4 bytes packed in a uint, the lowest-addressed in the low bits.
    std::string pack;
    for (int j = 0; j < a.vector; ++j) {
      pack += fmt::format("{}((uint(LD{}((i) + {})) & 0xFFu) << {}u)", j ? " | " : "", k, j, 8 * j);
    }
    const std::string byte = a.storage == Storage::kU8 ? "float(((x) >> (uint(j) * 8u)) & 0xFFu)"
                                                       : "float(int((x) << (24u - uint(j) * 8u)) >> 24)";
    return fmt::format("#define LDV{0}(i, a, o) {{ for (int v8_ = 0; v8_ < {1}; ++v8_) a[(o) + v8_] = LD{0}((i) + v8_); }}\n"
                       "#define STV{0}(i, a, o) {{ for (int v8_ = 0; v8_ < {1}; ++v8_) ST{0}((i) + v8_, a[(o) + v8_]); }}\n"
                       "#define RAWV{0} uint\n#define RAWVZ{0} uint(0u)\n#define LDRV{0}(i) ({2})\n#define FROM_RAWV{0}(x, j) {3}\n",
                       k, a.vector, pack, byte);
  }
  const bool f16 = a.storage == Storage::kF16;
  const int words = f16 ? a.vector / 2 : a.vector;  // components of the vector type
  std::string vt;                                   // the vector type
  if (f16) {
    vt = words == 1 ? "uint" : fmt::format("{}{}", glsl ? "uvec" : "uint", words);
  } else if (glsl) {
    vt = fmt::format("{}vec{}", a.storage == Storage::kI32 ? "i" : "", words);
  } else {
    vt = fmt::format("{}{}", a.storage == Storage::kI32 ? "int" : "float", words);
  }
  const std::string at = fmt::format("[(i) / {}]", a.vector);
  std::string load = glsl ? fmt::format("{} v_ = b{}v{};", vt, k, at)
                          : fmt::format("{} v_ = reinterpret_cast<const {}*>(b{}){};", vt, vt, k, at);
  std::string store = fmt::format("{} v_;", vt);
  for (int w = 0; w < words; ++w) {
    const std::string c = words == 1 ? "v_" : fmt::format("v_.{}", kComp[w]);
    if (!f16) {
      load += fmt::format(" a[(o) + {}] = {};", w, c);
      store += fmt::format(" {} = a[(o) + {}];", c, w);
      continue;
    }
    // Two fp16 values per 32-bit word, the lower-addressed one in the low half.
    const std::string lo = fmt::format("a[(o) + {}]", 2 * w), hi = fmt::format("a[(o) + {}]", 2 * w + 1);
    if (glsl) {
      load += fmt::format(" {{ vec2 h_ = unpackHalf2x16({}); {} = h_.x; {} = h_.y; }}", c, lo, hi);
      store += fmt::format(" {} = packHalf2x16(vec2({}, {}));", c, lo, hi);
    } else {
      load += fmt::format(" {{ float2 h_ = __half22float2(*reinterpret_cast<const __half2*>(&{})); {} = h_.x; {} = h_.y; }}",
                          c, lo, hi);
      store += fmt::format(" {{ __half2 h_ = __floats2half2_rn({}, {}); {} = *reinterpret_cast<uint*>(&h_); }}", lo, hi, c);
    }
  }
  store += glsl ? fmt::format(" b{}v{} = v_;", k, at) : fmt::format(" reinterpret_cast<{}*>(b{}){} = v_;", vt, k, at);
  std::string raw = fmt::format("#define RAWV{0} {1}\n", k, vt);
  raw += glsl ? fmt::format("#define RAWVZ{0} {1}(0)\n#define LDRV{0}(i) (b{0}v{2})\n", k, vt, at)
              : fmt::format("#define RAWVZ{0} {1}{{}}\n#define LDRV{0}(i) (reinterpret_cast<const {1}*>(b{0}){2})\n", k, vt, at);
  if (glsl && f16) {
    raw += fmt::format("#define FROM_RAWV{0}(x, j) unpackHalf2x16({1})[(j) % 2]\n", k, words == 1 ? "(x)" : "(x)[(j) / 2]");
  } else if (glsl) {
    raw += fmt::format("#define FROM_RAWV{0}(x, j) float((x)[(j)])\n", k);
  } else {
    raw += fmt::format("#define FROM_RAWV{0}(x, j) {1}(reinterpret_cast<const {2}*>(&(x))[(j)])\n", k,
                       f16 ? "__half2float" : "float", f16 ? "__half" : a.storage == Storage::kI32 ? "int" : "float");
  }
  return fmt::format("#define LDV{0}(i, a, o) {{ {1} }}\n#define STV{0}(i, a, o) {{ {2} }}\n{3}", k, load, store, raw);
}

// The GLSL type of a vector view's elements (see vector_macros).
std::string glsl_vector_type(const Arg& a) {
  if (a.storage == Storage::kF16) return a.vector == 2 ? "uint" : fmt::format("uvec{}", a.vector / 2);
  return fmt::format("{}vec{}", a.storage == Storage::kI32 ? "i" : "", a.vector);
}

}  // namespace

std::string_view matrix_path_name(MatrixPath p) {
  switch (p) {
    case MatrixPath::kNone: return "none";
    case MatrixPath::kWmma: return "wmma";
    case MatrixPath::kMfma: return "mfma";
    case MatrixPath::kPortable: return "portable";
  }
  return "?";
}

MatrixPath matrix_path_for(const backend::DeviceInfo& d) {
  if (!d.matrix_units) return MatrixPath::kNone;
  if (d.backend == "cuda") return MatrixPath::kWmma;  // matrix_units: compute capability 7.0 or later
  if (d.backend == "hip" && (d.arch == "gfx908" || d.arch == "gfx90a" || d.arch.rfind("gfx94", 0) == 0)) {
    return MatrixPath::kMfma;
  }
  return MatrixPath::kNone;
}

std::string prelude(backend::Language lang, bool fp16_storage, MatrixPath matrix) {
  if (lang == backend::Language::kGlsl) {
    std::string s = "#version 450\n";
    if (fp16_storage) {
      s += "#extension GL_EXT_shader_16bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
           "#define HALF_T float16_t\n#define TO_HALF(x) float16_t(x)\n#define FROM_HALF(x) float(x)\n";
    }
    return s + kGlslMath;
  }
  std::string s;
  if (fp16_storage) {
    s += "#if defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)\n#include <hip/hip_fp16.h>\n#else\n#include <cuda_fp16.h>\n#endif\n"
         "#define HALF_T __half\n#define TO_HALF(x) __float2half(x)\n#define FROM_HALF(x) __half2float(x)\n";
  }
  if (matrix == MatrixPath::kWmma) s += "#include <mma.h>\n";
  return s + kCudaCommon;
}

backend::KernelSource Kernel::source(backend::Language lang) const {
  bool f16 = false;
  for (const Arg& a : args) f16 = f16 || a.storage == Storage::kF16;
  backend::KernelSource src;
  src.name = name;
  src.language = lang;
  src.buffers = static_cast<int>(args.size());
  src.block = block;
  src.shared_bytes = shared_bytes;
  src.needs_fp16 = f16;
  src.needs_matrix_units = matrix == MatrixPath::kWmma || matrix == MatrixPath::kMfma;
  std::string code = prelude(lang, f16, matrix);
  code += fmt::format("#define BLOCK_X {}\n#define BLOCK_Y {}\n#define BLOCK_Z {}\n", block[0], block[1], block[2]);
  std::string macros;
  for (size_t k = 0; k < args.size(); ++k) {
    const Arg& a = args[k];
    if (storage_is_byte(a.storage)) {  // the word holding bytes i .. i + 3 (i a multiple of 4)
      macros += lang == backend::Language::kGlsl
                    ? fmt::format("#define LDW{0}(i) b{0}[(i) >> 2]\n", k)
                    : fmt::format("#define LDW{0}(i) (reinterpret_cast<const uint*>(b{0})[(i) >> 2])\n", k);
    }
    if (storage_is_byte(a.storage) && lang == backend::Language::kGlsl) {
      // Four bytes a uint word, the lowest-addressed in the low bits; a store clears and sets its
      // byte with two atomics, so threads writing other bytes of the word lose nothing.
      macros += a.storage == Storage::kU8
                    ? fmt::format("#define LD{0}(i) int(bitfieldExtract(b{0}[(i) >> 2], ((i) & 3) * 8, 8))\n", k)
                    : fmt::format("#define LD{0}(i) bitfieldExtract(int(b{0}[(i) >> 2]), ((i) & 3) * 8, 8)\n", k);
      macros += fmt::format("#define ST{0}(i, v) {{ int i8_ = (i); uint s8_ = uint(i8_ & 3) * 8u; "
                            "atomicAnd(b{0}[i8_ >> 2], ~(0xFFu << s8_)); "
                            "atomicOr(b{0}[i8_ >> 2], (uint(int(v)) & 0xFFu) << s8_); }}\n",
                            k);
    } else if (storage_is_byte(a.storage)) {
      macros += fmt::format("#define LD{0}(i) int(b{0}[(i)])\n#define ST{0}(i, v) b{0}[(i)] = ({1})(int)(v)\n", k,
                            a.storage == Storage::kU8 ? "unsigned char" : "signed char");
    } else if (a.storage == Storage::kF16) {
      macros += lang == backend::Language::kGlsl
                    ? fmt::format("#define LD{0}(i) float(b{0}[(i)])\n#define ST{0}(i, v) b{0}[(i)] = float16_t(v)\n", k)
                    : fmt::format("#define LD{0}(i) __half2float(b{0}[(i)])\n#define ST{0}(i, v) b{0}[(i)] = __float2half(v)\n", k);
    } else {
      macros += fmt::format("#define LD{0}(i) (b{0}[(i)])\n#define ST{0}(i, v) b{0}[(i)] = (v)\n", k);
    }
    // The raw element (its storage type) and its value as float, for loads issued before their
    // values are needed (OperandGather): RAWk the type, RAWZk a zero of it.
    if (a.storage == Storage::kF16) {
      macros += lang == backend::Language::kGlsl
                    ? fmt::format("#define RAW{0} float16_t\n#define RAWZ{0} float16_t(0.0)\n#define LDR{0}(i) (b{0}[(i)])\n"
                                  "#define FROM_RAW{0}(x) float(x)\n",
                                  k)
                    : fmt::format("#define RAW{0} __half\n#define RAWZ{0} __float2half(0.0f)\n#define LDR{0}(i) (b{0}[(i)])\n"
                                  "#define FROM_RAW{0}(x) __half2float(x)\n",
                                  k);
    } else {
      const bool f32 = a.storage == Storage::kF32;
      macros += fmt::format("#define RAW{0} {1}\n#define RAWZ{0} {1}(0)\n#define LDR{0}(i) LD{0}(i)\n#define FROM_RAW{0}(x) float(x)\n",
                            k, f32 ? "float" : "int");
    }
    if (a.vector > 1) macros += vector_macros(lang, a, k);
    // Scratch by role: SPLIT_LD/SPLIT_ST the partial sums, SPLIT_ARRIVE(i) adds one to counter i
    // and returns its value before, SPLIT_RESET(i) sets it back to 0.
    if (a.scratch == Scratch::kPartials) {
      // CUDA reads the partial sums through L2 (ld.global.cg: the fence made them visible there)
      // with ordinary loads, several in flight; a volatile read is one round trip each, in order.
      // HIP and GLSL read through the volatile or coherent binding.
      macros += lang == backend::Language::kGlsl
                    ? fmt::format("#define SPLIT_LD(i) LD{0}(i)\n", k)
                    : fmt::format("#if defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)\n#define SPLIT_LD(i) LD{0}(i)\n#else\n"
                                  "#define SPLIT_LD(i) __ldcg(const_cast<const float*>(b{0}) + (i))\n#endif\n",
                                  k);
      macros += fmt::format("#define SPLIT_ST(i, v) ST{0}(i, v)\n", k);
    } else if (a.scratch == Scratch::kCounters) {
      macros += lang == backend::Language::kGlsl
                    ? fmt::format("#define SPLIT_ARRIVE(i) atomicAdd(b{0}[(i)], 1)\n", k)
                    : fmt::format("#define SPLIT_ARRIVE(i) atomicAdd((int*)(b{0} + (i)), 1)\n", k);
      macros += fmt::format("#define SPLIT_RESET(i) ST{0}(i, 0)\n", k);
    }
  }
  if (lang == backend::Language::kGlsl) {
    code += fmt::format("layout(local_size_x = {}, local_size_y = {}, local_size_z = {}) in;\n", block[0], block[1],
                        block[2]);
    for (size_t k = 0; k < args.size(); ++k) {
      const Arg& a = args[k];
      const char* type = a.storage == Storage::kF32   ? "float"
                         : a.storage == Storage::kF16 ? "float16_t"
                         : storage_is_byte(a.storage) ? "uint"
                                                      : "int";
      code += fmt::format("layout(std430, binding = {0}) {1}buffer B{0} {{ {2} b{0}[]; }};\n", k,
                          a.scratch != Scratch::kNone ? "coherent " : a.written ? "" : "readonly ", type);
      if (a.vector > 1 && !storage_is_byte(a.storage)) {  // a second view of the same binding, for the vector accesses
        code += fmt::format("layout(std430, binding = {0}) {1}buffer BV{0} {{ {2} b{0}v[]; }};\n", k,
                            a.written ? "" : "readonly ", glsl_vector_type(a));
      }
    }
    code += macros + decls + "\nvoid main() {\n" + body + "}\n";
  } else {
    code += macros + decls;
    std::string params;
    for (size_t k = 0; k < args.size(); ++k) {
      const Arg& a = args[k];
      const char* type = a.storage == Storage::kF32   ? "float"
                         : a.storage == Storage::kF16 ? "__half"
                         : a.storage == Storage::kU8  ? "unsigned char"
                         : a.storage == Storage::kI8  ? "signed char"
                                                      : "int";
      // Scratch is shared between groups: volatile, so a group reads what others wrote after the fence.
      params += a.scratch != Scratch::kNone
                    ? fmt::format("{}volatile {}* b{}", k ? ", " : "", type, k)
                    : fmt::format("{}{}{}* __restrict__ b{}", k ? ", " : "", a.written ? "" : "const ", type, k);
    }
    // A minimum of blocks an SM bounds ptxas's registers; hiprtc reads the same argument as a
    // minimum of waves an execution unit, and 1 asks nothing of either beyond their default.
    code += fmt::format("\nextern \"C\" __global__ void __launch_bounds__({}{}) {}({}) {{\n", block[0] * block[1] * block[2],
                        min_blocks > 0 ? fmt::format(", {}", min_blocks) : std::string(), name, params);
    code += body + "}\n";
  }
  src.code = std::move(code);
  return src;
}

}  // namespace gpusim::codegen
