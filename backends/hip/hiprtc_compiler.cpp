// hiprtc through dlopen: finding the library (libamdhip64 or libhiprtc) and the code-object
// manager's target list once per process, then one hiprtcProgram per compile.
#include "hiprtc_compiler.h"

#include "amdgcn.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <hip/hiprtc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

#include "gpu_common.h"

namespace gpusim::backend::hip {

namespace {

// Whether to pre-define hip_fp16.h's include guard (see the header): unknown until a compile
// tells, then fixed for the process.
enum class Fp16Guard : int { kUnknown = 0, kDefine = 1, kOmit = 2 };

struct Hiprtc {
  HiprtcInfo info;
  std::string compiler;  // version string for cache keys: runtime and comgr versions
  decltype(&hiprtcGetErrorString) get_error_string = nullptr;
  decltype(&hiprtcCreateProgram) create_program = nullptr;
  decltype(&hiprtcDestroyProgram) destroy_program = nullptr;
  decltype(&hiprtcCompileProgram) compile_program = nullptr;
  decltype(&hiprtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&hiprtcGetProgramLog) get_program_log = nullptr;
  decltype(&hiprtcGetCodeSize) get_code_size = nullptr;
  decltype(&hiprtcGetCode) get_code = nullptr;
  // ROCm 5.2's hiprtc is not documented as thread-safe; compiles are serialized.
  std::unique_ptr<std::mutex> compile_mutex = std::make_unique<std::mutex>();
  std::unique_ptr<std::atomic<int>> fp16_guard = std::make_unique<std::atomic<int>>(0);
};

// The code-object manager's ISAs ("amdgcn-amd-amdhsa--gfx90a" -> "gfx90a") and its version.
std::vector<std::string> comgr_isas(std::string* version) {
  std::string tried;
  void* h = gpu::open_first({"libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"}, tried);
  if (h == nullptr) return {};
  using Count = int (*)(size_t*);
  using Name = int (*)(size_t, const char**);
  using Version = void (*)(size_t*, size_t*);
  auto count = reinterpret_cast<Count>(dlsym(h, "amd_comgr_get_isa_count"));
  auto name = reinterpret_cast<Name>(dlsym(h, "amd_comgr_get_isa_name"));
  auto ver = reinterpret_cast<Version>(dlsym(h, "amd_comgr_get_version"));
  if (ver != nullptr) {
    size_t major = 0;
    size_t minor = 0;
    ver(&major, &minor);
    *version = fmt::format("{}.{}", major, minor);
  }
  std::vector<std::string> out;
  size_t n = 0;
  if (count == nullptr || name == nullptr || count(&n) != 0) return out;
  for (size_t i = 0; i < n; ++i) {
    const char* s = nullptr;
    if (name(i, &s) != 0 || s == nullptr) continue;
    std::string isa = s;
    const auto at = isa.rfind("--");
    if (at != std::string::npos) isa = isa.substr(at + 2);
    const auto colon = isa.find(':');
    if (colon != std::string::npos) isa = isa.substr(0, colon);
    if (std::find(out.begin(), out.end(), isa) == out.end()) out.push_back(isa);
  }
  return out;
}

Result<Hiprtc> load_hiprtc() {
  std::vector<std::string> names;
  if (const char* p = std::getenv("GPUSIM_HIPRTC_LIBRARY"); p != nullptr && *p != '\0') names.emplace_back(p);
  for (const char* n : {"libamdhip64.so.5", "libamdhip64.so", "libhiprtc.so.6", "libhiprtc.so",
                        "/opt/rocm/lib/libamdhip64.so", "/opt/rocm/lib/libhiprtc.so"}) {
    names.emplace_back(n);
  }
  std::string tried;
  void* handle = nullptr;
  for (const auto& n : names) {
    void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      tried += (tried.empty() ? "" : ", ") + n;
      continue;
    }
    if (dlsym(h, "hiprtcCreateProgram") != nullptr) {
      handle = h;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n + " (no hiprtc in it)";
    dlclose(h);
  }
  if (handle == nullptr) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("hiprtc (the HIP runtime compiler, in libamdhip64 on ROCm 5 and libhiprtc on ROCm 6) "
                                  "was not found (tried {}); install ROCm's HIP runtime (Debian: libamdhip64-dev; "
                                  "ROCm: hip-runtime-amd) or set GPUSIM_HIPRTC_LIBRARY",
                                  tried));
  }
  Hiprtc h;
  std::string missing;
  auto get = [&](const char* name, auto& fn) { gpu::load_symbol(handle, name, fn, missing); };
  get("hiprtcGetErrorString", h.get_error_string);
  get("hiprtcCreateProgram", h.create_program);
  get("hiprtcDestroyProgram", h.destroy_program);
  get("hiprtcCompileProgram", h.compile_program);
  get("hiprtcGetProgramLogSize", h.get_program_log_size);
  get("hiprtcGetProgramLog", h.get_program_log);
  get("hiprtcGetCodeSize", h.get_code_size);
  get("hiprtcGetCode", h.get_code);
  Dl_info where{};
  h.info.library =
      (h.create_program != nullptr && dladdr(reinterpret_cast<void*>(h.create_program), &where) != 0 && where.dli_fname)
          ? where.dli_fname
          : "libamdhip64";
  if (!missing.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("{} lacks {}; install a current ROCm HIP runtime", h.info.library, missing));
  }
  // The runtime's version (hipRuntimeGetVersion needs no device): from this library, or from
  // libamdhip64 where hiprtc is a library of its own.
  using RuntimeVersion = int (*)(int*);
  auto runtime_version = reinterpret_cast<RuntimeVersion>(dlsym(handle, "hipRuntimeGetVersion"));
  if (runtime_version == nullptr) {
    std::string ignored;
    if (void* amdhip = gpu::open_first({"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}, ignored)) {
      runtime_version = reinterpret_cast<RuntimeVersion>(dlsym(amdhip, "hipRuntimeGetVersion"));
    }
  }
  int v = 0;
  if (runtime_version != nullptr && runtime_version(&v) == 0 && v > 0) {
    h.info.version = fmt::format("{}.{}.{}", v / 10000000, (v / 100000) % 100, v % 100000);
  } else {
    int major = 0;
    int minor = 0;
    decltype(&hiprtcVersion) rtc_version = nullptr;
    get("hiprtcVersion", rtc_version);
    if (rtc_version != nullptr) rtc_version(&major, &minor);
    h.info.version = fmt::format("hiprtc {}.{}", major, minor);
  }
  std::string comgr_version;
  h.info.archs = comgr_isas(&comgr_version);
  h.compiler = fmt::format("hip-{};comgr-{}", h.info.version, comgr_version);
  return h;
}

const Result<Hiprtc>& hiprtc() {
  static const Result<Hiprtc> lib = load_hiprtc();
  return lib;
}

using ProgramDeleter = gpu::ProgramDeleter<_hiprtcProgram, hiprtcResult>;

// comgr compiles a copy of the source named /tmp/comgr-XXXXXX/input/CompileSource; the log names
// the kernel's own file instead, as NVRTC's does.
std::string rename_source(std::string log, const std::string& file) {
  const std::string marker = "/input/CompileSource";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at)) {
    size_t begin = at;
    while (begin > 0 && log[begin - 1] != ' ' && log[begin - 1] != '\n') --begin;
    log.replace(begin, at + marker.size() - begin, file);
    at = begin + file.size();
  }
  return log;
}

