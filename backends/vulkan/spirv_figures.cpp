// GLSL to SPIR-V and SPIR-V's figures: see spirv_figures.h.
#include "spirv_figures.h"

#include <fmt/format.h>
#include <shaderc/shaderc.h>

#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace gpusim::backend::vulkan {

struct GlslCompiler::Impl {
  shaderc_compiler_t compiler = nullptr;
  shaderc_compile_options_t options = nullptr;
  std::string target;
  bool vulkan12 = true;
  unsigned spv_version = 0, spv_revision = 0;
  ~Impl() {
    if (options != nullptr) shaderc_compile_options_release(options);
    if (compiler != nullptr) shaderc_compiler_release(compiler);
  }
};

GlslCompiler::GlslCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GlslCompiler::GlslCompiler(GlslCompiler&&) noexcept = default;
GlslCompiler& GlslCompiler::operator=(GlslCompiler&&) noexcept = default;
GlslCompiler::~GlslCompiler() = default;

Result<GlslCompiler> GlslCompiler::create(bool vulkan12) {
  auto impl = std::make_unique<Impl>();
  impl->compiler = shaderc_compiler_initialize();
  impl->options = shaderc_compile_options_initialize();
  if (impl->compiler == nullptr || impl->options == nullptr) {
    return make_error(ErrorCode::kUnavailable, "libshaderc failed to initialize (GLSL cannot be compiled to SPIR-V)");
  }
  shaderc_compile_options_set_source_language(impl->options, shaderc_source_language_glsl);
  shaderc_compile_options_set_target_env(impl->options, shaderc_target_env_vulkan,
                                         vulkan12 ? shaderc_env_version_vulkan_1_2 : shaderc_env_version_vulkan_1_1);
  shaderc_compile_options_set_optimization_level(impl->options, shaderc_optimization_level_performance);
  shaderc_get_spv_version(&impl->spv_version, &impl->spv_revision);
  impl->vulkan12 = vulkan12;
  impl->target = fmt::format("{};spv{:x}.{}", vulkan12 ? "vulkan1.2" : "vulkan1.1", impl->spv_version, impl->spv_revision);
  return GlslCompiler(std::move(impl));
}

const std::string& GlslCompiler::target() const { return impl_->target; }

std::string GlslCompiler::describe() const {
  return fmt::format("libshaderc (Vulkan {}, SPIR-V {}.{} rev {})", impl_->vulkan12 ? "1.2" : "1.1",
                     (impl_->spv_version >> 16) & 0xffu, (impl_->spv_version >> 8) & 0xffu, impl_->spv_revision);
}

Result<std::vector<uint32_t>> GlslCompiler::compile(const KernelSource& src) const {
  if (src.language != Language::kGlsl) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": SPIR-V is compiled from GLSL compute shaders, this source is CUDA "
                                  "C++; generate it with Language::kGlsl",
                                  src.name));
  }
  const std::string name = src.name + ".comp";  // names the kernel in shaderc's messages
  shaderc_compilation_result_t res = shaderc_compile_into_spv(impl_->compiler, src.code.data(), src.code.size(),
                                                              shaderc_compute_shader, name.c_str(), "main",
                                                              impl_->options);
  if (res == nullptr || shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
    std::string log = res != nullptr ? shaderc_result_get_error_message(res) : "libshaderc returned no result";
    if (res != nullptr) shaderc_result_release(res);
    while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": GLSL compile failed (shaderc):\n{}", src.name, log));
  }
  const size_t bytes = shaderc_result_get_length(res);
  std::vector<uint32_t> words(bytes / 4);
  std::memcpy(words.data(), shaderc_result_get_bytes(res), words.size() * 4);
  shaderc_result_release(res);
  return words;
}

