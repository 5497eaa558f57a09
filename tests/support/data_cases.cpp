// One Catch2 test case per data file (data_cases.h), registered through Catch2's own registrar.
#include "support/data_cases.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <vector>

namespace gpusim::test {
namespace {

// Catch2 keeps the names and tags as StringRefs: they live here for the whole run.
std::deque<std::string>& names() {
  static std::deque<std::string> n;
  return n;
}

class FileCase final : public Catch::ITestInvoker {
 public:
  explicit FileCase(std::function<void()> f) : f_(std::move(f)) {}
  void invoke() const override { f_(); }

 private:
  std::function<void()> f_;
};

void add(const std::string& name, const std::string& tags, std::function<void()> f) {
  names().push_back(name);
  const std::string& n = names().back();
  names().push_back(tags);
  const std::string& t = names().back();
  // AutoReg takes ownership of the invoker.
  Catch::AutoReg reg(new FileCase(std::move(f)), Catch::SourceLineInfo(__FILE__, static_cast<std::size_t>(__LINE__)),
                     Catch::StringRef(), Catch::NameAndTags{Catch::StringRef(n), Catch::StringRef(t)});
  (void)reg;
}

}  // namespace

int file_cases(const std::string& dir, const std::string& suffix, const std::string& prefix, const std::string& tags,
               std::function<void(const std::filesystem::path&)> body,
               std::function<bool(const std::filesystem::path&)> select) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(GPUSIM_SOURCE_DIR) / dir;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    if (select && !select(e.path())) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    add(prefix + ": no " + suffix + " file in " + dir, tags, [root, suffix] {
      FAIL("no " << suffix << " file in " << root.string() << (root.empty() ? "" : " (is the directory there?)"));
    });
    return 0;
  }
  for (const fs::path& f : files) {
    add(prefix + ": " + f.filename().string(), tags, [body, f] { body(f); });
  }
  return static_cast<int>(files.size());
}

}  // namespace gpusim::test