struct Attempt {
  hiprtcResult result = HIPRTC_SUCCESS;
  std::string log;
  std::string code;
};

Attempt compile_once(const Hiprtc& h, const KernelSource& src, const std::vector<std::string>& options) {
  Attempt a;
  hiprtcProgram raw = nullptr;
  const std::string file = src.name + ".cu";
  a.result = h.create_program(&raw, src.code.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (a.result != HIPRTC_SUCCESS) return a;
  std::unique_ptr<_hiprtcProgram, ProgramDeleter> prog(raw, ProgramDeleter{h.destroy_program});
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  {
    std::lock_guard<std::mutex> lock(*h.compile_mutex);
    a.result = h.compile_program(prog.get(), static_cast<int>(argv.size()), argv.data());
  }
  a.log = rename_source(gpu::program_log(prog.get(), h.get_program_log_size, h.get_program_log, HIPRTC_SUCCESS), file);
  if (a.result != HIPRTC_SUCCESS) return a;
  size_t size = 0;
  a.result = h.get_code_size(prog.get(), &size);
  if (a.result == HIPRTC_SUCCESS && size > 0) {
    a.code.resize(size);
    a.result = h.get_code(prog.get(), a.code.data());
  }
  return a;
}

}  // namespace

Result<HiprtcInfo> hiprtc_info() { return gpu::info_of<HiprtcInfo>(hiprtc()); }

