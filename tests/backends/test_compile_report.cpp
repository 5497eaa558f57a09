// Compiled truth (backends/compile_report.h): ptxas's resource report, the PTX instruction counts
// and an AMD disassembly parsed from known text, and code objects that are not one (no compiler
// needed); SPIR-V compiled from GLSL and read back, and modules that are not SPIR-V; the CUDA and
// AMD architectures of a profile; and, where NVRTC or hiprtc is present
// ([compile]), every kernel of a small
// plan compiled, its registers and shared memory read back and set against the cost model's
// assumptions, fp16 GEMMs with their matrix instructions, and `gpusim codegen report` as users
// call it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codegen.h"
#include "compile_report.h"
#include "compiled_figures.h"
#include "gpusim/gpusim.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#include "cuda/sass.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/amdgcn.h"
#include "hip/hiprtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_VULKAN
#include "vulkan/spirv_figures.h"
#endif

using namespace gpusim;
using Catch::Matchers::Contains;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

// y = relu(a @ w + b), then a 3x3 convolution: a GEMM with an epilogue and an implicit GEMM.
std::string small_model() {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{1}}, test::Dim{int64_t{16}}, test::Dim{int64_t{14}}, test::Dim{int64_t{14}}});
  b.initializer("cw", kF32, {32, 16, 3, 3});
  b.node("Conv", {"x", "cw"}, {"c"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"}, "relu");
  b.node("Flatten", {"r"}, {"f"}, "flatten");
  b.initializer("w", kF32, {32 * 14 * 14, 64});
  b.node("MatMul", {"f", "w"}, {"y"}, "mm");
  b.output("y");
  return b.write("compile_report.onnx");
}

}  // namespace

TEST_CASE("ptxas resource reports and PTX instruction counts are read from the compiler's text", "[codegen][report]") {
#ifdef GPUSIM_HAVE_CUDA
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'gemm_mm' for 'sm_90'\n"
      "ptxas info    : Function properties for gemm_mm\n"
      "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 16640 bytes smem, 400 bytes cmem[0]\n";
  backend::cuda::CudaResources r;
  REQUIRE(backend::cuda::parse_ptxas_log(log, r));
  CHECK(r.registers == 168);
  CHECK(r.barriers == 1);
  CHECK(r.static_smem_bytes == 16640);
  CHECK(r.stack_bytes == 24);
  CHECK(r.spill_store_bytes == 8);
  CHECK(r.spill_load_bytes == 12);
  backend::cuda::CudaResources none;
  CHECK_FALSE(backend::cuda::parse_ptxas_log("ptxas info    : 0 bytes gmem\n", none));
  const std::string ptx =
      "\tld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];\n"
      "\t@%p1 ld.global.f32 %f5, [%rd5];\n"
      "\tst.shared.f32 [%r3], %f1;\n"
      "\tld.shared.v2.f32 {%f6, %f7}, [%r4];\n"
      "\twmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 {%f8}, {%r1}, {%r2}, {%f9};\n"
      "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};\n"
      "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];\n"
      "\tcp.async.cg.shared.global [%r1], [%rd1], 16;\n"
      "\tcp.async.commit_group;\n"
      "\tatom.global.add.u32 %r9, [%rd9], 1;\n"
      "\tst.global.f32 [%rd6], %f2;\n";
  backend::cuda::CudaResources c;
  backend::cuda::count_ptx(ptx, c);
  CHECK(c.ld_global == 2);
  CHECK(c.st_global == 1);
  CHECK(c.ld_shared == 1);
  CHECK(c.st_shared == 1);
  CHECK(c.wmma == 1);
  CHECK(c.mma == 1);
  CHECK(c.ldmatrix == 1);
  CHECK(c.cp_async == 1);
  CHECK(c.atomics == 1);
#else
  WARN("built without the CUDA backend: nothing to parse with");
#endif
}

namespace {
[[maybe_unused]] std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("AMDGCN listings give the main loop's instructions, loads in flight and the epilogue", "[codegen][report]") {
#ifdef GPUSIM_HAVE_HIP
  using backend::hip::parse_amdgcn;
  // hiprtc's gfx90a code (tests/data/amdgcn/README.md): a k-loop of four 16-byte loads waited for
  // one by one, stored to LDS and multiplied with v_mfma; after it four volatile (glc) loads waited
  // for alone and a 2-byte store.
  auto f = parse_amdgcn(read_text(std::string(GPUSIM_SOURCE_DIR) + "/tests/data/amdgcn/mfma_loop_gfx90a.s"));
  REQUIRE(f);
  CHECK(f->loops == 1);  // the k-loop's s_cbranch_scc0 back to +0x90; the forward branches are not loops
  REQUIRE(f->has_main_loop);
  const backend::MachineCodeRange& m = f->main_loop;
  CHECK(m.matrix == 1);
  CHECK(m.ld_global == 4);
  CHECK(m.loads_in_flight == 4);  // vmcnt(3): four outstanding at the first wait
  CHECK(m.load_waits == 4);       // vmcnt(3), (2), (1), (0)
  CHECK(m.st_shared == 4);
  CHECK(m.ld_shared == 1);
  CHECK(m.barriers == 0);  // one wavefront a workgroup: no s_barrier
  CHECK(f->all.l2_loads == 4);        // glc: past the CU's cache
  CHECK(f->all.volatile_loads == 0);  // no AMD encoding of its own
  CHECK(f->volatile_loads_in_loops == 0);
  CHECK(f->epilogue.ld_global == 4);
  CHECK(f->epilogue.loads_in_flight == 1);  // each glc load waited for alone
  CHECK(f->epilogue.st_global == 1);
  CHECK(f->epilogue.st_narrow == 1);
  CHECK(f->all.local == 0);
  // Two loads in flight across a loop's back edge, a glc load before it, an s_barrier, and stores
  // by width; the branch target from its offset alone (no <symbol+0x..>).
  auto g = parse_amdgcn(
      "\tglobal_load_dwordx4 v[0:3], v[4:5], off                  // 000000000100: DC5C8000 007F0004\n"
      "\tglobal_load_dword v6, v[4:5], off glc                     // 000000000108: DC508000 067F0004\n"
      "\ts_waitcnt vmcnt(1)                                        // 000000000110: BF8C0F71\n"
      "\ts_barrier                                                 // 000000000114: BF8A0000\n"
      "\tglobal_load_dword v7, v[4:5], off                         // 000000000118: DC508000 077F0004\n"
      "\tglobal_load_dword v8, v[4:5], off                         // 000000000120: DC508000 087F0004\n"
      "\ts_cbranch_scc0 65529                                      // 000000000128: BF84FFF9\n"
      "\tglobal_store_dwordx4 v[4:5], v[0:3], off                  // 00000000012C: DC7C8000 007F0004\n"
      "\tglobal_store_dwordx2 v[4:5], v[0:1], off                  // 000000000134: DC748000 007F0004\n"
      "\tglobal_store_dword v[4:5], v6, off                        // 00000000013C: DC708000 067F0004\n"
      "\tbuffer_store_dword v1, off, s[0:3], 0 offset:4            // 000000000144: E0700004 80000100\n"
      "\ts_endpgm                                                  // 00000000014C: BF810000\n");
  REQUIRE(g);
  CHECK(g->loops == 1);  // 0x128 + 4 - 7 x 4 = 0x110, the s_waitcnt: a loop of five instructions
  CHECK(g->main_loop.ld_global == 2);
  CHECK(g->main_loop.loads_in_flight == 2);  // still outstanding at the back edge
  CHECK(g->main_loop.barriers == 1);
  CHECK(g->all.l2_loads == 1);
  CHECK(g->epilogue.st_128 == 1);
  CHECK(g->epilogue.st_64 == 1);
  CHECK(g->epilogue.st_32 == 1);
  CHECK(g->epilogue.local == 1);
  auto none = parse_amdgcn("\t.text\n\ts_load_dword s0, s[4:5], 0x0\n", "kernel \"k\"'s disassembly");
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Contains("kernel \"k\"'s disassembly holds no AMDGCN instruction"));
#else
  WARN("built without the HIP backend");
#endif
}