namespace {

// The opcodes, storage classes and enumerants read here (SPIR-V specification, section 3).
enum Op : uint32_t {
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeMatrix = 24,
  kOpTypeArray = 28,
  kOpTypeRuntimeArray = 29,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpFunctionParameter = 55,
  kOpVariable = 59,
  kOpLoad = 61,
  kOpStore = 62,
  kOpCopyMemory = 63,
  kOpAccessChain = 65,
  kOpInBoundsAccessChain = 66,
  kOpPtrAccessChain = 67,
  kOpInBoundsPtrAccessChain = 70,
  kOpDecorate = 71,
  kOpCopyObject = 83,
  kOpBitcast = 124,
  kOpSelect = 169,
  kOpControlBarrier = 224,
  kOpAtomicLoad = 227,
  kOpAtomicXor = 242,
  kOpPhi = 245,
  kOpAtomicFlagTestAndSet = 318,
  kOpAtomicFlagClear = 319,
  kOpExecutionModeId = 331,
  kOpCooperativeMatrixMulAddKHR = 4459,
  kOpCooperativeMatrixMulAddNV = 5361,
  kOpAtomicFMinEXT = 5614,
  kOpAtomicFMaxEXT = 5615,
  kOpAtomicFAddEXT = 6035,
};
constexpr uint32_t kMagic = 0x07230203;
constexpr uint64_t kMaxWorkgroupBytes = uint64_t{1} << 30;  // far beyond any device's shared memory
constexpr uint64_t kMaxLocalSize = 1 << 16;
constexpr uint32_t kGLCompute = 5;
constexpr uint32_t kModeLocalSize = 17, kModeLocalSizeId = 38;
constexpr uint32_t kDecorationBuiltIn = 11, kBuiltInWorkgroupSize = 25;
enum Storage : uint32_t {
  kUniform = 2,
  kWorkgroup = 4,
  kCrossWorkgroup = 5,
  kStorageBuffer = 12,
  kPhysicalStorageBuffer = 5349,
};

bool global_storage(uint32_t s) {
  return s == kUniform || s == kCrossWorkgroup || s == kStorageBuffer || s == kPhysicalStorageBuffer;
}

bool atomic_op(uint32_t op) {
  return (op >= kOpAtomicLoad && op <= kOpAtomicXor) || op == kOpAtomicFlagTestAndSet || op == kOpAtomicFlagClear ||
         op == kOpAtomicFMinEXT || op == kOpAtomicFMaxEXT || op == kOpAtomicFAddEXT;
}

struct Reader {
  std::unordered_map<uint32_t, std::vector<uint32_t>> types;  // id -> the type instruction's operands after the id
  std::unordered_map<uint32_t, uint32_t> type_op;               // id -> its opcode
  std::unordered_map<uint32_t, uint64_t> scalar;                // constants' values (the low word, then the high)
  std::unordered_map<uint32_t, std::vector<uint32_t>> composite;
  std::unordered_map<uint32_t, uint32_t> value_class;           // pointer value id -> storage class
  std::unordered_set<uint32_t> workgroup_size;                  // ids decorated BuiltIn WorkgroupSize

  // A type's bytes with natural sizes (Workgroup variables have no explicit layout); nullopt when
  // not knowable (a runtime array, an opaque type) or when a damaged module's types nest deeper
  // or wider than any shader's (`budget` bounds the types visited).
  std::optional<uint64_t> size_of(uint32_t id) const {
    int budget = 1 << 16;
    return size_of(id, 0, budget);
  }
  std::optional<uint64_t> size_of(uint32_t id, int depth, int& budget) const {
    const auto op = type_op.find(id);
    if (op == type_op.end() || depth > 64 || --budget < 0) return std::nullopt;
    const std::vector<uint32_t>& t = types.at(id);
    switch (op->second) {
      case kOpTypeBool:
        return 4;
      case kOpTypeInt:
      case kOpTypeFloat:
        return t.empty() ? std::nullopt : std::optional<uint64_t>(t[0] / 8);
      case kOpTypeVector:
      case kOpTypeMatrix: {
        if (t.size() < 2) return std::nullopt;
        auto e = size_of(t[0], depth + 1, budget);
        return e ? std::optional<uint64_t>(*e * t[1]) : std::nullopt;
      }
      case kOpTypeArray: {
        if (t.size() < 2) return std::nullopt;
        auto e = size_of(t[0], depth + 1, budget);
        const auto n = scalar.find(t[1]);
        if (!e || n == scalar.end()) return std::nullopt;
        return *e * n->second;
      }
      case kOpTypeStruct: {
        uint64_t sum = 0;
        for (uint32_t m : t) {
          auto e = size_of(m, depth + 1, budget);
          if (!e) return std::nullopt;
          sum += *e;
        }
        return sum;
      }
      default:
        return std::nullopt;
    }
  }