bool hiprtc_available(std::string* why) { return gpu::loaded(hiprtc(), why); }

Result<std::string> compile_hip(const KernelSource& src, const std::string& arch, std::string* log) {
  if (auto s = gpu::accept_cuda_cpp(src, log, "hiprtc compiles CUDA C++ (HIP)"); !s) return s.error();
  const auto& lib = hiprtc();
  if (!lib) return lib.error();
  const Hiprtc& h = *lib;

  // "gfx90a", "gfx1100", "gfx90a:sramecc+:xnack-"
  const std::string base = arch.substr(0, arch.find(':'));
  const bool well_formed = base.size() > 3 && base.rfind("gfx", 0) == 0 &&
                           std::all_of(base.begin() + 3, base.end(), [](char c) {
                             return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
                           });
  if (!well_formed) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": \"{}\" is not an AMD GPU target; write gfxNNN as rocminfo or "
                                  "hipDeviceProp_t::gcnArchName name it (gfx90a, gfx1100)",
                                  src.name, arch));
  }
  if (!h.info.archs.empty() && std::find(h.info.archs.begin(), h.info.archs.end(), base) == h.info.archs.end()) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("kernel \"{}\": the HIP compiler of ROCm {} ({}) does not know {}; it targets {} .. "
                                  "{}. Install a newer ROCm whose compiler supports {}",
                                  src.name, h.info.version, h.info.library, base, h.info.archs.front(),
                                  h.info.archs.back(), base));
  }

  std::vector<std::string> options = {"--offload-arch=" + arch, "-std=c++17"};
  const bool uses_fp16 = src.code.find("hip/hip_fp16.h") != std::string::npos;
  const std::string guard = "-DHIP_INCLUDE_HIP_HIP_FP16_H";
  auto& mode = *h.fp16_guard;
  const bool define_guard = uses_fp16 && mode.load() != static_cast<int>(Fp16Guard::kOmit);
  if (define_guard) options.push_back(guard);
  Attempt a = compile_once(h, src, options);
  if (a.result != HIPRTC_SUCCESS && uses_fp16 && mode.load() == static_cast<int>(Fp16Guard::kUnknown)) {
    // Decide once whether this hiprtc's built-in header already holds hip_fp16.h.
    const bool needs_header = a.log.find("unknown type name '__half'") != std::string::npos ||
                              a.log.find("use of undeclared identifier '__half") != std::string::npos;
    if (needs_header) {
      options.pop_back();
      Attempt b = compile_once(h, src, options);
      if (b.result == HIPRTC_SUCCESS) mode.store(static_cast<int>(Fp16Guard::kOmit));
      a = std::move(b);
    }
  } else if (a.result == HIPRTC_SUCCESS && define_guard) {
    mode.store(static_cast<int>(Fp16Guard::kDefine));
  }
  if (log != nullptr) *log = a.log;
  if (a.result != HIPRTC_SUCCESS) {
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": hiprtc (ROCm {}) failed to compile it for {} ({}):\n{}",
                                                      src.name, h.info.version, arch,
                                                      h.get_error_string(a.result), a.log));
  }
  if (a.code.empty()) {
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": hiprtc (ROCm {}) compiled it for {} but returned "
                                                      "no code object",
                                                      src.name, h.info.version, arch));
  }
  return a.code;
}

}  // namespace gpusim::backend::hip