TEST_CASE("SASS listings give the main loop's instructions, loads in flight and the epilogue", "[codegen][report][sass]") {
#ifdef GPUSIM_HAVE_CUDA
  using backend::cuda::parse_sass;
  const std::string dir = std::string(GPUSIM_SOURCE_DIR) + "/tests/data/sass/";
  SECTION("a gather converting each value inside its bounds check, and volatile loads after the loop") {
    auto f = parse_sass(read_text(dir + "gather_volatile_sm90.sass"));
    REQUIRE(f);
    CHECK(f->loops == 2);
    CHECK(f->all.ld_global == 7);
    CHECK(f->all.volatile_loads == 4);
    CHECK(f->volatile_loads_in_loops == 0);
    REQUIRE(f->has_main_loop);  // no FMA or matrix instruction: the loop with the most global loads, outermost
    CHECK(f->main_loop.ld_global == 3);
    CHECK(f->main_loop.barriers == 2);
    CHECK(f->main_loop.st_shared == 3);
    CHECK(f->main_loop.ld_shared == 1);
    // LDG then its conversion (one in flight), then the unrolled pair (two in flight).
    CHECK(f->main_loop.load_waits == 2);
    CHECK(f->main_loop.loads_in_flight == 2);
    // The four volatile loads go out together, and one 32-bit store.
    CHECK(f->epilogue.ld_global == 4);
    CHECK(f->epilogue.loads_in_flight == 4);
    CHECK(f->epilogue.st_global == 1);
    CHECK(f->epilogue.st_32 == 1);
    CHECK(f->epilogue.barriers == 0);
  }
  SECTION("a wmma k-loop with staged loads, LDSM and HMMA, and a barrier-bound epilogue") {
    auto f = parse_sass(read_text(dir + "wmma_staged_sm90.sass"));
    REQUIRE(f);
    REQUIRE(f->has_main_loop);
    CHECK(f->main_loop.matrix == 4);  // two mma_sync of m16n16k16, two HMMA.16816 each
    CHECK(f->main_loop.ldsm == 3);
    CHECK(f->main_loop.ld_global == 8);
    CHECK(f->main_loop.loads_in_flight == 4);
    CHECK(f->main_loop.load_waits == 2);
    CHECK(f->main_loop.barriers == 2);
    CHECK(f->main_loop.ldgsts == 0);
    CHECK(f->epilogue.barriers == 4);
    CHECK(f->epilogue.st_global == 16);
    CHECK(f->epilogue.st_narrow == 16);
    CHECK(f->epilogue.matrix == 0);
    CHECK(f->all.local == 0);
    // The gates: loads in flight hold (4 of 8), the epilogue's barriers per fragment do not.
    exec::BinaryFigures b;
    b.code_read = true;
    b.code = *f;
    const auto failed = exec::machine_code_gates(b);
    REQUIRE(failed.size() == 1);
    CHECK_THAT(failed[0], Contains("epilogue barriers: 4"));
    b.code.main_loop.loads_in_flight = 1;
    b.code.volatile_loads_in_loops = 2;
    CHECK(exec::machine_code_gates(b).size() == 3);
  }
  SECTION("text that is not a listing is refused, naming it") {
    auto f = parse_sass("\t.version 8.0\n\tld.global.f32 %f1, [%rd1];\n", "kernel \"k\"'s listing");
    REQUIRE_FALSE(f);
    CHECK(f.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(f.error().message, Contains("kernel \"k\"'s listing holds no SASS instruction"));
  }
#else
  WARN("built without the CUDA backend: nothing to parse with");
#endif
}

TEST_CASE("an NVIDIA profile's generated tiles fit CUDA's static shared memory, as a CUDA device's do", "[codegen][report]") {
  // The H100 allows 227 KiB a block with an opt-in; generated kernels declare theirs statically.
  const codegen::Options o = codegen::target_options(make_device(test::gpu("nvidia-h100-sxm")), true);
  CHECK(o.max_shared_bytes == backend::kCudaStaticSharedBytes);
  CHECK(codegen::target_options(make_device(test::gpu("amd-mi300x")), true).max_shared_bytes == 64u * 1024);
}

#ifdef GPUSIM_HAVE_VULKAN
namespace {
std::vector<uint32_t> spirv_of(const std::string& glsl) {
  auto cc = backend::vulkan::GlslCompiler::create(true);
  REQUIRE(cc);
  backend::KernelSource src;
  src.name = "probe";
  src.language = backend::Language::kGlsl;
  src.code = glsl;
  auto words = cc->compile(src);
  INFO((words ? std::string() : words.error().message));
  REQUIRE(words);
  return *words;
}
}  // namespace
#endif

TEST_CASE("SPIR-V states a kernel's workgroup size and shared memory and its instruction mix", "[codegen][report]") {
#ifdef GPUSIM_HAVE_VULKAN
  const std::vector<uint32_t> words = spirv_of(R"(#version 450
layout(local_size_x = 64, local_size_y = 2) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) buffer B { uint b[]; };
shared float tile[100];
shared vec4 quad[3];
void main() {
  uint i = gl_LocalInvocationIndex;
  if (i < 100u) tile[i] = a[i];
  barrier();
  if (i < 3u) quad[i] = vec4(tile[(i + 1u) % 100u]);
  barrier();
  a[gl_GlobalInvocationID.x] = quad[0].x + quad[1].y;
  atomicAdd(b[0], 1u);
}
)");
  auto r = backend::vulkan::reflect_spirv(words);
  REQUIRE(r);
  CHECK(r->local_size == std::array<int, 3>{64, 2, 1});
  CHECK(r->threads() == 128);
  CHECK(r->workgroup_bytes == 100 * 4 + 3 * 16);
  CHECK(r->barriers == 2);
  CHECK(r->atomics == 1);
  CHECK(r->ld_global >= 1);
  CHECK(r->st_global >= 1);
  CHECK(r->ld_shared >= 2);
  CHECK(r->st_shared >= 2);
  CHECK(r->coop_matrix == 0);
  CHECK(r->version >= 0x00010500u);  // Vulkan 1.2's SPIR-V

  // What is not a compute module is named, never read past its end.
  auto empty = backend::vulkan::reflect_spirv({});
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.error().message, Contains("fewer than the header's 5"));
  std::vector<uint32_t> magic = words;
  magic[0] = 0x12345678;
  auto m = backend::vulkan::reflect_spirv(magic);
  REQUIRE_FALSE(m);
  CHECK_THAT(m.error().message, Contains("0x12345678") && Contains("0x07230203"));
  std::vector<uint32_t> cut(words.begin(), words.begin() + 6);
  cut[5] = (1000u << 16) | 17u;  // an instruction longer than what is left
  auto c = backend::vulkan::reflect_spirv(cut);
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error().message, Contains("claims 1000 words"));
  const std::vector<uint32_t> header_only = {0x07230203, 0x00010500, 0, 10, 0};
  auto h = backend::vulkan::reflect_spirv(header_only);
  REQUIRE_FALSE(h);
  CHECK_THAT(h.error().message, Contains("no GLCompute entry point"));
  std::vector<uint32_t> no_size = words;
  for (size_t at = 5; at < no_size.size(); at += no_size[at] >> 16) {
    if ((no_size[at] & 0xffffu) == 16 && no_size[at + 2] == 17) no_size[at + 3] = 0;  // LocalSize x = 0
    // and no WorkgroupSize built-in to override it (OpDecorate %id BuiltIn WorkgroupSize)
    if ((no_size[at] & 0xffffu) == 71 && no_size[at + 2] == 11 && no_size[at + 3] == 25) no_size[at + 3] = 24;
  }
  auto z = backend::vulkan::reflect_spirv(no_size);
  REQUIRE_FALSE(z);
  CHECK_THAT(z.error().message, Contains("workgroup size is 0x2x1"));
  std::vector<uint32_t> bound = words;
  bound[3] = 2;  // every result id past the module's bound
  auto b = backend::vulkan::reflect_spirv(bound);
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error().message, Contains("beyond the module's id bound 2"));
  // Shared memory whose size the module does not fix, or past any device's: named.
  auto find_op = [](const std::vector<uint32_t>& module, uint32_t op, auto&& pred) -> size_t {
    for (size_t at = 5; at < module.size(); at += module[at] >> 16) {
      if ((module[at] & 0xffffu) == op && pred(at)) return at;
    }
    return 0;
  };
  const size_t array100 = find_op(words, 28, [&](size_t at) {  // OpTypeArray whose length is the constant 100
    return find_op(words, 43, [&](size_t k) { return words[k + 2] == words[at + 3] && words[k + 3] == 100; }) != 0;
  });
  REQUIRE(array100 != 0);
  std::vector<uint32_t> runtime = words;
  runtime[array100] = (runtime[array100] & 0xffff0000u) | 29u;  // OpTypeRuntimeArray, its length word left over
  auto ra = backend::vulkan::reflect_spirv(runtime);
  REQUIRE_FALSE(ra);
  CHECK_THAT(ra.error().message, Contains("Workgroup variable") && Contains("size is not fixed"));
  std::vector<uint32_t> huge = words;
  const size_t length = find_op(huge, 43, [&](size_t k) { return huge[k + 2] == huge[array100 + 3]; });
  REQUIRE(length != 0);
  huge[length + 3] = 0x40000000u;  // 2^30 floats
  auto hg = backend::vulkan::reflect_spirv(huge);
  REQUIRE_FALSE(hg);
  CHECK_THAT(hg.error().message, Contains("Workgroup variables hold more than 1073741824 bytes"));
  // Damaged modules of every kind (words flipped at random) are read or refused, never crash.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint32_t> mutant = words;
    for (int flips = 1 + static_cast<int>(next() % 4); flips > 0; --flips) {
      const size_t at = 5 + next() % (mutant.size() - 5);
      mutant[at] = next() % 3 == 0 ? static_cast<uint32_t>(next()) : mutant[at] ^ (1u << (next() % 32));
    }
    auto got = backend::vulkan::reflect_spirv(mutant);
    if (!got) {
      ++refused;
      CHECK_THAT(got.error().message, Contains("not a SPIR-V compute module"));
    } else {
      CHECK(got->threads() >= 1);
      CHECK(got->workgroup_bytes >= 0);
    }
  }
  CHECK(refused > 0);
  // GLSL that does not compile names the kernel and carries shaderc's log.
  auto cc = backend::vulkan::GlslCompiler::create(true);
  REQUIRE(cc);
  backend::KernelSource bad;
  bad.name = "broken";
  bad.language = backend::Language::kGlsl;
  bad.code = "#version 450\nvoid main() { undefined_name = 1; }\n";
  auto e = cc->compile(bad);
  REQUIRE_FALSE(e);
  CHECK_THAT(e.error().message, Contains("kernel \"broken\"") && Contains("undefined_name"));
  bad.language = backend::Language::kCudaCpp;
  auto cu = cc->compile(bad);
  REQUIRE_FALSE(cu);
  CHECK_THAT(cu.error().message, Contains("CUDA C++") && Contains("kGlsl"));
