// NVRTC through dlopen: finding the library and the toolkit headers once per process, then one
// nvrtcProgram per compile (NVRTC is thread-safe across programs).
#include "nvrtc_compiler.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string_view>

#include "gpu_common.h"

namespace gpusim::backend::cuda {

namespace {

namespace fs = std::filesystem;

// The NVRTC entry points gpusim uses; all exist in every NVRTC since CUDA 11.2.
struct Nvrtc {
  NvrtcInfo info;
  std::vector<int> arch_numbers;
  decltype(&nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&nvrtcCreateProgram) create_program = nullptr;
  decltype(&nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&nvrtcCompileProgram) compile_program = nullptr;
  decltype(&nvrtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&nvrtcGetProgramLog) get_program_log = nullptr;
  decltype(&nvrtcGetCUBINSize) get_cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) get_cubin = nullptr;
  decltype(&nvrtcGetPTXSize) get_ptx_size = nullptr;
  decltype(&nvrtcGetPTX) get_ptx = nullptr;
};

std::vector<std::string> library_candidates() {
  // CUDA 11.2 .. 11.8 all ship the soname libnvrtc.so.11.2 (Debian 12's nvidia-cuda-toolkit too).
  const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
  std::vector<std::string> out;
  if (const char* p = std::getenv("GPUSIM_NVRTC_LIBRARY"); p != nullptr && *p != '\0') out.emplace_back(p);
  for (const char* n : names) out.emplace_back(n);
  std::vector<std::string> roots;
  if (const char* h = std::getenv("CUDA_HOME"); h != nullptr && *h != '\0') roots.emplace_back(h);
  if (const char* h = std::getenv("CUDA_PATH"); h != nullptr && *h != '\0') roots.emplace_back(h);
  roots.emplace_back("/usr/local/cuda");
  for (const auto& r : roots) {
    for (const char* n : names) out.push_back((fs::path(r) / "lib64" / n).string());
  }
  return out;
}

bool has_fp16_header(const fs::path& dir) {
  std::error_code ec;
  return !dir.empty() && fs::exists(dir / "cuda_fp16.h", ec);
}

// The toolkit include folder that matches the library best: the one beside it first.
std::string find_include_dir(const std::string& library) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  fs::path lib = fs::weakly_canonical(library, ec);
  if (ec) lib = library;
  // <root>/lib64/libnvrtc.so, <root>/lib/libnvrtc.so, <root>/targets/x86_64-linux/lib/libnvrtc.so
  for (fs::path p = lib.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    dirs.push_back(p / "include");
    if (dirs.size() >= 3) break;
  }
  if (const char* h = std::getenv("CUDA_HOME"); h != nullptr && *h != '\0') dirs.push_back(fs::path(h) / "include");
  if (const char* h = std::getenv("CUDA_PATH"); h != nullptr && *h != '\0') dirs.push_back(fs::path(h) / "include");
#ifdef GPUSIM_CUDA_INCLUDE_DIR
  dirs.emplace_back(GPUSIM_CUDA_INCLUDE_DIR);
#endif
  dirs.emplace_back("/usr/local/cuda/include");
  for (const auto& d : dirs) {
    if (has_fp16_header(d)) return d.string();
  }
  return {};
}