// ---- What the compiler built: the code object's metadata note and its disassembly ----

namespace gpusim::backend::hip {
namespace {

template <typename T>
bool read_le(std::string_view b, size_t at, T& v) {
  if (at > b.size() || b.size() - at < sizeof(T)) return false;
  v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return true;
}

// The msgpack document of the NT_AMDGPU_METADATA note (type 32, owner "AMDGPU"), or empty.
std::string_view metadata_note(std::string_view elf) {
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  if (!read_le(elf, 0x28, shoff) || !read_le(elf, 0x3A, shentsize) || !read_le(elf, 0x3C, shnum)) return {};
  if (shentsize < 0x28) return {};
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t sh = static_cast<size_t>(shoff) + static_cast<size_t>(i) * shentsize;
    uint32_t type = 0;
    uint64_t off = 0, size = 0;
    if (!read_le(elf, sh + 4, type) || !read_le(elf, sh + 0x18, off) || !read_le(elf, sh + 0x20, size)) return {};
    if (type != 7 /* SHT_NOTE */ || off > elf.size() || size > elf.size() - off) continue;
    const std::string_view notes = elf.substr(static_cast<size_t>(off), static_cast<size_t>(size));
    size_t at = 0;
    while (at + 12 <= notes.size()) {
      uint32_t namesz = 0, descsz = 0, ntype = 0;
      read_le(notes, at, namesz);
      read_le(notes, at + 4, descsz);
      read_le(notes, at + 8, ntype);
      const size_t name_at = at + 12;
      const size_t desc_at = name_at + ((static_cast<size_t>(namesz) + 3) / 4) * 4;
      if (desc_at > notes.size() || descsz > notes.size() - desc_at) break;
      const std::string_view name = notes.substr(name_at, std::min<size_t>(namesz, notes.size() - name_at));
      if (ntype == 32 && name.rfind("AMDGPU", 0) == 0) return notes.substr(desc_at, descsz);
      at = desc_at + ((static_cast<size_t>(descsz) + 3) / 4) * 4;
    }
  }
  return {};
}

int int_field(const nlohmann::json& k, const char* key) {
  const auto it = k.find(key);
  return it != k.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// llvm-objdump: $GPUSIM_LLVM_OBJDUMP, ROCm's own, or one on PATH; empty when none is installed.
const std::string& disassembler() {
  static const std::string found = [] {
    if (const char* env = std::getenv("GPUSIM_LLVM_OBJDUMP"); env != nullptr && *env != '\0') return std::string(env);
    return gpu::find_tool({"llvm-objdump", "llvm-objdump-18", "llvm-objdump-17", "llvm-objdump-16", "llvm-objdump-15",
                           "llvm-objdump-14"},
                          {"/opt/rocm/llvm/bin"});
  }();
  return found;
}

// The disassembly of `code` for `arch` by `tool`, or empty when it cannot be had.
std::string disassemble(const std::string& tool, const std::string& code, const std::string& arch) {
  // The architecture is checked (gfx + hex digits, features after ':').
  const std::vector<std::string> options = {"-d", "--mcpu=" + arch.substr(0, arch.find(':'))};
  int status = 0;
  return gpu::run_tool(tool, options, code, false, &status);
}

}  // namespace

Result<HipResources> read_code_object(std::string_view elf, const std::string& kernel) {
  if (elf.size() < 0x40 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 /* 64-bit */ || elf[5] != 1 /* LE */) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": the code object is not a 64-bit little-endian ELF ({} bytes); "
                                  "hiprtc returns one for an AMD target",
                                  kernel, elf.size()));
  }
  const std::string_view note = metadata_note(elf);
  if (note.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": the code object has no AMDGPU metadata note (NT_AMDGPU_METADATA); "
                                  "it holds the registers and memory the kernel uses (code object v3 or later)",
                                  kernel));
  }
  const nlohmann::json md = nlohmann::json::from_msgpack(note.begin(), note.end(), true, false);
  if (md.is_discarded() || !md.is_object() || !md.contains("amdhsa.kernels") || !md["amdhsa.kernels"].is_array()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": the code object's metadata note is not a msgpack map with "
                                  "amdhsa.kernels",
                                  kernel));
  }
  for (const nlohmann::json& k : md["amdhsa.kernels"]) {
    if (!k.is_object() || !k.contains(".name") || !k[".name"].is_string() || k[".name"].get<std::string>() != kernel) {
      continue;
    }
    HipResources r;
    r.vgprs = int_field(k, ".vgpr_count");
    r.agprs = int_field(k, ".agpr_count");
    r.sgprs = int_field(k, ".sgpr_count");
    r.vgpr_spills = int_field(k, ".vgpr_spill_count");
    r.sgpr_spills = int_field(k, ".sgpr_spill_count");
    r.scratch_bytes = int_field(k, ".private_segment_fixed_size");
    r.lds_bytes = int_field(k, ".group_segment_fixed_size");
    r.wavefront = int_field(k, ".wavefront_size");
    if (md.contains("amdhsa.target") && md["amdhsa.target"].is_string()) {
      const std::string t = md["amdhsa.target"].get<std::string>();
      r.arch = t.substr(t.rfind('-') == std::string::npos ? 0 : t.rfind('-') + 1);
    }
    return r;
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("kernel \"{}\": the code object's metadata lists no kernel of that name", kernel));
}