#else
  WARN("built without the Vulkan backend: no libshaderc to compile with");
#endif
}

TEST_CASE("the compiled report reads SPIR-V for a GPU the Vulkan backend runs", "[codegen][report][compile]") {
#ifdef GPUSIM_HAVE_VULKAN
  const std::string path = small_model();
  const Session s;
  auto m = s.open_model(path);
  REQUIRE(m);
  auto gpu = s.gpu("intel-arc-a770");
  REQUIRE(gpu);
  const std::string dir = test::temp_dir() + "/figures-spirv";
  std::filesystem::remove_all(dir);
  const test::ScopedEnv cache("GPUSIM_KERNEL_CACHE_DIR", dir);
  exec::CompileReportOptions o;
  o.store_figures = true;
  o.keep_sources = true;
  auto r = exec::compile_report(m->graph(), s.target(*gpu, TileSpace::kGenerated), o);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  CHECK(r->arch == "spirv");
  CHECK(r->compiled == static_cast<int>(r->kernels.size()));
  CHECK(r->occupancy_as_assumed == r->compiled);
  CHECK(r->spilling == 0);
  CHECK(r->figures_path.empty());
  CHECK_FALSE(r->figures_not_stored.empty());
  CHECK_FALSE(std::filesystem::exists(dir + "/figures"));
  bool gemm = false;
  for (const auto& k : r->kernels) {
    INFO(k.name);
    CHECK_FALSE(k.binary.registers_read);
    CHECK(k.compiled.registers == k.assumed.registers);  // the model's: SPIR-V states none
    CHECK(k.compiled.threads == k.assumed.threads);
    CHECK_THAT(k.source, Contains("#version 450"));
    if (k.cls == "gemm" || k.cls == "conv") {
      gemm = true;
      // The generator's operand tiles, within the padding row the model allows for a layout it
      // cannot see (KernelWork does not say which operand is transposed).
      CHECK(k.compiled.smem_bytes > 0);
      CHECK(k.compiled.smem_bytes <= k.assumed.smem_bytes);
      CHECK(k.compiled.smem_bytes >= k.assumed.smem_bytes - k.tile.stages * k.tile.block_k * 4 - 4);
      CHECK(k.binary.ld_shared > 0);
      CHECK(k.binary.st_shared > 0);
    }
    CHECK(k.binary.ld_global + k.binary.st_global > 0);
  }
  CHECK(gemm);
#else
  WARN("built without the Vulkan backend: no libshaderc to compile with");
#endif
}