  int storage_of(uint32_t pointer_id) const {
    const auto it = value_class.find(pointer_id);
    return it == value_class.end() ? -1 : static_cast<int>(it->second);
  }
};

// Where an instruction read here keeps its result id among its operands (-1: none kept).
int result_index(uint32_t op) {
  switch (op) {
    case kOpTypeBool: case kOpTypeInt: case kOpTypeFloat: case kOpTypeVector: case kOpTypeMatrix: case kOpTypeArray:
    case kOpTypeRuntimeArray: case kOpTypeStruct: case kOpTypePointer:
      return 0;
    case kOpConstant: case kOpSpecConstant: case kOpConstantComposite: case kOpSpecConstantComposite: case kOpVariable:
    case kOpLoad: case kOpAccessChain: case kOpInBoundsAccessChain: case kOpPtrAccessChain:
    case kOpInBoundsPtrAccessChain: case kOpCopyObject: case kOpBitcast: case kOpSelect: case kOpPhi:
    case kOpFunctionParameter:
      return 1;
    default:
      return -1;
  }
}

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("not a SPIR-V compute module: {}", what));
}

}  // namespace

Result<SpirvResources> reflect_spirv(std::span<const uint32_t> words) {
  if (words.size() < 5) return bad(fmt::format("{} words, fewer than the header's 5", words.size()));
  if (words[0] != kMagic) return bad(fmt::format("magic number 0x{:08x}, SPIR-V's is 0x{:08x}", words[0], kMagic));
  SpirvResources r;
  r.version = words[1];
  const uint32_t bound = words[3];
  Reader rd;
  std::optional<uint32_t> entry;
  struct LocalSize {
    uint32_t entry;
    std::array<uint32_t, 3> values;  // literals (LocalSize) or constants' ids (LocalSizeId)
    bool ids;
  };
  std::vector<LocalSize> modes;
  uint64_t workgroup = 0;
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffffu;
    if (count == 0 || at + count > words.size()) {
      return bad(fmt::format("the instruction at word {} (opcode {}) claims {} words, {} remain", at, op, count,
                             words.size() - at));
    }
    const std::span<const uint32_t> w = words.subspan(at + 1, count - 1);  // the operands
    at += count;
    if (const int rid = result_index(op); rid >= 0 && w.size() > static_cast<size_t>(rid) && w[rid] >= bound) {
      return bad(fmt::format("result id {} of opcode {} is beyond the module's id bound {}", w[rid], op, bound));
    }
    switch (op) {
      case kOpEntryPoint:
        if (w.size() >= 2 && w[0] == kGLCompute && !entry) entry = w[1];
        break;
      case kOpExecutionMode:
      case kOpExecutionModeId:
        if (w.size() >= 5 && w[1] == (op == kOpExecutionMode ? kModeLocalSize : kModeLocalSizeId)) {
          modes.push_back({w[0], {w[2], w[3], w[4]}, op == kOpExecutionModeId});
        }
        break;
      case kOpDecorate:
        if (w.size() >= 3 && w[1] == kDecorationBuiltIn && w[2] == kBuiltInWorkgroupSize) rd.workgroup_size.insert(w[0]);
        break;
      case kOpTypeBool:
      case kOpTypeInt:
      case kOpTypeFloat:
      case kOpTypeVector:
      case kOpTypeMatrix:
      case kOpTypeArray:
      case kOpTypeRuntimeArray:
      case kOpTypeStruct:
        if (!w.empty()) {
          rd.type_op[w[0]] = op;
          rd.types[w[0]] = std::vector<uint32_t>(w.begin() + 1, w.end());
        }
        break;
      case kOpTypePointer:
        if (w.size() >= 3) {
          rd.type_op[w[0]] = op;
          rd.types[w[0]] = {w[1], w[2]};
        }
        break;
      case kOpConstant:
      case kOpSpecConstant:  // its default value: what the pipeline gets unless specialized
        if (w.size() >= 3) rd.scalar[w[1]] = w[2] | (w.size() >= 4 ? static_cast<uint64_t>(w[3]) << 32 : 0);
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        if (w.size() >= 2) rd.composite[w[1]] = std::vector<uint32_t>(w.begin() + 2, w.end());
        break;
      case kOpVariable: {
        if (w.size() < 3) break;
        rd.value_class[w[1]] = w[2];
        const auto pt = rd.types.find(w[0]);
        if (pt == rd.types.end() || pt->second.size() < 2) break;
        const uint32_t pointee = pt->second[1];
        if (w[2] == kWorkgroup) {
          auto size = rd.size_of(pointee);
          if (!size) {
            return bad(fmt::format("Workgroup variable %{} has a type (%{}) whose size is not fixed in the module",
                                   w[1], pointee));
          }
          workgroup += *size;
          if (*size > kMaxWorkgroupBytes || workgroup > kMaxWorkgroupBytes) {
            return bad(fmt::format("its Workgroup variables hold more than {} bytes (%{} brings them to {})",
                                   kMaxWorkgroupBytes, w[1], workgroup));
          }
        }
        break;
      }
      case kOpAccessChain:
      case kOpInBoundsAccessChain:
      case kOpPtrAccessChain:
      case kOpInBoundsPtrAccessChain:
      case kOpCopyObject:
      case kOpBitcast:
      case kOpSelect:
      case kOpPhi:
      case kOpFunctionParameter:
        if (w.size() >= 2) {
          // A pointer-typed result: its type's storage class (OpTypePointer keeps {class, pointee}).
          const auto pt = rd.type_op.find(w[0]);
          if (pt != rd.type_op.end() && pt->second == kOpTypePointer) rd.value_class[w[1]] = rd.types.at(w[0])[0];
        }
        break;
      case kOpLoad:
        if (w.size() >= 3) {
          const int s = rd.storage_of(w[2]);
          if (s == kWorkgroup) ++r.ld_shared;
          if (s >= 0 && global_storage(static_cast<uint32_t>(s))) ++r.ld_global;
        }
        break;
      case kOpStore:
      case kOpCopyMemory:
        if (w.size() >= 2) {
          const int s = rd.storage_of(w[0]);
          if (s == kWorkgroup) ++r.st_shared;
          if (s >= 0 && global_storage(static_cast<uint32_t>(s))) ++r.st_global;
          if (op == kOpCopyMemory) {
            const int from = rd.storage_of(w[1]);
            if (from == kWorkgroup) ++r.ld_shared;
            if (from >= 0 && global_storage(static_cast<uint32_t>(from))) ++r.ld_global;
          }
        }
        break;
      case kOpControlBarrier:
        ++r.barriers;
        break;
      case kOpCooperativeMatrixMulAddKHR:
      case kOpCooperativeMatrixMulAddNV:
        ++r.coop_matrix;
        break;
      default:
        if (atomic_op(op)) ++r.atomics;
        break;
    }
  }
  if (!entry) return bad("it has no GLCompute entry point");
  std::array<uint64_t, 3> size{0, 0, 0};
  for (const LocalSize& m : modes) {
    if (m.entry != *entry) continue;
    for (size_t d = 0; d < 3; ++d) {
      const uint32_t v = m.values[d];
      if (!m.ids) {
        size[d] = v;
      } else if (auto c = rd.scalar.find(v); c != rd.scalar.end()) {
        size[d] = c->second;
      }
    }
  }
  // A WorkgroupSize built-in, where the module declares one, is the size (it overrides LocalSize).
  for (uint32_t id : rd.workgroup_size) {
    const auto c = rd.composite.find(id);
    if (c == rd.composite.end() || c->second.size() != 3) continue;
    for (size_t d = 0; d < 3; ++d) {
      if (auto v = rd.scalar.find(c->second[d]); v != rd.scalar.end()) size[d] = v->second;
    }
  }
  for (size_t d = 0; d < 3; ++d) {
    if (size[d] == 0 || size[d] > kMaxLocalSize) {
      return bad(fmt::format("its compute entry point's workgroup size is {}x{}x{}: each must be 1 to {} (LocalSize "
                             "missing or damaged)",
                             size[0], size[1], size[2], kMaxLocalSize));
    }
    r.local_size[d] = static_cast<int>(size[d]);
  }
  if (static_cast<uint64_t>(r.local_size[0]) * r.local_size[1] * r.local_size[2] > kMaxLocalSize) {
    return bad(fmt::format("its workgroup of {}x{}x{} invocations is more than {}", size[0], size[1], size[2],
                           kMaxLocalSize));
  }
  r.workgroup_bytes = static_cast<int>(workgroup);
  return r;
}

}  // namespace gpusim::backend::vulkan
