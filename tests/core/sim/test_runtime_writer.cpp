// The runtime file's writer beside its reader: a runtime written with runtime_to_yaml, its
// lowering rules kept from the file, reads back to the same figures and rules.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gpusim/runtime.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

namespace fs = std::filesystem;
using namespace gpusim;

TEST_CASE("every shipped runtime reads back as runtime_to_yaml writes it", "[runtime][writer]") {
  // Written beside copies of the shipped files, as a file that `extends:` another finds it there.
  const fs::path dir = fs::path(test::temp_dir()) / "runtime_writer";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(test::source_dir() + "/runtimes")) {
    if (e.path().extension() == ".yaml") fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  int n = 0;
  for (const auto& e : fs::directory_iterator(test::source_dir() + "/runtimes")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    auto r = find_runtime(e.path().string(), {});
    REQUIRE(r);
    RuntimeModel edited = *r;
    edited.description = "a \"quoted\" description: with a colon";
    const std::string text = runtime_yaml_with_lowering_of(
        e.path().string(), runtime_to_yaml(edited, "gpusim validate --write-runtimes x", {{"op_us", "a test"}}));
    const std::string out = (dir / ("written_" + e.path().filename().string())).string();
    std::ofstream(out) << text;
    auto back = find_runtime(out, {});
    INFO(text);
    REQUIRE(back);
    CHECK(back->name == r->name);
    CHECK(back->description == edited.description);
    CHECK(back->combine == r->combine);
    CHECK(back->default_us == r->default_us);
    CHECK(back->extra_kernel_us == r->extra_kernel_us);
    CHECK(back->launch_latency_us == r->launch_latency_us);
    CHECK(back->host_scaled == r->host_scaled);
    CHECK(back->op_us == r->op_us);
    CHECK(back->class_us == r->class_us);
    CHECK(back->lowering.kernels.size() == r->lowering.kernels.size());
    CHECK(back->lowering.fuse.size() == r->lowering.fuse.size());
    CHECK(back->extends == r->extends);
    CHECK(back->replay == r->replay);
    CHECK(back->vendors == r->vendors);
    CHECK(back->lowering.layout.use == r->lowering.layout.use);
    CHECK(back->lowering.half_accumulate.classes == r->lowering.half_accumulate.classes);
    ++n;
  }
  CHECK(n >= 3);
}
