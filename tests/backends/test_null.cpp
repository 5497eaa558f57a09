// The null backend (backends/null): the executor's logic with no device. Plans compile (codegen
// writes every kernel), launch in order, time from a latency table and download, with no GPU,
// driver or lavapipe.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend.h"
#include "executor.h"
#include "gpusim/onnx_import.h"
#include "gpusim/gpusim.h"
#include "null/null_backend.h"
#include "support/device_check.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

using namespace gpusim;

TEST_CASE("the null backend runs a bundled model's plan: every kernel compiled, launched in order and timed",
          "[backend][null]") {
  const Session s;
  ModelOptions mo;
  mo.dims = {"batch=1"};
  auto m = s.open_model(test::source_dir() + "/models/mobilenet_v2.onnx", mo);
  REQUIRE(m);
  REQUIRE(setenv("GPUSIM_NULL_LATENCY_US", "conv=4.5,gemm=7", 1) == 0);
  CompileOptions o;
  o.backend = "null";
  o.gpu = *s.gpu("nvidia-t4");
  auto prog = s.compile(*m, o);
  unsetenv("GPUSIM_NULL_LATENCY_US");
  REQUIRE(prog);
  TimingOptions t;
  t.repeat = 3;
  auto rep = prog->time({}, t);
  REQUIRE(rep);
  CHECK(rep->backend == "null");
  CHECK(rep->device_name == "null device");
  CHECK(rep->compiled + rep->cache_hits >= 1);
  REQUIRE(static_cast<int>(rep->kernels.size()) == rep->plan_kernels);
  REQUIRE(rep->plan_kernels == static_cast<int>(prog->plan().kernels.size()));
  double total = 0;
  for (const auto& k : rep->kernels) {
    INFO(k.name << " (" << k.cls << ")");
    CHECK(k.predicted_us.has_value());
    if (!k.device) continue;
    CHECK(k.launches >= 1);
    total += k.measured_us;
  }
  CHECK(rep->total_us == Approx(total));
  // Every output comes back with its shape (its values mean nothing: the device computes nothing).
  REQUIRE(rep->outputs.size() == prog->outputs().size());
  for (size_t i = 0; i < rep->outputs.size(); ++i) CHECK(rep->outputs[i].shape == prog->outputs()[i].shape);
}

TEST_CASE("the null backend records what the executor asks, in plan order", "[backend][null]") {
  auto journal = std::make_shared<backend::null::Journal>();
  backend::null::Options o;
  o.latency_us = {{"gemm", 7.5}, {"gemm_big", 9.0}};
  o.journal = journal;
  auto dev = backend::null::make(o);
  REQUIRE(dev->info().backend == "null");
  backend::KernelSource src;
  src.name = "gemm_big_1";
  src.code = "extern \"C\" __global__ void gemm_big_1(float* b0) {}";
  src.buffers = 1;
  auto k = dev->compile(src);
  REQUIRE(k);
  auto buf = dev->allocate(16);
  REQUIRE(buf);
  const float x[4] = {1, 2, 3, 4};
  REQUIRE(dev->upload(*buf, x, sizeof x));
  const backend::Buffer args[] = {*buf};
  auto slot = dev->launch(*k, {1, 1, 1}, args, true);
  REQUIRE(slot);
  REQUIRE(dev->synchronize());
  auto times = dev->read_timers();
  REQUIRE(times);
  CHECK(times->at(static_cast<size_t>(*slot)) == 9.0);  // the longest matching prefix
  float y[4] = {};
  REQUIRE(dev->download(*buf, y, sizeof y));
  CHECK(y[3] == 4.0f);
  CHECK_FALSE(dev->download(*buf, y, 32));  // past the buffer's end: refused, not read
  CHECK(journal->launched == std::vector<std::string>{"gemm_big_1"});
  CHECK(journal->uploads == 1);
  CHECK(journal->downloads == 1);
}

TEST_CASE("the null backend's latency table is PREFIX=MICROSECONDS, and anything else is named", "[backend][null][errors]") {
  auto t = backend::null::parse_latency_table("gemm=7.5,ew_=0.5,");
  REQUIRE(t);
  CHECK(t->at("gemm") == 7.5);
  CHECK(t->at("ew_") == 0.5);
  for (const char* bad : {"gemm", "=5", "gemm=-1", "gemm=abc", "gemm=1e999"}) {
    INFO(bad);
    auto e = backend::null::parse_latency_table(bad);
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error().message, Catch::Contains("is not PREFIX=MICROSECONDS"));
  }
  REQUIRE(setenv("GPUSIM_NULL_LATENCY_US", "conv:4", 1) == 0);
  auto dev = backend::open("null", 0);
  unsetenv("GPUSIM_NULL_LATENCY_US");
  REQUIRE_FALSE(dev);
  CHECK_THAT(dev.error().message, Catch::StartsWith("GPUSIM_NULL_LATENCY_US: null backend latency table: \"conv:4\""));
  CHECK_FALSE(backend::open("null", 1));
}

