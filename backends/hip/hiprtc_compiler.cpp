// hiprtc through dlopen: finding the library (libamdhip64 or libhiprtc) and the code-object
// manager's target list once per process, then one hiprtcProgram per compile.
#include "hiprtc_compiler.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <hip/hiprtc.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
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