Result<Nvrtc> load_nvrtc() {
  std::string tried;
  void* handle = gpu::open_first(library_candidates(), tried);
  if (handle == nullptr) {
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("NVRTC (libnvrtc, the CUDA runtime compiler) was not found (tried {}); install the "
                                  "CUDA toolkit (https://developer.nvidia.com/cuda-downloads, or the distribution's "
                                  "cuda-nvrtc package), or set CUDA_HOME or GPUSIM_NVRTC_LIBRARY to point at it",
                                  tried));
  }
  Nvrtc n;
  std::string missing;
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) archs = nullptr;
  gpu::load_symbol(handle, "nvrtcVersion", version, missing);
  gpu::load_symbol(handle, "nvrtcGetNumSupportedArchs", num_archs, missing);
  gpu::load_symbol(handle, "nvrtcGetSupportedArchs", archs, missing);
  gpu::load_symbol(handle, "nvrtcGetErrorString", n.get_error_string, missing);
  gpu::load_symbol(handle, "nvrtcCreateProgram", n.create_program, missing);
  gpu::load_symbol(handle, "nvrtcDestroyProgram", n.destroy_program, missing);
  gpu::load_symbol(handle, "nvrtcCompileProgram", n.compile_program, missing);
  gpu::load_symbol(handle, "nvrtcGetProgramLogSize", n.get_program_log_size, missing);
  gpu::load_symbol(handle, "nvrtcGetProgramLog", n.get_program_log, missing);
  gpu::load_symbol(handle, "nvrtcGetCUBINSize", n.get_cubin_size, missing);
  gpu::load_symbol(handle, "nvrtcGetCUBIN", n.get_cubin, missing);
  gpu::load_symbol(handle, "nvrtcGetPTXSize", n.get_ptx_size, missing);
  gpu::load_symbol(handle, "nvrtcGetPTX", n.get_ptx, missing);
  Dl_info where{};
  n.info.library = (version != nullptr && dladdr(reinterpret_cast<void*>(version), &where) != 0 && where.dli_fname)
                       ? where.dli_fname
                       : "libnvrtc";
  if (!missing.empty()) {
    // The handle stays open: unloading NVRTC is not worth the risk of a library that keeps threads.
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("{} lacks {}: it is older than CUDA 11.2; install a newer CUDA toolkit's NVRTC",
                                  n.info.library, missing));
  }
  int major = 0;
  int minor = 0;
  version(&major, &minor);
  n.info.version = fmt::format("{}.{}", major, minor);
  int count = 0;
  if (num_archs(&count) == NVRTC_SUCCESS && count > 0) {
    n.arch_numbers.resize(static_cast<size_t>(count));
    if (archs(n.arch_numbers.data()) != NVRTC_SUCCESS) n.arch_numbers.clear();
  }
  std::sort(n.arch_numbers.begin(), n.arch_numbers.end());
  for (int a : n.arch_numbers) n.info.archs.push_back(fmt::format("sm_{}", a));
  n.info.include_dir = find_include_dir(n.info.library);
  return n;
}

// Loaded once per process; the result (library or reason) never changes afterwards.
const Result<Nvrtc>& nvrtc() {
  static const Result<Nvrtc> lib = load_nvrtc();
  return lib;
}

using ProgramDeleter = gpu::ProgramDeleter<_nvrtcProgram, nvrtcResult>;

}  // namespace

Result<NvrtcInfo> nvrtc_info() { return gpu::info_of<NvrtcInfo>(nvrtc()); }

bool nvrtc_available(std::string* why) { return gpu::loaded(nvrtc(), why); }

namespace {
// compile_cuda with `extra` options after the architecture and the language standard.
Result<std::string> compile_with(const KernelSource& src, const std::string& arch, const std::vector<std::string>& extra,
                                 std::string* log);
}  // namespace

Result<std::string> compile_cuda(const KernelSource& src, const std::string& arch, std::string* log) {
  return compile_with(src, arch, {}, log);
}

namespace {

// f(line) for each line of `text`, without its newline.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  for (size_t a = 0; a < text.size();) {
    size_t e = text.find('\n', a);
    if (e == std::string_view::npos) e = text.size();
    f(text.substr(a, e - a));
    a = e + 1;
  }
}

// The first integer after `key` in `line` (which must hold it), else -1.
int int_after(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  size_t i = at + key.size();
  while (i < line.size() && line[i] == ' ') ++i;
  int v = 0;
  bool any = false;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) {
    v = v * 10 + (line[i++] - '0');
    any = true;
  }
  return any ? v : -1;
}

// The integer just before `key` in `line` ("8448 bytes smem" -> 8448), else -1.
int int_before(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  size_t e = at;
  while (e > 0 && line[e - 1] == ' ') --e;
  size_t b = e;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
  if (b == e) return -1;
  return std::stoi(line.substr(b, e - b));
}

}  // namespace

