// gpusim: predict, plan and measure how ONNX graphs run on GPUs. See README.md.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>

#include "commands.h"
#include "firewall.h"

int main(int argc, char** argv) {
  using gpusim::cli::firewall;
  CLI::App app{"gpusim: a GPU performance simulator and cost model for ONNX graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpusim 0.1.0");
  int rc = 0;
  gpusim::cli::add_inspect(app, rc);
  gpusim::cli::add_ops(app, rc);
  gpusim::cli::add_predict(app, rc);
  gpusim::cli::add_compare(app, rc);
  gpusim::cli::add_plan(app, rc);
  gpusim::cli::add_run(app, rc);
  gpusim::cli::add_calibrate(app, rc);
  gpusim::cli::add_validate(app, rc);
  gpusim::cli::add_truth(app, rc);
  gpusim::cli::add_profiles(app, rc);
  gpusim::cli::add_serve(app, rc);
  // The exception firewall (firewall.h): a bug is reported as one (exit 70), never an abort.
  return firewall(
      [&] {
        app.parse(argc, argv);
        return rc;
      },
      [&](const std::exception& e) {
        const auto* pe = dynamic_cast<const CLI::ParseError*>(&e);
        if (!pe) return -1;
        const int code = app.exit(*pe);  // prints help, version or the usage error
        return code == 0 ? 0 : 2;
      });
}
