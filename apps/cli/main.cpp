// gpusim: predict, plan and measure how ONNX graphs run on GPUs. See README.md.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "git_version.h"  // generated at build time: GPUSIM_GIT_DESCRIBE
#include "commands.h"
#include "exit_codes.h"
#include "firewall.h"
#include "base/closest.h"

namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sc : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sc->get_name());
  return names;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  const auto near = gpusim::closest_names(word, names, 1, std::max<size_t>(2, word.size() / 3));
  return near.empty() ? std::string() : "; did you mean \"" + near.front() + "\"?";
}

// A word where the command belongs that is no command (`gpusim prdict`): named, with the closest
// command. CLI11 alone answers "A subcommand is required", which hides the typo.
int unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return -1;
  const std::vector<std::string> names = command_names(app);
  if (std::find(names.begin(), names.end(), argv[1]) != names.end()) return -1;
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  std::fprintf(stderr, "gpusim: \"%s\" is not a command%s (commands: %s; `gpusim --help` describes them)\n", argv[1],
               did_you_mean(argv[1], names).c_str(), all.c_str());
  return 2;
}

// An option the chosen command does not have (`predict --dtyp fp16`): named, with the closest of
// that command's options, instead of CLI11's "arguments were not expected".
int unknown_option(CLI::App& app, int argc, char** argv) {
  std::vector<CLI::App*> chain = app.get_subcommands();
  if (chain.empty()) return -1;
  CLI::App* cmd = chain.back();
  for (std::vector<CLI::App*> sub = cmd->get_subcommands(); !sub.empty(); sub = cmd->get_subcommands()) cmd = sub.back();
  std::vector<std::string> names;
  for (const CLI::App* a = cmd; a; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    }
  }
  std::string path;
  for (const CLI::App* a = cmd; a && a->get_parent(); a = a->get_parent()) path = " " + a->get_name() + path;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") break;
    if (!word.starts_with("--")) continue;
    word = word.substr(0, word.find('='));
    if (std::find(names.begin(), names.end(), word) != names.end()) continue;
    std::fprintf(stderr, "gpusim%s: unknown option \"%s\"%s (`gpusim%s --help` lists the options)\n", path.c_str(),
                 word.c_str(), did_you_mean(word, names).c_str(), path.c_str());
    return 2;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using gpusim::cli::firewall;
  CLI::App app{"gpusim: a GPU performance simulator and cost model for ONNX graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpusim " GPUSIM_VERSION " (commit " GPUSIM_GIT_DESCRIBE ")");
  int rc = 0;
  gpusim::cli::add_inspect(app, rc);
  gpusim::cli::add_ops(app, rc);
  gpusim::cli::add_predict(app, rc);
  gpusim::cli::add_compare(app, rc);
  gpusim::cli::add_report(app, rc);
  gpusim::cli::add_plan(app, rc);
  gpusim::cli::add_run(app, rc);
  gpusim::cli::add_tune(app, rc);
  gpusim::cli::add_calibrate(app, rc);
  gpusim::cli::add_validate(app, rc);
  gpusim::cli::add_truth(app, rc);
  gpusim::cli::add_profiles(app, rc);
  gpusim::cli::add_serve(app, rc);
  gpusim::cli::add_dojo(app, rc);
  gpusim::cli::add_codegen(app, rc);
  for (CLI::App* sc : app.get_subcommands([](const CLI::App*) { return true; })) {
    const auto& codes = gpusim::cli::exit_codes();
    if (auto it = codes.find(sc->get_name()); it != codes.end()) {
      sc->footer("Exit codes: " + it->second + "; 70 an internal error (a bug: please report it).");
    }
  }
  app.footer("Every command exits 0 on success, 2 on a bad argument and 70 on an internal error; `gpusim COMMAND "
             "--help` lists what else its exit code means.");
  if (const int rc_word = unknown_command(app, argc, argv); rc_word >= 0) return rc_word;
  // The exception firewall (firewall.h): a bug is reported as one (exit 70), never an abort.
  return firewall(
      [&] {
        app.parse(argc, argv);
        return rc;
      },
      [&](const std::exception& e) {
        const auto* pe = dynamic_cast<const CLI::ParseError*>(&e);
        if (!pe) return -1;
        if (dynamic_cast<const CLI::ExtrasError*>(pe)) {
          if (const int code = unknown_option(app, argc, argv); code >= 0) return code;
        }
        const int code = app.exit(*pe);  // prints help, version or the usage error
        return code == 0 ? 0 : 2;
      });
}
