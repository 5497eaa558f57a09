#include "common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <map>

#include "gpusim/wording.h"

namespace gpusim::cli {

Result<DType> parse_dtype(const std::string& s) {
  if (auto d = retype_dtype_from_name(s)) return *d;
  return make_error(ErrorCode::kInvalidArgument,
                    "--dtype \"" + s + "\" is not supported; expected fp32, fp16, bf16, int8 or fp8");
}

int exit_code(const Error& e) { return e.code == ErrorCode::kInvalidArgument ? 2 : 1; }

std::string cli_spelling(std::string_view name, std::string_view value) {
  // The flags whose name is not the option's with '-' for '_'.
  static const std::map<std::string_view, std::string_view> kOdd = {{"dims", "--dim"}, {"skip_patterns", "--skip-pattern"}};
  std::string flag;
  if (auto it = kOdd.find(name); it != kOdd.end()) {
    flag = it->second;
  } else {
    flag = "--";
    for (char c : name) flag += c == '_' ? '-' : c;
  }
  if (!value.empty()) {
    flag += ' ';
    flag += value;
  }
  return flag;
}

std::string say(const Error& e) { return reword_options(e.message, cli_spelling); }
std::string say(const std::string& message) { return reword_options(message, cli_spelling); }

std::string output_file_problem(const std::string& path, const char* flag) {
  namespace fs = std::filesystem;
  const fs::path out(path);
  std::error_code ec;
  if (fs::is_directory(out, ec)) return fmt::format("{} {}: is a directory; give a file name", flag, path);
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(dir, ec)) {
    return fmt::format("{} {}: the directory {} does not exist; create it or pick another {}", flag, path, dir.string(), flag);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return fmt::format("{} {}: the directory {} is not writable; pick another {}", flag, path, dir.string(), flag);
  }
  return "";
}

void warn_profile_dirs(const std::vector<std::string>& dirs) {
  for (const std::string& w : profile_dir_warnings(dirs)) fmt::print(stderr, "warning: {}\n", w);
}

std::string shell_word(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789_-+=.,/:@%") == std::string::npos;
  if (safe) return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string s = "gpusim";
  for (const std::string& w : words) s += " " + shell_word(w);
  return s;
}

}  // namespace gpusim::cli

namespace gpusim::cli {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressLine::ProgressLine(std::string command, bool enabled, bool always)
    : command_(std::move(command)), terminal_(isatty(fileno(stderr)) != 0), start_s_(now_s()) {
  enabled_ = enabled && (terminal_ || always);
}

ProgressLine::~ProgressLine() { clear(); }

bool ProgressLine::due(std::string_view phase, int run) {
  if (!enabled_) return false;
  const double t = now_s();
  if (phase == phase_ && run == run_ && t - last_s_ < (terminal_ ? 0.1 : 5.0)) return false;
  phase_ = phase;
  run_ = run;
  last_s_ = t;
  return true;
}

void ProgressLine::show(const std::string& line) {
  if (!enabled_) return;
  const std::string text = fmt::format("{}: {} [{:.0f} s]", command_, line, now_s() - start_s_);
  if (terminal_) {
    fmt::print(stderr, "\r\033[K{}", text);
    drawn_ = true;
  } else {
    fmt::print(stderr, "{}\n", text);
  }
  std::fflush(stderr);
}

void ProgressLine::clear() {
  if (drawn_) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace gpusim::cli
