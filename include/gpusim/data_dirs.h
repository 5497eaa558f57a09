// Where gpusim finds its data files (GPU profiles, runtime models) and where it keeps the user's own
// (calibrated profiles). Never the source tree: a binary built here and one installed elsewhere
// look in the same places, relative to themselves.
//
// Search order for profiles (runtimes alike, with $GPUSIM_RUNTIME_PATH and runtimes/):
//   1. directories the caller names (--profiles, SessionOptions::profile_dirs);
//   2. $GPUSIM_PROFILE_PATH, colon-separated;
//   3. the user's config directory: $XDG_CONFIG_HOME/gpusim/profiles, else ~/.config/gpusim/profiles
//      (gpusim calibrate writes there);
//   4. the installed data: <prefix>/share/gpusim/gpu_profiles, found relative to the binary that
//      holds this code (the gpusim program, libgpusim.so or the Python module), then the prefix the
//      build was configured to install to.
// A build tree mirrors the installed layout (build/share/gpusim is copied from the sources at build
// time), so build/bin/gpusim and an installed bin/gpusim behave the same.
//
// Usage:
//   auto dirs = gpusim::default_profile_dirs();
//   auto p = gpusim::find_profile("nvidia-rtx-3060", dirs);
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <string>
#include <vector>

namespace gpusim {

// <prefix>/share/gpusim of this installation (or build tree); nullopt when none is found.
GPUSIM_API std::optional<std::string> installed_data_dir();
// $XDG_CONFIG_HOME/gpusim, else $HOME/.config/gpusim; empty when neither variable is set.
GPUSIM_API std::string user_config_dir();
// The directories a colon-separated environment variable names (empty entries skipped).
GPUSIM_API std::vector<std::string> env_dirs(const char* env_var);
// The directories named by a colon-separated environment variable (empty entries skipped), then
// `<user config>/<user_subdir>`, then `<installed data>/<data_subdir>`.
GPUSIM_API std::vector<std::string> search_dirs(const char* env_var, const std::string& user_subdir, const std::string& data_subdir);
// Profiles: $GPUSIM_PROFILE_PATH, <user config>/profiles, <installed data>/gpu_profiles.
GPUSIM_API std::vector<std::string> default_profile_dirs();
// The measurement store that holds the autotuner's cache by default: $GPUSIM_TUNING_DB, else
// $XDG_CACHE_HOME/gpusim/tuning.db, else ~/.cache/gpusim/tuning.db ("" when none can be named).
GPUSIM_API std::string default_tuning_store();
// Where calibrated profiles are written by default: <user config>/profiles ("" when there is no
// user config directory).
GPUSIM_API std::string user_profile_dir();

}  // namespace gpusim