TEST_CASE("gpusim run --backend null runs without a device, and calibrate refuses it", "[cli][null]") {
  const test::Run r = test::run_gpusim("run " + test::source_dir() + "/models/mobilenet_v2.onnx --backend null --gpu t4 --repeat 1");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("null device"));
  const test::Run c = test::run_gpusim("calibrate --backend null");
  CHECK(c.rc == 2);
  CHECK_THAT(c.out, Catch::Contains("--backend null has no device to measure"));
}

TEST_CASE("a device and the CPU reference run behind one Executor interface", "[backend][null]") {
  test::OnnxBuilder b;
  b.input("x", 1, {test::Dim{int64_t{4}}, test::Dim{int64_t{8}}});
  b.initializer("w", 1, {8, 3});
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Relu", {"h"}, {"y"}, "relu");
  b.output("y");
  auto g = import_onnx(b.write("executors.onnx"));
  REQUIRE(g);
  Plan plan;
  for (int i = 0; i < 2; ++i) {
    PlanKernel k;
    k.nodes = {i};
    plan.kernels.push_back(k);
  }
  classify_kernels(*g, plan);
  exec::RunOptions o;
  o.repeat = 2;
  o.seed = 7;
  // The reference: one timed unit per node that took time, outputs in fp64, no device.
  auto ref = exec::reference_executor();
  CHECK(ref->is_reference());
  CHECK(ref->device() == nullptr);
  CHECK(ref->info().name == "cpu reference");
  CHECK(ref->progress_units("timed run") == "nodes");
  auto r = ref->run(*g, plan, {}, o);
  REQUIRE(r);
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].shape() == Shape{4, 3});
  for (const exec::KernelTiming& k : r->kernels) {
    CHECK(k.plan_kernel == -1);
    CHECK(k.node >= 0);
    CHECK_FALSE(k.device);
    CHECK(k.samples_us.size() == 2);
  }
  CHECK_THAT(r->notes.back(), Catch::Contains("1 inputs filled from seed 7"));
  // The null device: the same call, one timing per plan kernel, times from its table.
  backend::null::Options no;
  no.latency_us = {{"", 2.0}};
  auto dev = exec::device_executor(backend::null::make(no));
  CHECK_FALSE(dev->is_reference());
  REQUIRE(dev->device() != nullptr);
  CHECK(dev->progress_units("compile") == "kernels");
  auto d = dev->run(*g, plan, {}, o);
  REQUIRE(d);
  REQUIRE(d->kernels.size() == 2);
  for (size_t k = 0; k < 2; ++k) CHECK(d->kernels[k].plan_kernel == static_cast<int>(k));
  CHECK(d->outputs[0].shape() == r->outputs[0].shape());
  // One run for its outputs: repeat 0 runs the reference once.
  o.repeat = 0;
  auto once = ref->run(*g, plan, {}, o);
  REQUIRE(once);
  for (const exec::KernelTiming& k : once->kernels) CHECK(k.samples_us.size() == 1);
}