TEST_CASE("a profile's CUDA architecture comes from its compute capability", "[codegen][report]") {
  CHECK(*exec::cuda_arch_of(test::gpu("nvidia-h100-sxm")) == "sm_90");
  CHECK(*exec::cuda_arch_of(test::gpu("nvidia-rtx-3060")) == "sm_86");
  CHECK(*exec::cuda_arch_of(test::gpu("nvidia-rtx-4090")) == "sm_89");
  auto amd = exec::cuda_arch_of(test::gpu("amd-mi300x"));
  REQUIRE_FALSE(amd);
  CHECK(amd.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(amd.error().message, Contains("amd-mi300x") && Contains("sm_XY"));
}

TEST_CASE("a profile's AMD target comes from its architecture", "[codegen][report]") {
  CHECK(*exec::hip_arch_of(test::gpu("amd-mi250x")) == "gfx90a");
  CHECK(*exec::hip_arch_of(test::gpu("amd-mi300x")) == "gfx942");
  CHECK(*exec::hip_arch_of(test::gpu("amd-rx-6800-xt")) == "gfx1030");
  auto nv = exec::hip_arch_of(test::gpu("nvidia-h100-sxm"));
  REQUIRE_FALSE(nv);
  CHECK(nv.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(nv.error().message, Contains("nvidia-h100-sxm") && Contains("gfxNNN"));
}

TEST_CASE("AMD code objects are read from their metadata note, and what is not one is named", "[codegen][report]") {
#ifdef GPUSIM_HAVE_HIP
  for (const std::string& bad : {std::string("not an elf"), std::string("\x7f" "ELF") + std::string(60, '\0')}) {
    auto r = backend::hip::read_code_object(bad, "k");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Contains("kernel \"k\"") && (Contains("ELF") || Contains("metadata note")));
  }
  // A 64-bit little-endian ELF header with no sections: no metadata note.
  std::string empty(64, '\0');
  empty.replace(0, 6, std::string("\x7f" "ELF\x02\x01", 6));
  auto none = backend::hip::read_code_object(empty, "k");
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Contains("NT_AMDGPU_METADATA"));
  // A code object made here: an ELF64 header, one SHT_NOTE section holding the AMDGPU metadata.
  auto code_object = [](const nlohmann::json& md) {
    const std::vector<uint8_t> desc = nlohmann::json::to_msgpack(md);
    std::string note;
    auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) note += static_cast<char>((v >> (8 * i)) & 0xff); };
    u32(7);  // "AMDGPU\0"
    u32(static_cast<uint32_t>(desc.size()));
    u32(32);  // NT_AMDGPU_METADATA
    note += std::string("AMDGPU\0\0", 8);
    note.append(desc.begin(), desc.end());
    while (note.size() % 4 != 0) note += '\0';
    std::string elf(64, '\0');
    elf.replace(0, 6, std::string("\x7f" "ELF\x02\x01", 6));
    const uint64_t note_at = 64, sh_at = 64 + note.size();
    auto put = [&](size_t at, uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) elf[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
    };
    put(0x28, sh_at, 8);  // e_shoff
    put(0x3A, 64, 2);     // e_shentsize
    put(0x3C, 1, 2);      // e_shnum
    elf += note;
    std::string sh(64, '\0');
    for (int i = 0; i < 4; ++i) sh[4 + static_cast<size_t>(i)] = static_cast<char>((7u >> (8 * i)) & 0xff);  // SHT_NOTE
    for (int i = 0; i < 8; ++i) {
      sh[0x18 + static_cast<size_t>(i)] = static_cast<char>((note_at >> (8 * i)) & 0xff);
      sh[0x20 + static_cast<size_t>(i)] = static_cast<char>((uint64_t{note.size()} >> (8 * i)) & 0xff);
    }
    return elf + sh;
  };
  const nlohmann::json md = {{"amdhsa.target", "amdgcn-amd-amdhsa--gfx90a"},
                             {"amdhsa.kernels",
                              {{{".name", 7}},  // not a string: skipped, not thrown
                               {{".name", "k"},
                                {".vgpr_count", 68},
                                {".agpr_count", 4},
                                {".sgpr_count", 66},
                                {".vgpr_spill_count", 2},
                                {".group_segment_fixed_size", 8192},
                                {".private_segment_fixed_size", 16},
                                {".wavefront_size", 64}}}}};
  auto read = backend::hip::read_code_object(code_object(md), "k");
  INFO((read ? std::string() : read.error().message));
  REQUIRE(read);
  CHECK(read->arch == "gfx90a");
  CHECK(read->vgprs == 68);
  CHECK(read->agprs == 4);
  CHECK(read->sgprs == 66);
  CHECK(read->vgpr_spills == 2);
  CHECK(read->lds_bytes == 8192);
  CHECK(read->scratch_bytes == 16);
  CHECK(read->wavefront == 64);
  auto missing = backend::hip::read_code_object(code_object(md), "other");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Contains("lists no kernel of that name"));
  auto not_md = backend::hip::read_code_object(code_object(nlohmann::json::array({1, 2})), "k");
  REQUIRE_FALSE(not_md);
  CHECK_THAT(not_md.error().message, Contains("amdhsa.kernels"));
  // llvm-objdump's lines: the mnemonic is the first word; comments and labels count nothing.
  backend::hip::HipResources r;
  backend::hip::count_amdgcn(
      "0000000000001500 <k>:\n"
      "\tglobal_load_dwordx4 v[4:7], v[2:3], off offset:12  // 000000001530: DC5C800C\n"
      "\tbuffer_load_dword v1, off, s[0:3], 0\n"
      "\tds_read_b128 v[8:11], v0\n\tds_write_b64 v0, v[2:3]\n\tds_store_b32 v0, v1\n"
      "\tv_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]\n\tv_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]\n"
      "\tglobal_store_dword v[0:1], v2, off\n\tglobal_atomic_add v[0:1], v2, off\n\ts_endpgm\n",
      r);
  CHECK(r.ld_global == 2);
  CHECK(r.st_global == 1);
  CHECK(r.ld_shared == 1);
  CHECK(r.st_shared == 2);
  CHECK(r.mfma == 1);
  CHECK(r.wmma == 1);
  CHECK(r.atomics == 1);
