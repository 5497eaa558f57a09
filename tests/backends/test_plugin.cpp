// A backend from outside gpusim: written against the installed headers alone
// (<gpusim/backend_plugin.h>, <gpusim/gpusim.h>), registered through the public plugin interface,
// and handed a plan by the Session like gpusim's own backends. The device keeps its buffers in host
// memory, records every compile and launch, and answers its timers from a latency table: the
// executor's logic (uploads, one launch per plan kernel in order, timers, downloads) runs with no
// device at all.
#include <catch2/catch.hpp>

#include <gpusim/backend_plugin.h>
#include <gpusim/gpusim.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/onnx_builder.h"

namespace {

using gpusim::Result;
using gpusim::Status;
namespace be = gpusim::backend;

// What the device saw, shared with the test after the Program owns the device.
struct Journal {
  std::mutex mu;
  std::vector<std::string> compiled;  // kernel names, in compile order
  std::vector<std::string> launched;  // kernel names, in launch order
  int uploads = 0, downloads = 0;
};

class TableDevice final : public be::Backend {
 public:
  TableDevice(std::shared_ptr<Journal> j, std::map<std::string, double> latency_us)
      : j_(std::move(j)), latency_(std::move(latency_us)) {
    info_.backend = "tabledev";
    info_.name = "table device";
    info_.vendor = "test";
    info_.driver = "1";
    info_.arch = "table";
    info_.language = be::Language::kCudaCpp;
    info_.is_cpu = true;
    info_.memory_bytes = uint64_t{1} << 32;
    info_.compute_units = 4;
    info_.max_threads_per_group = 1024;
    info_.max_shared_bytes = 48 * 1024;
    info_.fp16 = true;
    info_.int64 = true;
  }
  const be::DeviceInfo& info() const override { return info_; }