TEST_CASE("the run path carries buffers in their own dtype: the caller's bytes reach the device and come back as they are",
          "[executor][null]") {
  // y is a view of x, and a kernel reads x: x's device buffer is y's, so y comes back as the
  // device holds x. Through fp64 a signalling NaN would come back quiet.
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT16, {test::Dim{int64_t{8}}});
  b.node("Relu", {"x"}, {"r"});
  b.initializer_i64("shape", {2}, {2, 4});
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("r");
  b.output("y");
  Session s;
  auto m = s.open_model(b.write("native_fp16.onnx"));
  REQUIRE(m);
  CompileOptions co;
  co.backend = "null";
  co.dtype = DType::kFloat16;
  auto p = s.compile(*m, co);
  REQUIRE(p);
  const std::vector<uint16_t> x = {0x7d01, 0x8000, 0x0001, 0x3c00, 0xfc00, 0x7bff, 0x0400, 0xc000};
  std::vector<uint16_t> r(8, 0xffff), y(8, 0);
  const ConstTensorView xv{DType::kFloat16, {8}, x.data(), x.size() * 2};
  REQUIRE(p->run({xv}, {{DType::kFloat16, {8}, r.data(), 16}, {DType::kFloat16, {2, 4}, y.data(), 16}}));
  CHECK(y == x);                                // bit for bit
  CHECK(r == std::vector<uint16_t>(8, 0));      // the null device computes nothing: zeros
  // An fp32 buffer for the fp16 input converts on the way (round to nearest even).
  const std::vector<float> xf = {1.0f, -2.0f, 0.5f, 65504.0f, 1.0009765625f, 0.0f, -0.0f, 3.0f};
  const ConstTensorView xfv{DType::kFloat32, {8}, xf.data(), xf.size() * 4};
  REQUIRE(p->run({xfv}, {{DType::kFloat16, {8}, r.data(), 16}, {DType::kFloat16, {2, 4}, y.data(), 16}}));
  CHECK(y == std::vector<uint16_t>{0x3c00, 0xc000, 0x3800, 0x7bff, 0x3c01, 0x0000, 0x8000, 0x4200});
  // A buffer that does not hold the input is refused by name before anything runs.
  const ConstTensorView shortv{DType::kFloat16, {8}, x.data(), 14};
  auto bad = p->run({shortv}, {{DType::kFloat16, {8}, r.data(), 16}, {DType::kFloat16, {2, 4}, y.data(), 16}});
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("run: input 0 \"x\": the buffer holds 14 bytes, fp16 [8] needs 16"));
}

TEST_CASE("integers beyond the device's int32 are refused naming the element, and weights upload from the file's data",
          "[executor][null][errors]") {
  test::OnnxBuilder b;
  b.input("i", onnx::TensorProto::INT64, {test::Dim{int64_t{3}}});
  b.node("Neg", {"i"}, {"n"});
  b.output("n");
  const std::string path = b.write("native_i64.onnx");
  auto g = import_onnx(path);
  REQUIRE(g);
  backend::null::Options no;
  auto dev = backend::null::make(no);
  const std::vector<int64_t> ok = {-5, 0, 7}, big = {1, int64_t{1} << 40, 2};
  exec::RunOptions o;
  o.repeat = 1;
  auto r = exec::run_plan(*dev, *g, test::one_kernel_per_op(*g), {{DType::kInt64, {3}, ok.data(), 24}}, o);
  REQUIRE(r);
  REQUIRE(r->outputs.at(0).buffer);  // int64 again, widened from the device's int32
  CHECK(r->outputs[0].buffer->bytes.size() == 24);
  auto e = exec::run_plan(*dev, *g, test::one_kernel_per_op(*g), {{DType::kInt64, {3}, big.data(), 24}}, o);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ErrorCode::kUnsupported);
  CHECK_THAT(e.error().message, Catch::Contains("tensor \"i\" element 1 is 1099511627776, outside the int32 range the "
                                                "device kernels use for integer tensors"));

  // A 16.8 MB fp32 weight with its data in the file: uploaded from the file's values through one
  // staging buffer (16.8 MB), not held as a second copy in fp64 (33.6 MB). On a CPU device (the
  // null device's buffers are host memory) 24 MiB of host memory allows 42.8 MB in all: the
  // weight's buffer and its staging fit; with an fp64 copy they would not.
  test::OnnxBuilder w;
  w.input("x", onnx::TensorProto::FLOAT, {test::Dim{int64_t{1}}, test::Dim{int64_t{1024}}});
  *w.graph().add_initializer() = test::f32_tensor({1024, 4096}, std::vector<float>(size_t{1024} * 4096, 0.25f));
  w.graph().mutable_initializer(0)->set_name("w");
  w.node("MatMul", {"x", "w"}, {"y"});
  w.output("y");
  const std::string wpath = w.write("native_weight.onnx");
  auto wg = import_onnx(wpath);
  REQUIRE(wg);
  auto weights = read_model_tensors(wpath);
  REQUIRE(weights);
  o.weights = &*weights;
  o.max_host_bytes = 24 << 20;
  const std::vector<float> x(1024, 1.0f);
  auto fits = exec::run_plan(*dev, *wg, test::one_kernel_per_op(*wg), {{DType::kFloat32, {1, 1024}, x.data(), 4096}}, o);
  INFO((fits ? std::string() : fits.error().message));
  REQUIRE(fits);
  CHECK(fits->outputs.at(0).buffer->bytes.size() == 4096 * 4);
  o.max_host_bytes = 12 << 20;  // 20.4 MB in all: not the weight and its staging
  auto over = exec::run_plan(*dev, *wg, test::one_kernel_per_op(*wg), {{DType::kFloat32, {1, 1024}, x.data(), 4096}}, o);
  REQUIRE_FALSE(over);
  CHECK(over.error().code == ErrorCode::kLimit);
}