#else
  WARN("built without the HIP backend");
#endif
}

TEST_CASE("the compiled report reads what hiprtc builds for an AMD GPU", "[codegen][report][compile]") {
#ifdef GPUSIM_HAVE_HIP
  if (std::string why; !backend::hip::hiprtc_available(&why)) {
    WARN("hiprtc unavailable: " << why);
    return;
  }
  const Session s;
  auto m = s.open_model(small_model());
  REQUIRE(m);
  const Target t = s.target(test::gpu("amd-mi250x"), TileSpace::kGenerated);
  auto r = exec::compile_report(retype(m->graph(), DType::kFloat16), t, {});
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  CHECK(r->arch == "gfx90a");
  CHECK_THAT(r->compiler, Contains("hiprtc"));
  CHECK(r->compiled == static_cast<int>(r->kernels.size()));
  for (const auto& k : r->kernels) {
    INFO(k.name);
    CHECK(k.compiled.registers > 0);
    CHECK(k.compiled.registers <= 512);
    CHECK(k.compiled.ctas_per_unit > 0);
    if (k.cls == "gemm" || k.cls == "conv") {
      // The one-row MatMul is GEMV-shaped: vector units, shared memory only for its closing sum.
      const bool gemv = gemv_shaped(k.tile);
      CHECK(k.matrix_path == (gemv ? "none" : "mfma"));
      CHECK(k.compiled.smem_bytes > 0);
      if (k.binary.instructions_read) {
        CHECK((k.binary.mfma > 0) == !gemv);
        CHECK(k.binary.ld_shared > 0);
      }
    }
  }
  CHECK(r->missing_matrix == 0);
  // A target this ROCm's compiler does not know is refused before it is compiled, naming it.
  exec::CompileReportOptions o;
  o.arch = "gfx9999";
  auto u = exec::compile_report(m->graph(), t, o);
  REQUIRE_FALSE(u);
  CHECK_THAT(u.error().message, Contains("gfx9999"));
#else
  WARN("built without the HIP backend");
#endif
}

TEST_CASE("compiled figures are kept per architecture in the kernel cache and the cost model prices with them",
          "[codegen][report]") {
  const std::string dir = test::temp_dir() + "/figures-cache";
  std::filesystem::remove_all(dir);
  const test::ScopedEnv cache("GPUSIM_KERNEL_CACHE_DIR", dir);
  const DeviceModel h100 = make_device(test::gpu("nvidia-h100-sxm"));
  const codegen::Options opts = codegen::target_options(h100, false);
  const KernelWork w = gemm_work(DType::kFloat32, 1, 512, 512, 512);
  const codegen::TargetCapability plain(opts);
  const TileConfig t = plain.generated(w, choose_tile(w, h100));
  CHECK(t.registers == 0);  // no figures: the model's estimate
  CHECK(t.smem_bytes > 0);  // the generator's own layout, always
  // The key: the work, the schedule, the storage and the matrix path; not the derived figures.
  const std::string key = codegen::compiled_figures_key(w, t, opts);
  CHECK(key.size() == 16);
  TileConfig with = t;
  with.registers = 99;
  CHECK(codegen::compiled_figures_key(w, with, opts) == key);
  codegen::Options f16 = opts;
  f16.float_storage = codegen::Storage::kF16;
  CHECK(codegen::compiled_figures_key(w, t, f16) != key);
  TileConfig other = t;
  other.stages = t.stages == 1 ? 2 : 1;
  CHECK(codegen::compiled_figures_key(w, other, opts) != key);

  // Nothing stored yet: an empty table, and the cache's file name for the architecture.
  CHECK(codegen::load_compiled_figures("sm_90")->empty());
  CHECK(codegen::compiled_figures_path("sm_90") == std::filesystem::path(dir) / "figures" / "sm_90.json");
  // A register-heavy compile: the block count per SM the model prices drops with it.
  codegen::CompiledFigureTable table("sm_90");
  table.put(key, {200, t.smem_bytes, 0, "NVRTC test"});
  auto stored = codegen::store_compiled_figures(table);
  REQUIRE(stored);
  CHECK(*stored == codegen::compiled_figures_path("sm_90"));
  const auto loaded = codegen::load_compiled_figures("sm_90");
  REQUIRE(loaded->size() == 1);
  CHECK(loaded->find(key)->registers == 200);
  CHECK(loaded->find(key)->compiler == "NVRTC test");
  CHECK(codegen::load_compiled_figures("sm_80")->empty());  // another architecture's table
  const codegen::TargetCapability cap(opts, loaded);
  const TileConfig priced = cap.generated(w, choose_tile(w, h100));
  CHECK(same_schedule(priced, t));
  CHECK(priced.registers == 200);
  CHECK_THAT(cap.describe(), Contains("compiled figures of 1 kernels for sm_90"));
  const Residency est = assumed_residency(w, t, h100), got = assumed_residency(w, priced, h100);
  CHECK(got.registers == 200);
  CHECK(est.registers < 200);
  CHECK(got.ctas_per_unit < est.ctas_per_unit);
  CHECK(kernel_cost(w, priced, h100).ctas_per_unit == got.ctas_per_unit);
  // A generated target of a profile of that architecture finds them (Session::target).
  const Session s;
  const Target gt = s.target(test::gpu("nvidia-h100-sxm"), TileSpace::kGenerated);
  CHECK(gt.capability().generated(w, choose_tile(w, h100)).registers == 200);
  CHECK(s.target(test::gpu("nvidia-a100-40gb"), TileSpace::kGenerated).capability().generated(w, t).registers == 0);
  // Storing more keeps what was there (the new entry wins where both hold a key).
  codegen::CompiledFigureTable more("sm_90");
  more.put("0123456789abcdef", {40, 0, 0, "NVRTC test"});
  REQUIRE(codegen::store_compiled_figures(more));
  CHECK(codegen::load_compiled_figures("sm_90")->size() == 2);

  // A damaged table is no table: the estimates stand. Each bad field is named.
  const std::string bad_cases[][2] = {
      {"not json", "is not JSON"},
      {R"({"schema": "gpusim.compiled_figures/0", "arch": "sm_90", "kernels": {}})", "schema is \"gpusim.compiled_figures/0\""},
      {R"({"schema": "gpusim.compiled_figures/1", "arch": "sm_90", "kernels": {"k": {"registers": -1, "smem_bytes": 0, "spill_bytes": 0}}})",
       "kernels.k.registers is -1"},
      {R"({"schema": "gpusim.compiled_figures/1", "arch": "sm_90", "kernels": {"k": {"registers": 0, "smem_bytes": 0, "spill_bytes": 0}}})",
       "kernels.k.registers is 0"},
      {R"({"schema": "gpusim.compiled_figures/1", "arch": "sm_90", "kernels": {"k": {"registers": 8, "spill_bytes": 0}}})",
       "kernels.k.smem_bytes is absent"},
      {R"({"schema": "gpusim.compiled_figures/1", "arch": 90, "kernels": {}})", "arch is not a string"},
  };
  for (const auto& [text, says] : bad_cases) {
    INFO(text);
    auto r = codegen::CompiledFigureTable::from_json(text, "figures/sm_90.json");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Contains("figures/sm_90.json") && Contains(says) && Contains("gpusim codegen report"));
    std::ofstream(codegen::compiled_figures_path("sm_90"), std::ios::trunc) << text;
    CHECK(codegen::load_compiled_figures("sm_90")->empty());
  }
  // The cache off: nothing is read, and storing says why it did not.
  const test::ScopedEnv off("GPUSIM_KERNEL_CACHE_DIR", "off");
  CHECK(codegen::load_compiled_figures("sm_90")->empty());
  auto not_stored = codegen::store_compiled_figures(table);
  REQUIRE_FALSE(not_stored);
  CHECK(not_stored.error().code == ErrorCode::kUnavailable);
  CHECK_THAT(not_stored.error().message, Contains("GPUSIM_KERNEL_CACHE_DIR=off"));
  // A cache folder that cannot be written: named, with the fix.
  const test::ScopedEnv unwritable("GPUSIM_KERNEL_CACHE_DIR", "/proc/gpusim-no-such-cache");
  auto refused = codegen::store_compiled_figures(table);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Contains("/proc/gpusim-no-such-cache/figures/sm_90.json") &&
                                          Contains("set GPUSIM_KERNEL_CACHE_DIR to a writable folder"));
}

