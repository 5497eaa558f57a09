// gpusim calibrate --backend vulkan|cuda|hip [--device N] [--quick] [--base PROFILE] [--out FILE]
// gpusim calibrate --refit MEASUREMENTS.json [--base PROFILE] [--out FILE]
//
// --refit fits a calibration's raw data again, without its device: after a change to the cost
// model or the fit, the same measurements give the profile this gpusim would have written.
// Measures the device with backends/calibrate/'s microbenchmarks and codegen kernels, fits the base
// profile's efficiency factors, and writes a profile that `extends:` the base with a `calibrated`
// block (plus the raw measurements beside it), atomically. Prints a progress bar to stderr and
// the report to stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "backend.h"
#include "calibrate.h"
#include "commands.h"
#include "common.h"
#include "base/json_text.h"

namespace gpusim::cli {
namespace {

struct Args {
  std::string backend, refit;
  int device = 0;
  bool quick = false, force_base = false;
  std::string base, out;
  std::vector<std::string> profile_dirs;
  bool json = false;
};

// A one-line bar on a terminal; a line per step elsewhere (logs, CI).
void progress(double frac, const std::string& what, double elapsed) {
  static std::string last;
  if (isatty(fileno(stderr))) {
    const int width = 24, filled = static_cast<int>(frac * width + 0.5);
    fmt::print(stderr, "\r[{}{}] {:3.0f}% {:5.1f} s  {:<60.60}", std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(width - filled), '-'), 100 * frac, elapsed, what);
    if (frac >= 1.0) fmt::print(stderr, "\n");
  } else if (what != last) {
    fmt::print(stderr, "[{:3.0f}% {:5.1f} s] {}\n", 100 * frac, elapsed, what);
  }
  last = what;
}

// The default --out: <base>-calibrated.yaml in the user's profile directory, which every later
// command searches (`--gpu <base>-calibrated` then finds it from any working directory); "" when
// that directory cannot be made (said on stderr).
std::string default_out(const std::string& base) {
  const std::string user = user_profile_dir();
  const std::string out = (std::filesystem::path(user.empty() ? "." : user) / (base + "-calibrated.yaml")).string();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
  if (ec) {
    fmt::print(stderr, "gpusim calibrate: cannot create {}: {}; pass --out FILE.yaml\n",
               std::filesystem::path(out).parent_path().string(), ec.message());
    return "";
  }
  return out;
}

int refit(const Args& a, const std::vector<std::string>& dirs) {
  auto o = calibrate::read_raw(a.refit);
  if (!o) {
    fmt::print(stderr, "gpusim calibrate: --refit: {}\n", say(o.error()));
    return 1;
  }
  // The base the measurements were taken against, unless --base names another.
  const std::string base_name = a.base.empty() ? o->base_name : a.base;
  if (base_name.empty()) {
    fmt::print(stderr, "gpusim calibrate: --refit {}: base: the raw data names no base profile; pass --base NAME\n",
               a.refit);
    return 1;
  }
  auto base = find_profile(base_name, dirs);
  if (!base) {
    fmt::print(stderr, "gpusim calibrate: --refit: base profile: {}\n", say(base.error()));
    return 1;
  }
  o->base = *base;
  const std::string out = a.out.empty() ? default_out(base->name) : a.out;
  if (out.empty()) return 1;
  o->notes.push_back(fmt::format("fitted again from these measurements by `gpusim calibrate --refit` on {} (measured {})",
                                 calibrate::today(), o->date));
  calibrate::fit_outcome(*o);
  if (auto s = calibrate::write_profile(*o, out, dirs); !s) {
    fmt::print(stderr, "gpusim calibrate: {}\n", say(s.error()));
    return 1;
  }
  if (a.json) {
    fmt::print("{}\n", calibrate::raw_json(*o, std::filesystem::path(out).stem().string()).dump(1, ' ', false, kInvalidUtf8));
  } else {
    fmt::print("{}\nWrote {} (extends {}), fitted again from {}.\n", calibrate::report(*o), out, base->name, a.refit);
  }
  return 0;
}

int run(const Args& a, const std::string& command) {
  std::vector<std::string> dirs = a.profile_dirs;
  for (const auto& d : default_profile_dirs()) dirs.push_back(d);
  if (std::filesystem::path(a.base).extension() == ".yaml") {
    dirs.push_back(std::filesystem::path(a.base).parent_path().string());
  }
  // An --out that cannot be written is refused before minutes of measuring (or a fit), not after.
  if (!a.out.empty()) {
    const std::filesystem::path out(a.out);
    if (out.extension() != ".yaml") {
      fmt::print(stderr, "gpusim calibrate: --out {}: a profile file must end in .yaml (its name is the profile's name)\n",
                 a.out);
      return 2;
    }
    if (const std::string why = output_file_problem(a.out, "--out"); !why.empty()) {
      fmt::print(stderr, "gpusim calibrate: {}\n", why);
      return 2;
    }
  }
  if (!a.refit.empty()) {
    if (!a.backend.empty() || a.device != 0 || a.quick || a.force_base) {
      fmt::print(stderr, "gpusim calibrate: --refit fits measurements already taken; --backend, --device, --quick and "
                         "--force-base are for measuring a device: leave them out\n");
      return 2;
    }
    return refit(a, dirs);
  }
  if (a.backend.empty()) {
    fmt::print(stderr, "gpusim calibrate: --backend is required (vulkan, cuda or hip); or --refit MEASUREMENTS.json to "
                       "fit a calibration's raw data again\n");
    return 2;
  }
  if (a.backend == "null") {
    fmt::print(stderr, "gpusim calibrate: --backend null has no device to measure (its timers answer from a table); "
                       "choose vulkan, cuda or hip\n");
    return 2;
  }
  if (!backend::is_device_backend(a.backend)) {
    fmt::print(stderr, "gpusim calibrate: --backend \"{}\" is not a device backend; choose vulkan, cuda or hip\n", a.backend);
    return 2;
  }
  auto dev = backend::open(a.backend, a.device);
  if (!dev) {
    fmt::print(stderr, "gpusim calibrate: {}\n", say(dev.error()));
    return exit_code(dev.error());
  }
  const backend::DeviceInfo& info = (*dev)->info();
  GpuProfile base;
  if (!a.base.empty()) {
    auto p = find_profile(a.base, dirs);
    if (!p) {
      fmt::print(stderr, "gpusim calibrate: --base: {}\n", say(p.error()));
      return 1;
    }
    base = *p;
    // A --base of another device would mix its datasheet with this device's measurements.
    if (auto match = profile_for_device(info.name, dirs, true); match && !a.force_base) {
      const auto& chain = base.extends_chain;
      const bool same = match->name == base.name || std::find(chain.begin(), chain.end(), match->name) != chain.end();
      if (!same) {
        fmt::print(stderr,
                   "gpusim calibrate: --base {} is another device: this is \"{}\", whose datasheet profile is {}; "
                   "calibrating it against {}'s figures would mix two devices. Use --base {} (or leave --base out), "
                   "or add --force-base to measure against {} anyway\n",
                   base.name, info.name, match->name, base.display_name, match->name, base.name);
        return 2;
      }
    } else if (!match) {
      fmt::print(stderr,
                 "gpusim calibrate: warning: no datasheet profile matches device \"{}\"; using --base {} ({}) as "
                 "given\n",
                 info.name, base.name, base.display_name);
    }
  } else {
    auto p = profile_for_device(info.name, dirs, true);
    if (!p) {
      fmt::print(stderr,
                 "gpusim calibrate: no datasheet profile matches device \"{}\"; pass --base NAME with the profile of "
                 "this GPU (gpusim profiles list), or write one (gpu_profiles/README.md) and pass its path\n",
                 info.name);
      return 1;
    }
    base = *p;
  }
  // By default the profile lands in the user's profile directory, which every later command
  // searches: `--gpu <base>-calibrated` then finds it from any working directory.
  const std::string out = a.out.empty() ? default_out(base.name) : a.out;
  if (out.empty()) return 1;
  if (std::filesystem::path(out).extension() != ".yaml") {
    fmt::print(stderr, "gpusim calibrate: --out {}: a profile file must end in .yaml (its name is the profile's name)\n", out);
    return 2;
  }
  fmt::print(stderr, "gpusim calibrate: {} ({}, {}) against profile {}{}\n", info.name, a.backend, info.driver, base.name,
             a.quick ? ", quick" : "");
  calibrate::Options o;
  o.quick = a.quick;
  o.command = command;
  const auto start = std::chrono::steady_clock::now();
  o.progress = [&](double f, const std::string& what) {
    progress(f, what, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  auto r = calibrate::run(**dev, base, o);
  if (!r) {
    fmt::print(stderr, "\ngpusim calibrate: {}; no profile was written\n", say(r.error()));
    return 1;
  }
  if (auto s = calibrate::write_profile(*r, out, dirs); !s) {
    fmt::print(stderr, "gpusim calibrate: {}\n", say(s.error()));
    return 1;
  }
  const std::string stem = std::filesystem::path(out).stem().string();
  if (a.json) {
    fmt::print("{}\n", calibrate::raw_json(*r, stem).dump(1, ' ', false, kInvalidUtf8));
  } else {
    fmt::print("{}\n", calibrate::report(*r));
    auto written = load_profile(out, dirs);
    fmt::print("Wrote {} (extends {}) and its measurements beside it ({}).\n", out, base.name,
               written && written->calibrated ? written->calibrated->measurements : stem + ".measurements.json");
    fmt::print("Use it as --gpu {} with predict, plan, compare or run; to see it:\n  {}\n", shell_word(out),
               shell_command({"profiles", "show", out}));
  }
  const double budget = a.quick ? 60 : 300;
  if (r->elapsed_s > budget) {
    fmt::print(stderr, "gpusim calibrate: took {:.0f} s, over the {} budget of {:.0f} s (a busy machine?)\n", r->elapsed_s,
               a.quick ? "--quick" : "full", budget);
  }
  return 0;
}

}  // namespace

void add_calibrate(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("calibrate", "Measure this device and write a calibrated profile (extends the datasheet one)");
  cmd->add_option("--backend", a->backend, "vulkan, cuda or hip (required unless --refit)");
  cmd->add_option("--refit", a->refit, "Fit the raw data of an earlier calibration again (its .measurements.json), without its device: after a change to the cost model or the fit");
  cmd->add_option("--device", a->device, "Device index within the backend (default 0)");
  cmd->add_flag("--quick", a->quick, "Fewer sizes and repeats: under a minute");
  cmd->add_option("--base", a->base, "Datasheet profile to extend (name or .yaml path; default: the one matching the device)");
  cmd->add_flag("--force-base", a->force_base, "Calibrate against --base even when it is another device's profile");
  cmd->add_option("--out", a->out, "Profile file to write (default: <base>-calibrated.yaml in the user profile directory, ~/.config/gpusim/profiles); raw data goes beside it");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directories of GPU profiles");
  cmd->add_flag("--json", a->json, "Print the raw measurements (schema gpusim.calibration/1) instead of the report");
  cmd->callback([a, &rc] {
    std::string command = a->refit.empty() ? "gpusim calibrate --backend " + a->backend : "gpusim calibrate --refit " + a->refit;
    if (a->device) command += fmt::format(" --device {}", a->device);
    if (a->quick) command += " --quick";
    if (!a->base.empty()) command += " --base " + a->base;
    if (a->force_base) command += " --force-base";
    if (!a->out.empty()) command += " --out " + a->out;
    rc = run(*a, command);
  });
}

}  // namespace gpusim::cli
