// GLSL to SPIR-V without a device, and what the SPIR-V says of a kernel: the Vulkan backend's
// compiler (libshaderc) and the reflection with which `gpusim codegen report --arch spirv` checks
// the cost model's assumptions for GPUs gpusim reaches through Vulkan (Intel, Apple through
// MoltenVK, any GPU with a Vulkan driver).
//
// SPIR-V is what the driver compiles further on the device, so it fixes a kernel's workgroup size
// and its shared memory (the Workgroup-storage variables) exactly, and its static instruction mix
// (loads and stores to storage buffers and to shared memory, atomics, barriers, cooperative-matrix
// multiply-adds), but not its registers or spills: the driver's back end chooses those when the
// pipeline is built. The figures here are read from the module's words (the SPIR-V specification's
// binary form; no reflection library is needed).
//
// Usage:
//   auto cc = gpusim::backend::vulkan::GlslCompiler::create(true);   // Vulkan 1.2 SPIR-V
//   auto words = cc->compile(src);                                   // src.language == kGlsl
//   auto r = gpusim::backend::vulkan::reflect_spirv(*words);         // r->workgroup_bytes, r->local_size
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend.h"

namespace gpusim::backend::vulkan {

// libshaderc set up for compute shaders at one Vulkan version, optimized for performance (what the
// backend runs). compile() may be called from several threads at once (shaderc's compiler is
// thread-safe).
class GlslCompiler {
 public:
  // kUnavailable when libshaderc does not initialize.
  static Result<GlslCompiler> create(bool vulkan12);
  GlslCompiler(GlslCompiler&&) noexcept;
  GlslCompiler& operator=(GlslCompiler&&) noexcept;
  ~GlslCompiler();

  // The SPIR-V words of `src` (Language::kGlsl). kInvalidArgument for CUDA C++ text; kDevice when
  // the text does not compile (the message names the kernel and carries shaderc's log).
  Result<std::vector<uint32_t>> compile(const KernelSource& src) const;
  // "vulkan1.2;spv<version>.<revision>": the environment and shaderc's SPIR-V generator, part of
  // the kernel cache's key.
  const std::string& target() const;
  // For people: "libshaderc (Vulkan 1.2, SPIR-V 1.6 rev 1)".
  std::string describe() const;

 private:
  struct Impl;
  explicit GlslCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a compute shader's SPIR-V says of it. Instruction counts are static (the instructions of
// each kind in the module, not executions; a loop's body counts once), as the PTX and disassembly
// counts of the CUDA and HIP reports are.
struct SpirvResources {
  uint32_t version = 0;                  // the module's SPIR-V version, 0x00010500 for 1.5
  std::array<int, 3> local_size{0, 0, 0};  // the workgroup's invocations in x, y, z
  int workgroup_bytes = 0;               // Workgroup-storage variables: the shared memory a workgroup holds
  int ld_global = 0, st_global = 0;      // loads and stores through storage or uniform buffers
  int ld_shared = 0, st_shared = 0;      // through Workgroup variables
  int atomics = 0, barriers = 0;         // OpAtomic*, OpControlBarrier
  int coop_matrix = 0;                   // cooperative-matrix multiply-adds (NV or KHR)
  int threads() const { return local_size[0] * local_size[1] * local_size[2]; }
};

// Reads a module's words. kInvalidArgument naming what is wrong when they are not SPIR-V (magic
// number, truncated instruction, an id out of the module's bound), when the module has no compute
// entry point, or when a Workgroup variable's size cannot be known (a runtime-sized array).
Result<SpirvResources> reflect_spirv(std::span<const uint32_t> words);

}  // namespace gpusim::backend::vulkan