TEST_CASE("the compiled report stores its figures, and predictions then price those kernels with them",
          "[codegen][report][compile]") {
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; !backend::cuda::nvrtc_available(&why)) {
    WARN("NVRTC unavailable: " << why);
    return;
  }
  const std::string dir = test::temp_dir() + "/figures-report-cache";
  std::filesystem::remove_all(dir);
  const test::ScopedEnv cache("GPUSIM_KERNEL_CACHE_DIR", dir);
  const Session s;
  auto m = s.open_model(small_model());
  REQUIRE(m);
  const GpuProfile h100 = test::gpu("nvidia-h100-sxm");
  exec::CompileReportOptions o;
  o.store_figures = true;
  auto first = exec::compile_report(m->graph(), s.target(h100, TileSpace::kGenerated), o);
  REQUIRE(first);
  INFO(first->figures_not_stored);
  CHECK(first->figures_path == codegen::compiled_figures_path("sm_90").string());
  // The next target prices each kernel with its compiled registers...
  const Target t = s.target(h100, TileSpace::kGenerated);
  auto p = s.predict(*m, t, {});
  REQUIRE(p);
  REQUIRE(p->kernels.size() == first->kernels.size());
  for (size_t i = 0; i < p->kernels.size(); ++i) {
    INFO(first->kernels[i].name);
    CHECK(p->kernels[i].cost.tile.registers == first->kernels[i].compiled.registers);
  }
  bool noted = false;
  for (const auto& n : p->notes) noted = noted || n.find("priced with the registers their compiled binaries hold") != std::string::npos;
  CHECK(noted);
  // ...and the report's "assumed" stays the model's estimate: it keeps checking the model.
  auto second = exec::compile_report(m->graph(), t, {});
  REQUIRE(second);
  for (size_t i = 0; i < second->kernels.size(); ++i) {
    CHECK(second->kernels[i].assumed.registers == first->kernels[i].assumed.registers);
    CHECK(second->kernels[i].compiled.registers == first->kernels[i].compiled.registers);
  }
  CHECK(second->figures_path.empty());  // not asked to store
#else
  WARN("built without the CUDA backend");
#endif
}

