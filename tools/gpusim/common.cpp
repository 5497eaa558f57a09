#include "common.h"


namespace gpusim::cli {

Result<DType> parse_dtype(const std::string& s) {
  if (auto d = float_dtype_from_name(s)) return *d;
  return make_error(ErrorCode::kInvalidArgument,
                    "--dtype \"" + s + "\" is not supported; expected fp32, fp16 or bf16");
}

int exit_code(const Error& e) { return e.code == ErrorCode::kInvalidArgument ? 2 : 1; }

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
