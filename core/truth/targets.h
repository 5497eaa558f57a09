// What validation predicts each record on (internal to the truth library): the profile a device
// name matches, with the fitted efficiencies applied, and the runtime a record names, with fitted
// host times applied to the runtime's own lowering rules.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gpusim/target.h"
#include "gpusim/validate.h"

namespace gpusim::truth {

struct Target {
  std::string profile;
  GpuProfile gpu;   // with the fitted vendor efficiencies, when given and the profile is not calibrated
  DeviceModel dev;
  // The library tile space on `gpu`: measurements come from frameworks and benchmarks that call
  // vendor libraries, so they are priced with the tiles those choose from (target.h).
  gpusim::Target library;
};

class Targets {
 public:
  explicit Targets(const ValidateOptions& opts);
  // The target of a device name, or nullptr (why_missing says why). Not thread-safe: resolve first.
  // `matched`: the profile the record itself names (a `gpusim run --json` record: the profile run
  // matched to its device), used when no --profile-for entry names one.
  const Target* find(const std::string& device, const std::string& matched = "");
  const std::string& why_missing(const std::string& device) const { return missing_.at(device); }
  // Whether --gpu keeps this device (every device when none was given).
  bool wanted(const std::string& device, const Target* t) const;
  bool filtered() const { return !keep_.empty(); }
  // The runtime a record names (or the override), loaded once.
  Result<const RuntimeModel*> runtime(const std::string& name);

 private:
  const ValidateOptions& opts_;
  std::vector<GpuProfile> own_;
  std::map<std::string, std::string> by_display_;
  std::map<std::string, const GpuProfile*> loaded_;
  std::vector<std::string> keep_;
  std::map<std::string, Target> targets_;
  std::map<std::string, std::string> missing_;
  std::map<std::string, RuntimeModel> runtimes_;
  VendorEfficiency measured_;  // the efficiency file's measured architecture figures
  std::vector<std::string> runtime_dirs_;
};

std::string normalized(const std::string& s);

}  // namespace gpusim::truth