  Result<be::Buffer> allocate(uint64_t bytes) override {
    const uint64_t id = next_++;
    mem_[id].assign(bytes, 0);  // a launch leaves outputs as zeros: nothing computes here
    return be::Buffer{id, bytes};
  }
  Status upload(const be::Buffer& b, const void* src, uint64_t bytes, uint64_t offset) override {
    std::memcpy(mem_.at(b.id).data() + offset, src, bytes);
    std::lock_guard<std::mutex> lock(j_->mu);
    ++j_->uploads;
    return gpusim::Ok{};
  }
  Status download(const be::Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override {
    std::memcpy(dst, mem_.at(b.id).data() + offset, bytes);
    std::lock_guard<std::mutex> lock(j_->mu);
    ++j_->downloads;
    return gpusim::Ok{};
  }
  void release(const be::Buffer& b) override { mem_.erase(b.id); }

  Result<be::KernelHandle> compile(const be::KernelSource& src) override {
    if (auto ok = can_run(src); !ok) return ok.error();
    if (src.language != be::Language::kCudaCpp || src.code.empty()) {
      return gpusim::make_error(gpusim::ErrorCode::kDevice, "tabledev: expected CUDA C++ source for " + src.name);
    }
    names_.push_back(src.name);
    std::lock_guard<std::mutex> lock(j_->mu);
    j_->compiled.push_back(src.name);
    return static_cast<be::KernelHandle>(names_.size() - 1);
  }
  Result<int> launch(be::KernelHandle k, std::array<uint32_t, 3> groups, std::span<const be::Buffer> args,
                     bool timed) override {
    if (k >= names_.size() || groups[0] == 0 || args.empty()) {
      return gpusim::make_error(gpusim::ErrorCode::kDevice, "tabledev: a launch without kernel, groups or buffers");
    }
    {
      std::lock_guard<std::mutex> lock(j_->mu);
      j_->launched.push_back(names_[k]);
    }
    if (!timed) return -1;
    // The table by kernel-name prefix, else 1 us.
    double us = 1.0;
    for (const auto& [prefix, t] : latency_) {
      if (names_[k].rfind(prefix, 0) == 0) us = t;
    }
    timers_.push_back(us);
    return static_cast<int>(timers_.size() - 1);
  }
  Status synchronize() override { return gpusim::Ok{}; }
  Result<std::vector<double>> read_timers() override {
    std::vector<double> out;
    out.swap(timers_);
    return out;
  }
  be::CompileStats compile_stats() const override { return {static_cast<int>(names_.size()), 0, 0.0}; }

 private:
  std::shared_ptr<Journal> j_;
  std::map<std::string, double> latency_;
  be::DeviceInfo info_;
  std::map<uint64_t, std::vector<uint8_t>> mem_;
  uint64_t next_ = 1;
  std::vector<std::string> names_;
  std::vector<double> timers_;
};

be::BackendPlugin table_plugin(std::shared_ptr<Journal> j, std::map<std::string, double> table) {
  be::BackendPlugin p;
  p.name = "tabledev";
  p.list_devices = [j, table]() -> Result<std::vector<be::DeviceInfo>> {
    return std::vector<be::DeviceInfo>{TableDevice(j, table).info()};
  };
  p.open = [j, table](int index) -> Result<std::unique_ptr<be::Backend>> {
    if (index != 0) return gpusim::make_error(gpusim::ErrorCode::kUnavailable, "tabledev: one device, index 0");
    return std::unique_ptr<be::Backend>(std::make_unique<TableDevice>(j, table));
  };
  return p;
}

// y = Relu(x @ w) with a weight: two kernels in the eager plan.
std::string mlp_model() {
  gpusim::test::OnnxBuilder b;
  b.input("x", 1, {4, 8});
  auto* w = b.graph().add_initializer();
  *w = gpusim::test::f32_tensor({8, 16}, std::vector<float>(128, 0.5f));
  w->set_name("w");
  b.node("MatMul", {"x", "w"}, {"m"}, "mm");
  b.node("Relu", {"m"}, {"y"}, "relu");
  b.output("y");
  return b.write("plugin_mlp.onnx");
}

}  // namespace

TEST_CASE("an out-of-tree backend registers through the plugin interface and runs a plan", "[backend][plugin]") {
  auto journal = std::make_shared<Journal>();
  REQUIRE(be::register_backend(table_plugin(journal, {{"gemm", 7.5}})));
  struct Unregister {
    ~Unregister() { (void)be::unregister_backend("tabledev"); }
  } unregister;
  CHECK(be::registered_backends() == std::vector<std::string>{"tabledev"});

  const gpusim::Session s;
  auto m = s.open_model(mlp_model());
  REQUIRE(m);
  gpusim::CompileOptions o;
  o.backend = "tabledev";
  o.gpu = *s.gpu("nvidia-rtx-3060");  // the profile the plan's tiles and predictions use
  auto prog = s.compile(*m, o);
  REQUIRE(prog);
  const size_t kernels = prog->plan().kernels.size();
  REQUIRE(kernels >= 1);

  std::vector<float> x(32, 1.0f), y(64, -1.0f);
  auto r = prog->run({{gpusim::DType::kFloat32, {4, 8}, x.data(), x.size() * 4}},
                     {{gpusim::DType::kFloat32, {4, 16}, y.data(), y.size() * 4}});
  REQUIRE(r);
  for (float v : y) CHECK(v == 0.0f);  // the table device computes nothing: its buffers stay zero
  {
    std::lock_guard<std::mutex> lock(journal->mu);
    CHECK(journal->compiled.size() == kernels);
    INFO("launched: " << [&] { std::string all; for (const auto& n : journal->launched) all += n + " "; return all; }());
    // A warm-up pass and the run: every plan kernel, in plan order, twice.
    REQUIRE(journal->launched.size() == 2 * kernels);
    for (size_t i = 0; i < kernels; ++i) CHECK(journal->launched[i] == journal->launched[kernels + i]);
    CHECK(journal->uploads >= 1);
    CHECK(journal->downloads >= 1);
  }
  // Timed: every plan kernel launched and timed by the device's own timers, predictions beside.
  gpusim::TimingOptions t;
  t.repeat = 2;
  auto rep = prog->time({{gpusim::DType::kFloat32, {4, 8}, x.data(), x.size() * 4}}, t);
  REQUIRE(rep);
  CHECK(rep->backend == "tabledev");
  CHECK(rep->device_name == "table device");
  REQUIRE(rep->kernels.size() == kernels);
  for (const auto& k : rep->kernels) {
    INFO(k.name);
    CHECK(k.predicted_us.has_value());
    CHECK(k.measured_us == Approx(k.cls == "gemm" ? 7.5 : 1.0));
  }
}

TEST_CASE("a backend plugin is refused with the field and the fix", "[backend][plugin][errors]") {
  auto journal = std::make_shared<Journal>();
  be::BackendPlugin old = table_plugin(journal, {});
  old.api_version = GPUSIM_BACKEND_API_VERSION + 1;
  auto e = be::register_backend(old);
  REQUIRE_FALSE(e);
  CHECK_THAT(e.error().message, Catch::Contains("built against backend API version 2, this gpusim has 1; rebuild"));
  be::BackendPlugin vk = table_plugin(journal, {});
  vk.name = "vulkan";
  REQUIRE_FALSE(be::register_backend(vk));
  CHECK_THAT(be::register_backend(vk).error().message, Catch::Contains("is one of gpusim's own backends"));
  be::BackendPlugin bad = table_plugin(journal, {});
  bad.name = "My Device";
  CHECK_THAT(be::register_backend(bad).error().message, Catch::Contains("backend plugin name \"My Device\": give 1 to 64"));
  be::BackendPlugin no_open = table_plugin(journal, {});
  no_open.open = nullptr;
  CHECK_THAT(be::register_backend(no_open).error().message, Catch::Contains("open is not set"));
  REQUIRE(be::register_backend(table_plugin(journal, {})));
  CHECK_THAT(be::register_backend(table_plugin(journal, {})).error().message, Catch::Contains("registered already"));
  REQUIRE(be::unregister_backend("tabledev"));
  auto gone = be::unregister_backend("tabledev");
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == gpusim::ErrorCode::kNotFound);
  // Unregistered, the name is no backend again.
  const gpusim::Session s;
  gpusim::CompileOptions o;
  o.backend = "tabledev";
  CHECK_FALSE(gpusim::check_compile_options(o));
}
