// gpusim: predict, plan and measure how ONNX graphs run on GPUs. See README.md.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>

#include "commands.h"

int main(int argc, char** argv) {
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
  // The program's exception firewall: commands report expected failures as messages and exit
  // codes; anything thrown past them is a bug, reported as one (exit 70, EX_SOFTWARE), never an
  // abort with a core dump.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, version or the usage error
    return code == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gpusim: out of memory; the command needs more memory than is free\n");
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpusim: internal error: %s (a bug in gpusim: please report it with the command and its input)\n",
                 e.what());
    return 70;
  } catch (...) {
    std::fprintf(stderr, "gpusim: internal error: an unknown exception (a bug in gpusim: please report it with the "
                         "command and its input)\n");
    return 70;
  }
  return rc;
}