bool parse_ptxas_log(const std::string& log, CudaResources& r) {
  bool used = false;
  for_each_line(log, [&](std::string_view view) {
    const std::string line(view);
    if (const int regs = int_after(line, "Used "); regs >= 0 && line.find("registers") != std::string::npos) {
      used = true;
      r.registers = regs;
      if (const int b = int_after(line, "used "); b >= 0 && line.find("barriers") != std::string::npos) r.barriers = b;
      if (const int sm = int_before(line, " bytes smem"); sm >= 0) r.static_smem_bytes = sm;
    }
    if (const int v = int_before(line, " bytes stack frame"); v >= 0) r.stack_bytes = v;
    if (const int v = int_before(line, " bytes spill stores"); v >= 0) r.spill_store_bytes = v;
    if (const int v = int_before(line, " bytes spill loads"); v >= 0) r.spill_load_bytes = v;
  });
  return used;
}

void count_ptx(const std::string& ptx, CudaResources& r) {
  for_each_line(ptx, [&](std::string_view line) {
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos) return;
    if (line[b] == '@') {  // a predicate guard: "@%p1 ld.global..."
      b = line.find_first_of(" \t", b);
      b = b == std::string_view::npos ? line.size() : line.find_first_not_of(" \t", b);
      if (b == std::string_view::npos) return;
    }
    const std::string_view op = line.substr(b);
    auto starts = [&](std::string_view p) { return op.substr(0, p.size()) == p; };
    if (starts("wmma.mma")) ++r.wmma;
    else if (starts("mma.sync")) ++r.mma;
    else if (starts("ldmatrix")) ++r.ldmatrix;
    else if (starts("cp.async") && !starts("cp.async.commit") && !starts("cp.async.wait")) ++r.cp_async;
    else if (starts("ld.global")) ++r.ld_global;
    else if (starts("st.global")) ++r.st_global;
    else if (starts("ld.shared") || starts("ld.volatile.shared")) ++r.ld_shared;
    else if (starts("st.shared") || starts("st.volatile.shared")) ++r.st_shared;
    else if (starts("atom.global") || starts("red.global") || starts("atom.add") || starts("red.add")) ++r.atomics;
  });
}

Result<CudaResources> cuda_resources(const KernelSource& src, const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": the compiled resources are read for a real architecture "
                                  "(sm_XY), not \"{}\"",
                                  src.name, arch));
  }
  CudaResources r;
  r.arch = arch;
  std::string log;
  const std::vector<std::string> options = {"--ptxas-options=-v"};  // ptxas's resource report, in the log
  auto cubin = compile_with(src, arch, options, &log);
  if (!cubin) return cubin.error();
  if (!parse_ptxas_log(log, r)) {
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": NVRTC compiled it for {} but its log holds no "
                                                      "ptxas resource report:\n{}",
                                                      src.name, arch, log));
  }
  const std::string virt = "compute_" + arch.substr(3);
  auto ptx = compile_with(src, virt, {}, nullptr);
  if (!ptx) return ptx.error();
  count_ptx(*ptx, r);
  auto listing = disassemble_cubin(*cubin, src.name);
  if (!listing) {
    if (listing.error().code != ErrorCode::kUnavailable) return listing.error();
    r.sass_unavailable = listing.error().message;
    return r;
  }
  auto sass = parse_sass(*listing, fmt::format("nvdisasm's listing of kernel \"{}\" for {}", src.name, arch));
  if (!sass) return sass.error();
  r.sass = *sass;
  r.sass_read = true;
  r.disassembler = nvdisasm_version();
  return r;
}