TEST_CASE("the compiled report reads what NVRTC builds for every kernel and sets it against the cost model",
          "[codegen][report][compile]") {
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; !backend::cuda::nvrtc_available(&why)) {
    WARN("NVRTC unavailable: " << why);
    return;
  }
  const Session s;
  auto m = s.open_model(small_model());
  REQUIRE(m);
  const GpuProfile h100 = test::gpu("nvidia-h100-sxm");
  const Target t = s.target(h100, TileSpace::kGenerated);
  auto r = exec::compile_report(m->graph(), t, {});
  REQUIRE(r);
  CHECK(r->arch == "sm_90");
  CHECK_THAT(r->compiler, Contains("NVRTC"));
  REQUIRE(r->kernels.size() >= 2);
  CHECK(r->compiled == static_cast<int>(r->kernels.size()));
  int gemm_like = 0;
  for (const auto& k : r->kernels) {
    INFO(k.name);
    CHECK(k.skipped.empty());
    CHECK(k.compiled.registers > 0);
    CHECK(k.compiled.registers <= 255);
    CHECK(k.assumed.registers > 0);
    CHECK(k.compiled.threads > 0);
    CHECK(k.compiled.ctas_per_unit > 0);
    CHECK(k.binary.ld_global + k.binary.st_global > 0);
    if (k.cls == "gemm" || k.cls == "conv") {
      ++gemm_like;
      CHECK(k.compiled.smem_bytes > 0);  // the operand tiles
      CHECK(k.binary.ld_shared > 0);
    }
    const bool flagged = std::find(k.flags.begin(), k.flags.end(), "occupancy") != k.flags.end();
    CHECK(flagged == (k.compiled.ctas_per_unit != k.assumed.ctas_per_unit));
  }
  CHECK(gemm_like == 2);
  // fp16 on an H100: the convolution is priced on matrix units, and the binary has them (wmma);
  // the one-row MatMul is GEMV-shaped, on the vector units and priced there.
  auto h = exec::compile_report(retype(m->graph(), DType::kFloat16), t, {});
  INFO((h ? std::string() : h.error().message));
  REQUIRE(h);
  int gemv = 0;
  for (const auto& k : h->kernels) {
    if (k.cls != "gemm" && k.cls != "conv") continue;
    INFO(k.name);
    if (gemv_shaped(k.tile)) {
      ++gemv;
      CHECK(k.cls == "gemm");
      CHECK(k.matrix_path == "none");
      CHECK_FALSE(k.priced_on_matrix_units);
      CHECK(k.binary.wmma == 0);
      CHECK(k.flags.empty());
      // No chain for a GEMV: priced as planned.
      CHECK_FALSE(k.chain.known());
      CHECK(k.built_us == k.planned_us);
      continue;
    }
    CHECK(k.matrix_path == "wmma");
    CHECK(k.priced_on_matrix_units);
    // Named as a run names it, and priced twice: as planned, and as built (gpusim's own kernel, by
    // the chain of the kernel its generator writes: a round of loads a k-step at least).
    CHECK_FALSE(k.node.empty());
    CHECK(k.chain.known());
    CHECK(k.chain.load_rounds >= 1);
    CHECK(k.planned_us > 0);
    CHECK(k.built_us > 0);
    CHECK(k.built_us != k.planned_us);
    CHECK(k.binary.matrix_instructions() > 0);  // wmma in the PTX, HMMA in the SASS
    if (!k.binary.code_read) {
      WARN("no SASS read (" << k.binary.code_unavailable << "): tools/setup-tools-venv.sh and GPUSIM_NVDISASM");
      continue;
    }
    // The SASS of the implicit-GEMM convolution (issue 51): HMMA and LDSM in the main loop, more
    // than one operand load in flight (the earlier gather, converting each fp16 value inside its
    // bounds check, kept one; ptxas keeps two of this small convolution's four: the compile tier
    // counts the kernels that keep four), no block barrier per epilogue fragment, no volatile loads.
    const auto& c = k.binary.code;
    REQUIRE(c.has_main_loop);
    CHECK(k.binary.mma == c.all.matrix);
    CHECK(c.main_loop.matrix > 0);
    CHECK(c.main_loop.ldsm > 0);
    CHECK(c.main_loop.loads_in_flight >= 2);
    CHECK(c.epilogue.barriers == 0);
    CHECK(c.volatile_loads_in_loops == 0);
    CHECK(h->matrix_kernels >= 1);
    CHECK_THAT(h->disassembler, Contains("nvdisasm"));
  }
  CHECK(gemv == 1);
  CHECK(h->missing_matrix == 0);
  // Only the tiles codegen builds are compiled: the library menu is refused, naming the option.
  auto lib = exec::compile_report(m->graph(), s.target(h100, TileSpace::kLibrary), {});
  REQUIRE_FALSE(lib);
  CHECK(lib.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(lib.error().message, Contains("`tiles generated`"));
  // Another architecture on request; not another vendor's (the kernels are generated for wmma).
  exec::CompileReportOptions o;
  o.arch = "sm_80";
  auto a = exec::compile_report(m->graph(), t, o);
  REQUIRE(a);
  CHECK(a->arch == "sm_80");
  o.arch = "gfx90a";
  auto other = exec::compile_report(m->graph(), t, o);
  REQUIRE_FALSE(other);
  CHECK(other.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(other.error().message, Contains("gfx90a is an AMD architecture") && Contains("nvidia-h100-sxm") &&
                                        Contains("give `arch sm_XY`"));
#else
  WARN("built without the CUDA backend");
#endif
}

TEST_CASE("a matrix tile whose accumulators fill half the register file asks for one block an SM",
          "[codegen][report][compile]") {
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; !backend::cuda::nvrtc_available(&why)) {
    WARN("NVRTC unavailable: " << why);
    return;
  }
  test::OnnxBuilder b;
  b.input("a", onnx::TensorProto::FLOAT16, {test::Dim{int64_t{512}}, test::Dim{int64_t{1024}}});
  b.initializer("w", onnx::TensorProto::FLOAT16, {1024, 512});
  b.node("MatMul", {"a", "w"}, {"y"}, "mm");
  b.output("y");
  const Session s;
  auto m = s.open_model(b.write("big_tile.onnx"));
  REQUIRE(m);
  const Target t = s.target(test::gpu("nvidia-b200"), TileSpace::kGenerated);
  const GraphIndex idx = index_graph(m->graph());
  Plan p = eager_plan(m->graph(), t, idx);
  REQUIRE(p.kernels.size() == 1);
  const auto nv = backend::cuda::nvrtc_info();
  REQUIRE(nv);
  const bool sm100 = std::find(nv->archs.begin(), nv->archs.end(), "sm_100") != nv->archs.end();
  for (const auto& [bm, bn, one_block] : {std::tuple{256, 128, true}, std::tuple{128, 128, false}}) {
    INFO(bm << "x" << bn);
    TileConfig tile;
    tile.block_m = bm;
    tile.block_n = bn;
    tile.block_k = 32;
    tile.threads = 256;
    tile.stages = 1;
    p.kernels[0].tile = tile;
    exec::CompileReportOptions o;
    o.plan = p;
    o.keep_sources = true;
    o.arch = sm100 ? "sm_100" : "sm_90";
    auto r = exec::compile_report(m->graph(), t, o);
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
    const auto& k = r->kernels[0];
    REQUIRE(k.matrix_path == "wmma");
    CHECK_THAT(k.source, Contains(one_block ? "__launch_bounds__(256, 1)" : "__launch_bounds__(256)"));
    // Told nothing, ptxas for sm_100 held the 256x128 tile to 128 registers and spilled it.
    CHECK(k.binary.spill_bytes() == 0);
  }
#else
  WARN("built without the CUDA backend");
#endif
}

TEST_CASE("gpusim codegen report prints per kernel figures and JSON, and refuses what it cannot compile for",
          "[codegen][report][compile][cli]") {
  const std::string model = small_model();
  const std::string dir0 = test::temp_dir() + "/figures-cli-cache";
  std::filesystem::remove_all(dir0);
  const test::ScopedEnv cache("GPUSIM_KERNEL_CACHE_DIR", dir0);
  {
    // SPIR-V has no form of wmma or MFMA, which these GPUs' kernels are generated for.
    const test::Run r = test::run_gpusim("codegen report " + model + " --gpu nvidia-h100-sxm --arch spirv");
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("nvidia-h100-sxm") && Contains("wmma") && Contains("--arch sm_XY"));
    const test::Run amd = test::run_gpusim("codegen report " + model + " --gpu amd-mi250x --dtype fp16 --arch spirv");
    CHECK(amd.rc == 2);
    CHECK_THAT(amd.out, Contains("mfma") && Contains("--arch gfxNNN"));
    // TF32 fragments on an architecture older than Ampere: said before anything is compiled.
    const test::Run tf32 =
        test::run_gpusim("codegen report " + model + " --gpu nvidia-a100-40gb --allow-tf32 --arch sm_75");
    CHECK(tf32.rc == 2);
    CHECK_THAT(tf32.out, Contains("--allow-tf32") && Contains("--arch sm_75") && Contains("sm_80 and newer"));
    const test::Run wrong = test::run_gpusim("codegen report " + model + " --gpu apple-m3-max --arch gfx90a");
    CHECK(wrong.rc == 2);
    CHECK_THAT(wrong.out, Contains("apple-m3-max") && Contains("--arch spirv"));
  }
