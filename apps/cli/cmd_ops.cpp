// gpusim ops: the op catalog, one op per line with its class.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gpusim/op_catalog.h"
#include "base/json_text.h"

namespace gpusim::cli {

void add_ops(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("ops", "List the ONNX ops gpusim supports, with their class");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON: {\"ops\": [{\"op\", \"class\"}]}");
  cmd->callback([json, &rc] {
    nlohmann::json out = nlohmann::json::array();
    for (const std::string& key : supported_ops()) {
      const auto colon = key.find(':');
      const std::string domain = colon == std::string::npos ? "" : key.substr(0, colon);
      const std::string op = colon == std::string::npos ? key : key.substr(colon + 1);
      const std::string cls(op_class_name(*op_class(domain, op)));
      if (*json) {
        out.push_back({{"op", key}, {"class", cls}});
      } else {
        fmt::print("{:<32} {}\n", key, cls);
      }
    }
    if (*json) fmt::print("{}\n", nlohmann::json{{"ops", out}}.dump(2, ' ', false, kInvalidUtf8));
    rc = 0;
  });
}

}  // namespace gpusim::cli
