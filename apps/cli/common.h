// Shared CLI plumbing: a --dtype value, and the exit code for an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim::cli {

// "fp32" | "fp16" | "bf16" -> DType; anything else is an error naming the allowed values.
Result<DType> parse_dtype(const std::string& s);
// Exit code for an error: 2 for bad arguments, 1 otherwise (from its code, never its text).
int exit_code(const Error& e);
// An error's message in the CLI's words: the API options it names (wording.h) as flags,
// `dims batch=N` as --dim batch=N, `beam_width` as --beam-width.
std::string say(const Error& e);
std::string say(const std::string& message);  // a note
std::string cli_spelling(std::string_view name, std::string_view value);

// Prints "warning: ..." to stderr for each folder on the profile search path that cannot be read
// (it is skipped; the command goes on with the others).
void warn_profile_dirs(const std::vector<std::string>& dirs);

// Why a file the command will write at its end cannot be written ("" when it can): a directory,
// a missing or unwritable folder. Checked before the work starts, so minutes of searching,
// tuning or measuring are not lost to a typo. `flag` names the option ("--out").
std::string output_file_problem(const std::string& path, const char* flag);

// `word` as one POSIX shell word: unchanged when it has only safe characters, else single-quoted.
std::string shell_word(const std::string& word);
// A command line a user can paste: "gpusim" then each word shell-quoted, space-separated.
std::string shell_command(const std::vector<std::string>& words);

}  // namespace gpusim::cli

namespace gpusim::cli {

// A progress line on stderr for a long command. On a terminal it is redrawn in place, at most ten
// times a second, and erased by clear() (or the destructor) before results print. Elsewhere (logs,
// pipes) it prints nothing unless `always`: then one line per phase, and one every 5 s within it.
//
//   ProgressLine line("gpusim run", /*enabled=*/!quiet, /*always=*/force);
//   if (line.due("compile", 0)) line.show(fmt::format("compile {}/{} kernels", done, total));
//   line.clear();
// due() is cheap (a clock read), so a caller asked thousands of times formats only what is shown.
class ProgressLine {
 public:
  ProgressLine(std::string command, bool enabled, bool always);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  bool enabled() const { return enabled_; }
  // Whether to show a line now: a new phase (or run of it), or the interval has passed.
  bool due(std::string_view phase, int run);
  void show(const std::string& text);
  void clear();

 private:
  std::string command_, phase_;
  int run_ = -1;
  bool terminal_ = false, enabled_ = false, drawn_ = false;
  double start_s_ = 0, last_s_ = -1;
};

}  // namespace gpusim::cli