#ifdef GPUSIM_HAVE_VULKAN
  {
    // A GPU the Vulkan backend runs: SPIR-V by default, with no registers or spills to report.
    const test::Run r = test::run_gpusim("codegen report " + model + " --gpu apple-m3-max --json");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["arch"] == "spirv");
    CHECK_THAT(j["compiler"].get<std::string>(), Contains("libshaderc"));
    CHECK(j["figures_stored"].is_null());
    CHECK(j["summary"]["spilling"].is_null());  // not stated, not zero
    CHECK_THAT(j["figures_not_stored"].get<std::string>(), Contains("no registers"));
    CHECK(j["summary"]["compiled"].get<int>() == static_cast<int>(j["kernels"].size()));
    for (const auto& k : j["kernels"]) {
      CHECK(k["compiled"]["registers"].is_null());
      CHECK(k["spills"].is_null());
      CHECK(k["compiled"]["threads"] == k["assumed"]["threads"]);
      CHECK(k["instructions"].contains("coop_matrix"));
    }
    const test::Run t = test::run_gpusim("codegen report " + model + " --gpu apple-m3-max");
    REQUIRE(t.rc == 0);
    CHECK_THAT(t.out, Contains("compiled for spirv") && Contains("SPIR-V states a kernel's workgroup size") &&
                          Contains("spills not stated"));
    CHECK_FALSE(std::filesystem::exists(dir0 + "/figures"));
    const std::string dir = test::temp_dir() + "/codegen-glsl";
    std::filesystem::remove_all(dir);
    REQUIRE(test::run_gpusim("codegen report " + model + " --gpu apple-m3-max --sources " + dir).rc == 0);
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      ++files;
      CHECK(e.path().extension() == ".comp");
      CHECK_THAT(test::file_bytes(e.path().string()), Contains("#version 450"));
    }
    CHECK(files >= 2);
  }
#endif
  {
    const test::Run r = test::run_gpusim("codegen report " + model + " --gpu nvidia-h100-sxm --dtype bf16");
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--dtype fp16"));
  }
  {
    const test::Run r = test::run_gpusim("codegen report " + model + " --gpu nvidia-h100-sxm --arch compute_90");
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("sm_XY"));
  }
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; !backend::cuda::nvrtc_available(&why)) {
    WARN("NVRTC unavailable: " << why);
    return;
  }
  const test::Run r = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "gpusim.codegen-report/1");
  CHECK(j["arch"] == "sm_86");
  CHECK(j["summary"]["compiled"].get<int>() == static_cast<int>(j["kernels"].size()));
  for (const auto& k : j["kernels"]) {
    CHECK(k["compiled"]["registers"].get<int>() > 0);
    CHECK(k["assumed"].contains("ctas_per_sm"));
    CHECK(k["instructions"].contains("mma"));
  }
  const test::Run t = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060");
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Contains("compiled for sm_86") && Contains("blocks per SM as the cost model assumes") &&
                        Contains("compiled figures stored in " + dir0 + "/figures/sm_86.json"));
  CHECK(j["figures_stored"] == dir0 + "/figures/sm_86.json");
  std::filesystem::remove_all(dir0);
  const test::Run ns = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --no-store --json");
  REQUIRE(ns.rc == 0);
  CHECK(nlohmann::json::parse(ns.out)["figures_stored"].is_null());
  CHECK_FALSE(std::filesystem::exists(dir0 + "/figures"));
  // --sources: each kernel's text, as compiled.
  const std::string dir = test::temp_dir() + "/codegen-sources";
  const test::Run w = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --sources " + dir);
  REQUIRE(w.rc == 0);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    CHECK_THAT(test::file_bytes(e.path().string()), Contains("__global__ void __launch_bounds__"));
  }
  CHECK(files >= 2);
  const test::Run bad = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --sources /proc/nope");
  CHECK(bad.rc == 1);
  CHECK_THAT(bad.out, Contains("--sources") && Contains("/proc/nope"));
  // --db: the figures as measurement-store records, one per distinct kernel, counted by truth stats.
  const std::string db = test::temp_dir() + "/compiled-figures.db";
  std::filesystem::remove(db);
  const test::Run d = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --no-store --db " + db);
  REQUIRE(d.rc == 0);
  CHECK_THAT(d.out, Contains("compiled kernel records added to " + db));
  {
    auto store = MeasurementStore::open_read(db);
    REQUIRE(store);
    auto recs = store->compiled("sm_86");
    REQUIRE(recs);
    CHECK(recs->size() >= 2);
    for (const auto& c : *recs) {
      CHECK(c.registers > 0);
      CHECK(c.gpu == "nvidia-rtx-3060");
      CHECK(c.model == model);
      CHECK_THAT(c.compiler, Contains("NVRTC"));
    }
    const test::Run again = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --no-store --db " + db);
    REQUIRE(again.rc == 0);
    CHECK(store->compiled("sm_86")->size() == recs->size());  // a recompile replaces its records
  }
  const test::Run stats = test::run_gpusim("truth stats --db " + db);
  CHECK(stats.rc == 0);
  CHECK_THAT(stats.out, Contains("compiled figures") && Contains("sm_86"));
  const test::Run nodb = test::run_gpusim("codegen report " + model + " --gpu nvidia-rtx-3060 --no-store --db /proc/nope/x.db");
  CHECK(nodb.rc == 1);
  CHECK_THAT(nodb.out, Contains("--db") && Contains("/proc/nope/x.db"));
#endif
#ifdef GPUSIM_HAVE_HIP
  if (std::string why; !backend::hip::hiprtc_available(&why)) {
    WARN("hiprtc unavailable: " << why);
    return;
  }
  const test::Run amd = test::run_gpusim("codegen report " + model + " --gpu amd-mi250x --dtype fp16 --json");
  INFO(amd.out);
  REQUIRE(amd.rc == 0);
  const auto aj = nlohmann::json::parse(amd.out);
  CHECK(aj["arch"] == "gfx90a");
  CHECK_THAT(aj["compiler"].get<std::string>(), Contains("hiprtc"));
  // A target the installed ROCm's compiler does not know: named, exit 1 (not a bad argument).
  const auto info = backend::hip::hiprtc_info();
  REQUIRE(info);
  if (!info->archs.empty() && std::find(info->archs.begin(), info->archs.end(), "gfx942") == info->archs.end()) {
    const test::Run old = test::run_gpusim("codegen report " + model + " --gpu amd-mi300x");
    CHECK(old.rc == 1);
    CHECK_THAT(old.out, Contains("gfx942"));
  }
#endif
}
