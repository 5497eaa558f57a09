// Subcommands of the gpusim program. Each adds itself to the CLI11 app and returns the exit code
// through the callback's `rc` once parsed. Only main() exits.
#pragma once

#include <CLI/CLI.hpp>

namespace gpusim::cli {

void add_inspect(CLI::App& app, int& rc);
void add_ops(CLI::App& app, int& rc);
void add_profiles(CLI::App& app, int& rc);
void add_predict(CLI::App& app, int& rc);
void add_compare(CLI::App& app, int& rc);
void add_report(CLI::App& app, int& rc);
void add_plan(CLI::App& app, int& rc);
void add_run(CLI::App& app, int& rc);
void add_tune(CLI::App& app, int& rc);
void add_calibrate(CLI::App& app, int& rc);
void add_validate(CLI::App& app, int& rc);
void add_truth(CLI::App& app, int& rc);
void add_serve(CLI::App& app, int& rc);
void add_dojo(CLI::App& app, int& rc);
void add_codegen(CLI::App& app, int& rc);

}  // namespace gpusim::cli