namespace {
Result<std::string> compile_with(const KernelSource& src, const std::string& arch, const std::vector<std::string>& extra,
                                 std::string* log) {
  if (auto s = gpu::accept_cuda_cpp(src, log, "NVRTC compiles CUDA C++"); !s) return s.error();
  const auto& lib = nvrtc();
  if (!lib) return lib.error();
  const Nvrtc& n = *lib;

  // "sm_90", "sm_90a", "sm_100f", "compute_90".
  const bool ptx = arch.rfind("compute_", 0) == 0;
  const size_t digits_at = ptx ? 8 : (arch.rfind("sm_", 0) == 0 ? 3 : std::string::npos);
  size_t digits_end = digits_at;
  while (digits_at != std::string::npos && digits_end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[digits_end]))) {
    ++digits_end;
  }
  const bool well_formed = digits_at != std::string::npos && digits_end > digits_at && digits_end - digits_at <= 4 &&
                           (digits_end == arch.size() ||
                            (digits_end + 1 == arch.size() && (arch.back() == 'a' || arch.back() == 'f')));
  if (!well_formed) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": \"{}\" is not a CUDA target; write sm_XY for a GPU of compute "
                                  "capability X.Y (sm_80, sm_90) or compute_XY for PTX",
                                  src.name, arch));
  }
  const int number = std::stoi(arch.substr(digits_at, digits_end - digits_at));
  if (!n.arch_numbers.empty() &&
      std::find(n.arch_numbers.begin(), n.arch_numbers.end(), number) == n.arch_numbers.end()) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("kernel \"{}\": NVRTC {} ({}) cannot compile for {}; it targets {} .. {}. Install a "
                                  "CUDA toolkit whose NVRTC supports {} (CUDA 12 for sm_50 .. sm_70, a newer one for "
                                  "new GPUs) and point CUDA_HOME or GPUSIM_NVRTC_LIBRARY at it",
                                  src.name, n.info.version, n.info.library, arch, n.info.archs.front(),
                                  n.info.archs.back(), arch));
  }

  nvrtcProgram raw = nullptr;
  const std::string file = src.name + ".cu";
  if (nvrtcResult r = n.create_program(&raw, src.code.c_str(), file.c_str(), 0, nullptr, nullptr); r != NVRTC_SUCCESS) {
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": nvrtcCreateProgram failed: {}", src.name,
                                                      n.get_error_string(r)));
  }
  std::unique_ptr<_nvrtcProgram, ProgramDeleter> prog(raw, ProgramDeleter{n.destroy_program});

  std::vector<std::string> options = {"--gpu-architecture=" + arch, "--std=c++17"};
  options.insert(options.end(), extra.begin(), extra.end());
  if (!n.info.include_dir.empty()) options.push_back("-I" + n.info.include_dir);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = n.compile_program(prog.get(), static_cast<int>(argv.size()), argv.data());

  const std::string text = gpu::program_log(prog.get(), n.get_program_log_size, n.get_program_log, NVRTC_SUCCESS);
  if (log != nullptr) *log = text;
  if (compiled != NVRTC_SUCCESS) {
    std::string hint;
    if (n.info.include_dir.empty() && text.find("cuda_fp16.h") != std::string::npos) {
      hint = "; cuda_fp16.h was not found: install the CUDA toolkit's headers or set CUDA_HOME";
    }
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": NVRTC {} failed to compile it for {} ({}){}:\n{}",
                                                      src.name, n.info.version, arch, n.get_error_string(compiled),
                                                      hint, text));
  }

  std::string out;
  size_t size = 0;
  nvrtcResult r = ptx ? n.get_ptx_size(prog.get(), &size) : n.get_cubin_size(prog.get(), &size);
  if (r == NVRTC_SUCCESS) {
    out.resize(size);
    r = ptx ? n.get_ptx(prog.get(), out.data()) : n.get_cubin(prog.get(), out.data());
  }
  if (r != NVRTC_SUCCESS || out.empty()) {
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": NVRTC {} compiled it for {} but returned no {}: {}",
                                                      src.name, n.info.version, arch, ptx ? "PTX" : "cubin",
                                                      n.get_error_string(r)));
  }
  if (ptx) {
    while (!out.empty() && out.back() == '\0') out.pop_back();  // the size counts the terminator
  }
  return out;
}
}  // namespace

}  // namespace gpusim::backend::cuda