void count_amdgcn(const std::string& disassembly, HipResources& r) {
  size_t at = 0;
  while (at < disassembly.size()) {
    size_t end = disassembly.find('\n', at);
    if (end == std::string::npos) end = disassembly.size();
    std::string_view line(disassembly.data() + at, end - at);
    at = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    line = line.substr(first);
    const std::string_view op = line.substr(0, line.find_first_of(" \t"));
    auto starts = [&](std::string_view p) { return op.rfind(p, 0) == 0; };
    if (starts("v_mfma")) {
      ++r.mfma;
    } else if (starts("v_wmma")) {
      ++r.wmma;
    } else if (starts("global_atomic") || starts("buffer_atomic") || starts("flat_atomic")) {
      ++r.atomics;
    } else if (starts("global_load") || starts("buffer_load") || starts("flat_load")) {
      ++r.ld_global;
    } else if (starts("global_store") || starts("buffer_store") || starts("flat_store")) {
      ++r.st_global;
    } else if (starts("ds_read") || starts("ds_load")) {
      ++r.ld_shared;
    } else if (starts("ds_write") || starts("ds_store")) {
      ++r.st_shared;
    }
  }
}

Result<HipResources> hip_resources(const KernelSource& src, const std::string& arch) {
  auto code = compile_hip(src, arch);
  if (!code) return code.error();
  auto r = read_code_object(*code, src.name);
  if (!r) return r.error();
  if (r->arch.empty()) r->arch = arch;
  if (const std::string& tool = disassembler(); !tool.empty()) {
    const std::string text = disassemble(tool, *code, arch);
    if (!text.empty()) {
      r->disassembler = tool;
      count_amdgcn(text, *r);
      if (auto listing = parse_amdgcn(text, fmt::format("kernel \"{}\"'s disassembly", src.name))) {
        r->code = *listing;
        r->code_read = true;
      }
    }
  }
  return r;
}

}  // namespace gpusim::backend::hip
