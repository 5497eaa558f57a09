// write_file_atomic: the target is replaced whole or not at all, also when the writer is killed
// (SIGKILL) mid-write, and nothing is left behind once the next write has swept.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "hw/atomic_file.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {

std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("write_file_atomic replaces a file whole, and its errors name the file", "[atomic][errors]") {
  const std::string dir = fresh_dir("gpusim_atomic");
  const std::string path = dir + "/cache.json";
  REQUIRE(write_file_atomic(path, "one"));
  REQUIRE(write_file_atomic(path, "two, longer"));
  CHECK(test::file_bytes(path) == "two, longer");
  CHECK(listing(dir) == std::vector<std::string>{"cache.json"});
  auto s = write_file_atomic(dir + "/no/such/dir/cache.json", "x");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ErrorCode::kIo);
  CHECK_THAT(s.error().message, Catch::Contains("no/such/dir/cache.json: cannot create a file in"));
  CHECK_THAT(s.error().message, Catch::Contains("the previous file, if any, is unchanged"));
  fs::remove_all(dir);
}

TEST_CASE("a writer killed (SIGKILL) mid-write leaves the previous file whole and no temporary behind", "[atomic]") {
  const std::string dir = fresh_dir("gpusim_atomic_kill");
  const std::string path = dir + "/tuning.json";
  const std::string old_text = "{\"old\": true}\n";
  REQUIRE(write_file_atomic(path, old_text));
  const std::string big(48 << 20, 'n');  // long enough that most kills land mid-write
  int whole_new = 0;
  for (int round = 0; round < 12; ++round) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (;;) (void)write_file_atomic(path, big);
    }
    usleep(static_cast<useconds_t>(3000 + 7000 * round));
    kill(child, SIGKILL);
    int st = 0;
    waitpid(child, &st, 0);
    const std::string now = test::file_bytes(path);
    CHECK((now == old_text || now == big));  // never part of either
    whole_new += now == big;
    // A temporary can outlive its writer only if the kill lands between link and rename; the
    // next write removes it first. After that sweep: the target alone.
    sweep_stale_temporaries(dir);
    CHECK(listing(dir) == std::vector<std::string>{"tuning.json"});
    REQUIRE(write_file_atomic(path, old_text));
  }
  INFO(whole_new << " of 12 rounds had finished a write before the kill");
  fs::remove_all(dir);
}

TEST_CASE("sweep_stale_temporaries removes only temporaries whose writer is gone", "[atomic]") {
  const std::string dir = fresh_dir("gpusim_atomic_sweep");
  // A PID that has exited: a child that returns at once.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  std::ofstream(dir + "/.profile.yaml.gpusim-tmp-" + std::to_string(gone) + "-0") << "partial";
  std::ofstream(dir + "/.profile.yaml.gpusim-tmp-" + std::to_string(getpid()) + "-7") << "mine, in progress";
  std::ofstream(dir + "/.profile.yaml.gpusim-tmp-x-1") << "not ours";
  std::ofstream(dir + "/profile.yaml") << "name: x\n";
  CHECK(sweep_stale_temporaries(dir) == 1);
  CHECK(listing(dir) == std::vector<std::string>{".profile.yaml.gpusim-tmp-" + std::to_string(getpid()) + "-7",
                                                 ".profile.yaml.gpusim-tmp-x-1", "profile.yaml"});
  fs::remove_all(dir);
}
