#include "gpusim/data_dirs.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace gpusim {
namespace {

namespace fs = std::filesystem;

// The file holding this function's code: the executable, libgpusim.so or the Python module.
fs::path this_binary() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&this_binary), &info) != 0 && info.dli_fname != nullptr &&
      *info.dli_fname != '\0') {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p;
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

bool has_data(const fs::path& d) {
  std::error_code ec;
  return fs::is_directory(d / "gpu_profiles", ec);
}

}  // namespace

std::optional<std::string> installed_data_dir() {
  const fs::path bin = this_binary();
  if (!bin.empty()) {
    const fs::path dir = bin.parent_path();
    // bin/gpusim and lib/libgpusim.so (and build/bin, build/tests, build/lib) -> ../share/gpusim;
    // the library directory as configured (lib/x86_64-linux-gnu -> ../../share/gpusim); a Python
    // package that carries its data beside its module -> share/gpusim.
    for (const fs::path& cand : {dir / ".." / "share" / "gpusim", dir / GPUSIM_LIB_TO_DATA, dir / "share" / "gpusim",
                                 dir / ".." / ".." / "share" / "gpusim"}) {
      if (has_data(cand)) return fs::weakly_canonical(cand).string();
    }
  }
  const fs::path configured = GPUSIM_INSTALL_DATA_DIR;
  if (has_data(configured)) return configured.string();
  return std::nullopt;
}

std::string user_config_dir() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x != '\0') return (fs::path(x) / "gpusim").string();
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return (fs::path(h) / ".config" / "gpusim").string();
  return {};
}

std::string default_tuning_store() {
  if (const char* d = std::getenv("GPUSIM_TUNING_DB"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return (fs::path(x) / "gpusim" / "tuning.db").string();
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return (fs::path(h) / ".cache" / "gpusim" / "tuning.db").string();
  }
  return {};
}

std::string user_profile_dir() {
  const std::string c = user_config_dir();
  return c.empty() ? c : (fs::path(c) / "profiles").string();
}

std::vector<std::string> env_dirs(const char* env_var) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv(env_var); env && *env) {
    const std::string s(env);
    size_t start = 0;
    for (size_t p = 0; p <= s.size(); ++p) {
      if (p == s.size() || s[p] == ':') {
        if (p > start) dirs.push_back(s.substr(start, p - start));
        start = p + 1;
      }
    }
  }
  return dirs;
}

std::vector<std::string> search_dirs(const char* env_var, const std::string& user_subdir, const std::string& data_subdir) {
  std::vector<std::string> dirs = env_dirs(env_var);
  if (const std::string c = user_config_dir(); !c.empty()) dirs.push_back((fs::path(c) / user_subdir).string());
  if (auto d = installed_data_dir()) dirs.push_back((fs::path(*d) / data_subdir).string());
  return dirs;
}

std::vector<std::string> default_profile_dirs() {
  return search_dirs("GPUSIM_PROFILE_PATH", "profiles", "gpu_profiles");
}

}  // namespace gpusim
