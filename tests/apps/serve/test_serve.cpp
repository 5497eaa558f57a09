// gpusim serve (apps/serve/service.h): real HTTP requests against a server on a free loopback port.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "gpusim/gpusim.h"
#include "apps/serve/running.h"
#include "service.h"
#include "support/onnx_builder.h"

namespace gpusim {
namespace {

using nlohmann::json;

using test::file_bytes;
using test_serve::error_message;
using test_serve::Running;
using test_serve::small_service;

// Standard base64 with padding, as a client sends "model_base64".
std::string base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    const size_t n = std::min<size_t>(3, in.size() - i);
    uint32_t v = 0;
    for (size_t j = 0; j < 3; ++j) v = (v << 8) | (j < n ? static_cast<unsigned char>(in[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(v >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

}  // namespace

TEST_CASE("serve: /healthz, /openapi.json (the file in the repo) and unknown paths", "[serve]") {
  Running s(small_service());
  auto c = s.client();
  auto h = c.Get("/healthz");
  REQUIRE(h);
  CHECK(h->status == 200);
  CHECK(json::parse(h->body).at("status") == "ok");
  auto doc = c.Get("/openapi.json");
  REQUIRE(doc);
  CHECK(doc->status == 200);
  const json api = json::parse(doc->body);
  CHECK(api == json::parse(file_bytes(test::source_dir() + "/apps/serve/openapi.json")));
  CHECK(api.at("openapi").get<std::string>().rfind("3.", 0) == 0);
  for (const char* path : {"/healthz", "/openapi.json", "/v1/profiles", "/v1/profiles/{name}", "/v1/models", "/v1/predict",
                           "/v1/compare", "/v1/plan", "/v1/validate", "/v1/generate"}) {
    CHECK(api.at("paths").contains(path));
  }
  auto none = c.Get("/v1/nope");
  REQUIRE(none);
  CHECK(none->status == 404);
  CHECK_THAT(error_message(none), Catch::Contains("GET /v1/nope: no such endpoint"));
}

TEST_CASE("serve: a model uploaded once is predicted by id, and the answers are the library documents", "[serve]") {
  Running s(small_service());
  auto c = s.client();
  const std::string path = test::source_dir() + "/models/resnet50.onnx";
  const std::string bytes = file_bytes(path);
  auto up = c.Post("/v1/models", bytes, "application/octet-stream");
  REQUIRE(up);
  REQUIRE(up->status == 200);
  const json model = json::parse(up->body);
  CHECK(model.at("model_id") == content_hash(bytes));
  CHECK(model.at("imported") == true);

  const Session session;
  auto m = session.open_model_bytes(bytes, "model.onnx");
  REQUIRE(m);
  auto gpu = session.gpu("nvidia-t4");
  REQUIRE(gpu);
  PredictRequest req;
  req.dtype = DType::kFloat16;
  auto want = session.predict(*m, session.target(*gpu, TileSpace::kGenerated), req);
  REQUIRE(want);

  const json body = {{"model_id", model.at("model_id")}, {"gpu", "nvidia-t4"}, {"dtype", "fp16"}};
  auto p = c.Post("/v1/predict", body.dump(), "application/json");
  REQUIRE(p);
  REQUIRE(p->status == 200);
  CHECK(json::parse(p->body) == json::parse(prediction_document(*want, *gpu)));
  // The same model in the body, raw or base64-free JSON, answers the same.
  auto raw = c.Post("/v1/predict?gpu=nvidia-t4&dtype=fp16", bytes, "application/octet-stream");
  REQUIRE(raw);
  REQUIRE(raw->status == 200);
  CHECK(json::parse(raw->body) == json::parse(p->body));

  auto cmp = c.Post("/v1/compare", json{{"model_id", model.at("model_id")}, {"gpus", {"nvidia-t4", "amd-mi300x"}}}.dump(),
                    "application/json");
  REQUIRE(cmp);
  REQUIRE(cmp->status == 200);
  CHECK(json::parse(cmp->body).at("gpus").size() == 2);
  // A language model's description compares its generation, as `gpusim compare` does.
  auto gen = c.Post("/v1/compare", json{{"llm", "llama-2-7b"}, {"gpus", {"nvidia-rtx-3060", "nvidia-rtx-4090"}},
                                        {"weights", "Q4_0"}, {"prompt", 64}, {"generate", 8}}.dump(),
                    "application/json");
  REQUIRE(gen);
  REQUIRE(gen->status == 200);
  const json gdoc = json::parse(gen->body);
  CHECK(gdoc.at("schema") == "gpusim.compare-generation/1");
  REQUIRE(gdoc.at("gpus").size() == 2);
  CHECK(gdoc["gpus"][1].at("gpu") == "nvidia-rtx-4090");
  CHECK(gdoc["gpus"][1].at("ttft_us").get<double>() < gdoc["gpus"][0].at("ttft_us").get<double>());
  // A generation's field on a graph, and a graph's on a description, name themselves.
  auto stray = c.Post("/v1/compare", json{{"model_id", model.at("model_id")}, {"gpus", {"nvidia-t4"}}, {"prompt", 64}}.dump(),
                      "application/json");
  REQUIRE(stray);
  CHECK(stray->status == 400);
  CHECK_THAT(error_message(stray), Catch::Contains("\"prompt\" applies to a language model's generation"));
  auto graph_field = c.Post("/v1/compare", json{{"llm", "llama-2-7b"}, {"gpus", {"nvidia-t4"}}, {"dtype", "fp16"}}.dump(),
                            "application/json");
  REQUIRE(graph_field);
  CHECK(graph_field->status == 400);
  CHECK_THAT(error_message(graph_field), Catch::Contains("\"dtype\" applies to an ONNX graph or decoder"));
  auto plan = c.Post("/v1/plan", json{{"model_id", model.at("model_id")}, {"gpu", "nvidia-t4"}, {"top", 2}}.dump(),
                     "application/json");
  REQUIRE(plan);
  REQUIRE(plan->status == 200);
  const json plans = json::parse(plan->body);
  CHECK(plans.at("schema") == "gpusim.plan-search/1");
  CHECK(plans.at("plans").size() <= 2);
  // The plan it returned scores through /v1/predict.
  auto scored = c.Post("/v1/predict",
                       json{{"model_id", model.at("model_id")}, {"gpu", "nvidia-t4"}, {"plan", plans["plans"][0]["plan"]}}.dump(),
                       "application/json");
  REQUIRE(scored);
  REQUIRE(scored->status == 200);
  CHECK(json::parse(scored->body).at("total_us").get<double>() ==
        Approx(plans["plans"][0]["total_us"].get<double>()).epsilon(1e-9));
  // "host" scales a framework runtime's host time as the library does; a path is never read.
  req.runtime = "pytorch-eager";
  req.host = "windows";
  auto on_windows = session.predict(*m, session.target(*gpu, TileSpace::kLibrary), req);
  REQUIRE(on_windows);
  auto hp = c.Post("/v1/predict", json{{"model_id", model.at("model_id")}, {"gpu", "nvidia-t4"}, {"dtype", "fp16"},
                                       {"runtime", "pytorch-eager"}, {"host", "windows"}}.dump(),
                   "application/json");
  REQUIRE(hp);
  REQUIRE(hp->status == 200);
  CHECK(json::parse(hp->body) == json::parse(prediction_document(*on_windows, *gpu)));
  CHECK(json::parse(hp->body).at("host") == "windows");
  for (const char* bad : {"../../runtimes/hosts/windows.yaml", "os=plan9", "windwos"}) {
    INFO(bad);
    auto r = c.Post("/v1/predict", json{{"model_id", model.at("model_id")}, {"gpu", "nvidia-t4"},
                                        {"runtime", "pytorch-eager"}, {"host", bad}}.dump(),
                    "application/json");
    REQUIRE(r);
    CHECK(r->status / 100 == 4);
    CHECK(r->body.find("host") != std::string::npos);
  }
}

TEST_CASE("serve: symbolic dims, profiles, YAML profiles and validate", "[serve]") {
  serve::ServiceOptions o = small_service();
  o.truth = test::source_dir() + "/tests/data/truth/neusight-sample";
  Running s(o);
  auto c = s.client();
  const std::string bert = file_bytes(test::source_dir() + "/models/bert_base_seq128.onnx");
  auto up = c.Post("/v1/models", bert, "application/octet-stream");
  REQUIRE(up);
  REQUIRE(up->status == 200);
  const json model = json::parse(up->body);
  CHECK(model.at("imported") == false);  // it needs its batch dim
  CHECK_THAT(model.at("note").get<std::string>(), Catch::Contains("batch"));
  auto p = c.Post("/v1/predict", json{{"model_id", model.at("model_id")}, {"gpu", "nvidia-l4"}, {"dims", {{"batch", 2}}}}.dump(),
                  "application/json");
  REQUIRE(p);
  CHECK(p->status == 200);
  auto q = c.Post("/v1/predict?gpu=nvidia-l4&dim.batch=2", bert, "application/octet-stream");
  REQUIRE(q);
  CHECK(q->status == 200);
  CHECK(json::parse(q->body).at("total_us") == json::parse(p->body).at("total_us"));

  auto list = c.Get("/v1/profiles");
  REQUIRE(list);
  CHECK(json::parse(list->body).at("profiles").size() >= 30);
  auto one = c.Get("/v1/profiles/nvidia-h200");
  REQUIRE(one);
  CHECK(json::parse(one->body).at("schema") == "gpusim.profile/1");
  auto missing = c.Get("/v1/profiles/no-such-gpu");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  CHECK_THAT(error_message(missing), Catch::Contains("no-such-gpu"));

  const std::string yaml = "schema: gpusim.profile/1\nname: my-l4\nextends: nvidia-l4\ndisplay_name: My L4\n";
  auto mine = c.Post("/v1/predict", json{{"model_id", model.at("model_id")}, {"gpu_yaml", yaml}, {"dims", {"batch=2"}}}.dump(),
                     "application/json");
  REQUIRE(mine);
  REQUIRE(mine->status == 200);
  CHECK(json::parse(mine->body).at("gpu") == "my-l4");

  auto v = c.Post("/v1/validate", json::object().dump(), "application/json");
  REQUIRE(v);
  REQUIRE(v->status == 200);
  const json rep = json::parse(v->body);
  CHECK(rep.at("schema") == "gpusim.validate/1");
  CHECK(rep.at("records").get<int>() > 0);
}

TEST_CASE("serve: a language model's generation is the library's document, and bad requests name the field", "[serve][llm]") {
  Running s(small_service());
  auto c = s.client();
  const json req = {{"llm", "llama-2-7b"}, {"gpu", "nvidia-rtx-3060"}, {"weights", "Q4_0"}, {"prompt", 128}, {"generate", 16}};
  auto g = c.Post("/v1/generate", req.dump(), "application/json");
  REQUIRE(g);
  REQUIRE(g->status == 200);
  const json doc = json::parse(g->body);
  CHECK(doc.at("schema") == "gpusim.generation/1");
  CHECK(doc.at("weights") == "Q4_0");
  // The same figures as the library's.
  auto spec = load_llm_spec(test::source_dir() + "/models/llm/llama-2-7b.yaml");
  REQUIRE(spec);
  auto gpu = find_profile("nvidia-rtx-3060", {test::source_dir() + "/gpu_profiles"});
  REQUIRE(gpu);
  GenerationOptions o;
  o.weights = "Q4_0";
  o.prompt = 128;
  o.generate = 16;
  auto lib = Session().generate(*spec, library_target(*gpu), o);
  REQUIRE(lib);
  CHECK(doc.at("ttft_us").get<double>() == Approx(lib->ttft_us).epsilon(1e-12));
  CHECK(doc.at("token_mean_us").get<double>() == Approx(lib->token_mean_us).epsilon(1e-12));
  auto both = c.Post("/v1/generate", json{{"llm", "llama-2-7b"}, {"llm_text", "x"}, {"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(both);
  CHECK(both->status == 400);
  CHECK_THAT(error_message(both), Catch::Contains("\"llm\"") && Catch::Contains("\"llm_text\""));
  auto path = c.Post("/v1/generate", json{{"llm", "/etc/passwd"}, {"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(path);
  CHECK(path->status == 400);
  CHECK_THAT(error_message(path), Catch::Contains("\"llm\": \"/etc/passwd\" is not a name"));
  auto none = c.Post("/v1/generate", json{{"llm", "llama-9-1b"}, {"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(none);
  CHECK(none->status == 404);
  auto tokens = c.Post("/v1/generate", json{{"llm", "llama-2-7b"}, {"gpu", "nvidia-t4"}, {"prompt", "many"}}.dump(), "application/json");
  REQUIRE(tokens);
  CHECK(tokens->status == 400);
  CHECK_THAT(error_message(tokens), Catch::Contains("\"prompt\" must be an integer"));
  auto range = c.Post("/v1/generate", json{{"llm", "llama-2-7b"}, {"gpu", "nvidia-t4"}, {"batch", 0}}.dump(), "application/json");
  REQUIRE(range);
  CHECK(range->status == 400);
  CHECK_THAT(error_message(range), Catch::Contains("batch: 0 is out of range"));
}

TEST_CASE("serve: an ONNX decoder with a KV cache generates by id by base64 or as the body like the library", "[serve][llm]") {
  Running s(small_service());
  auto c = s.client();
  const std::string path = test::source_dir() + "/models/tiny_llama_decoder.onnx";
  const std::string bytes = file_bytes(path);
  auto up = c.Post("/v1/models", bytes, "application/octet-stream");
  REQUIRE(up);
  REQUIRE(up->status == 200);
  const json id = json::parse(up->body).at("model_id");

  const Session session;
  auto gpu = session.gpu("nvidia-rtx-3060");
  REQUIRE(gpu);
  GenerationOptions o;
  o.prompt = 64;
  o.generate = 8;
  o.batch = 2;
  PredictRequest req;
  req.dtype = DType::kFloat32;
  auto lib = session.generate_decoder(path, session.target(*gpu, TileSpace::kGenerated), o, req);
  REQUIRE(lib);

  const json body = {{"model_id", id}, {"model_name", "tiny.onnx"}, {"gpu", "nvidia-rtx-3060"}, {"prompt", 64},
                     {"generate", 8},  {"batch", 2},                {"dtype", "fp32"}};
  auto g = c.Post("/v1/generate", body.dump(), "application/json");
  REQUIRE(g);
  REQUIRE(g->status == 200);
  const json doc = json::parse(g->body);
  CHECK(doc.at("schema") == "gpusim.generation/1");
  CHECK(doc.at("model") == "tiny.onnx");
  CHECK(doc.at("backend") == "onnx");
  CHECK(doc.at("ttft_us").get<double>() == Approx(lib->ttft_us).epsilon(1e-12));
  CHECK(doc.at("token_mean_us").get<double>() == Approx(lib->token_mean_us).epsilon(1e-12));
  CHECK(doc.at("memory").at("kv_cache_bytes").get<int64_t>() == lib->kv_cache_bytes);
  // The bytes as the body with the options in the query, and base64 in JSON, answer the same.
  auto raw = c.Post("/v1/generate?gpu=nvidia-rtx-3060&prompt=64&generate=8&batch=2&dtype=fp32&model_name=tiny.onnx", bytes,
                    "application/octet-stream");
  REQUIRE(raw);
  REQUIRE(raw->status == 200);
  CHECK(json::parse(raw->body).at("ttft_us") == doc.at("ttft_us"));
  json b64 = body;
  b64.erase("model_id");
  b64["model_base64"] = base64(bytes);
  auto enc = c.Post("/v1/generate", b64.dump(), "application/json");
  REQUIRE(enc);
  REQUIRE(enc->status == 200);
  CHECK(json::parse(enc->body).at("token_mean_us") == doc.at("token_mean_us"));

  // llama.cpp's options name themselves; a graph without a cache says what a generation needs.
  auto weights = c.Post("/v1/generate", json{{"model_id", id}, {"gpu", "nvidia-t4"}, {"weights", "Q4_0"}}.dump(), "application/json");
  REQUIRE(weights);
  CHECK(weights->status == 400);
  CHECK_THAT(error_message(weights), Catch::Contains("\"weights\" does not apply to an ONNX decoder's generation"));
  auto dtype = c.Post("/v1/generate", json{{"llm", "llama-2-7b"}, {"gpu", "nvidia-t4"}, {"dtype", "fp16"}}.dump(), "application/json");
  REQUIRE(dtype);
  CHECK(dtype->status == 400);
  CHECK_THAT(error_message(dtype), Catch::Contains("\"dtype\" applies to an ONNX graph or decoder"));
  auto no_cache = c.Post("/v1/generate?gpu=nvidia-t4&model_name=resnet50.onnx",
                         file_bytes(test::source_dir() + "/models/resnet50.onnx"), "application/octet-stream");
  REQUIRE(no_cache);
  CHECK(no_cache->status == 400);
  CHECK_THAT(error_message(no_cache), Catch::Contains("resnet50.onnx: no past_key_values inputs"));
  auto gone = c.Post("/v1/generate", json{{"model_id", "0123"}, {"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(gone);
  CHECK(gone->status == 404);
  // A description still takes a runtime by name, and refuses one the server does not have.
  auto rt = c.Post("/v1/generate", json{{"llm", "llama-2-7b"}, {"gpu", "nvidia-t4"}, {"runtime", "no-such-runtime"}}.dump(),
                   "application/json");
  REQUIRE(rt);
  CHECK(rt->status == 404);
}

TEST_CASE("serve: bad requests get JSON errors with the field, the value and the fix", "[serve]") {
  serve::ServiceOptions o = small_service();
  o.max_body_bytes = 1 << 20;
  o.max_model_bytes = 40000;  // resnet50.onnx (31.7 kB) fits, mobilenet_v2.onnx (49.4 kB) does not
  Running s(o);
  auto c = s.client();
  auto not_json = c.Post("/v1/predict", "{not json", "application/json");
  REQUIRE(not_json);
  CHECK(not_json->status == 400);
  CHECK_THAT(error_message(not_json), Catch::Contains("the request body is not valid JSON"));
  auto no_model = c.Post("/v1/predict", json{{"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(no_model);
  CHECK(no_model->status == 400);
  CHECK_THAT(error_message(no_model), Catch::Contains("no model: give \"model_id\""));
  auto unknown_id = c.Post("/v1/predict", json{{"model_id", "0123"}, {"gpu", "nvidia-t4"}}.dump(), "application/json");
  REQUIRE(unknown_id);
  CHECK(unknown_id->status == 404);
  CHECK_THAT(error_message(unknown_id), Catch::Contains("model_id \"0123\" is not on this server"));
  const std::string resnet = file_bytes(test::source_dir() + "/models/resnet50.onnx");
  auto bad_gpu = c.Post("/v1/predict?gpu=no-such-gpu", resnet, "application/octet-stream");
  REQUIRE(bad_gpu);
  CHECK(bad_gpu->status == 404);
  auto path_gpu = c.Post("/v1/predict?gpu=/etc/passwd", resnet, "application/octet-stream");
  REQUIRE(path_gpu);
  CHECK(path_gpu->status == 400);
  CHECK_THAT(error_message(path_gpu), Catch::Contains("is not a name; the server takes names only, never paths"));
  auto wrong_type = c.Post("/v1/plan", json{{"gpu", 3}}.dump(), "application/json");
  REQUIRE(wrong_type);
  CHECK(wrong_type->status == 400);
  auto bad_top = c.Post("/v1/plan?gpu=nvidia-t4&top=0", resnet, "application/octet-stream");
  REQUIRE(bad_top);
  CHECK(bad_top->status == 400);
  CHECK_THAT(error_message(bad_top), Catch::Contains("\"top\": 0 is out of range; give an integer from 1 to 100"));
  auto bad_dtype = c.Post("/v1/predict?gpu=nvidia-t4&dtype=fp8", resnet, "application/octet-stream");
  REQUIRE(bad_dtype);
  CHECK(bad_dtype->status == 400);
  auto bad_tiles = c.Post("/v1/predict?gpu=nvidia-t4&tiles=menu", resnet, "application/octet-stream");
  REQUIRE(bad_tiles);
  CHECK(bad_tiles->status == 400);
  CHECK_THAT(error_message(bad_tiles), Catch::Contains("\"tiles\": \"menu\" is not a tile space; expected generated or library"));
  auto bad_tf32 = c.Post("/v1/predict?gpu=nvidia-t4&allow_tf32=yes", resnet, "application/octet-stream");
  REQUIRE(bad_tf32);
  CHECK(bad_tf32->status == 400);
  CHECK_THAT(error_message(bad_tf32), Catch::Contains("query parameter allow_tf32=\"yes\" is not true or false"));
  auto bad_tf32_json = c.Post("/v1/plan", json{{"model_name", "x"}, {"gpu", "nvidia-t4"}, {"allow_tf32", 1}}.dump(), "application/json");
  REQUIRE(bad_tf32_json);
  CHECK(bad_tf32_json->status == 400);
  // TF32 allowed: the fp32 GEMMs and convolutions on an Ampere card priced as TF32, and said so.
  auto tf32 = c.Post("/v1/predict?gpu=nvidia-a100-40gb&allow_tf32=true", resnet, "application/octet-stream");
  REQUIRE(tf32);
  REQUIRE(tf32->status == 200);
  int tf32_kernels = 0;
  const json tf32_doc = json::parse(tf32->body);
  for (const auto& k : tf32_doc["kernels"]) tf32_kernels += k["tf32"].get<bool>();
  CHECK(tf32_kernels > 0);
  CHECK_THAT(tf32_doc["tiles"].get<std::string>(), Catch::Contains("TF32 allowed"));
  auto lib = c.Post("/v1/predict?gpu=nvidia-t4&tiles=library", resnet, "application/octet-stream");
  REQUIRE(lib);
  CHECK(lib->status == 200);
  CHECK(nlohmann::json::parse(lib->body)["tiles"] == "library (the cost model's whole menu)");
  auto garbage = c.Post("/v1/models", std::string(1000, 'x'), "application/octet-stream");
  REQUIRE(garbage);
  CHECK(garbage->status == 400);
  CHECK_THAT(error_message(garbage), Catch::StartsWith("model.onnx: "));
  // Limits: a model over --max-model-mb, a body over --max-body-mb.
  auto big_model = c.Post("/v1/models", file_bytes(test::source_dir() + "/models/mobilenet_v2.onnx"),
                          "application/octet-stream");
  REQUIRE(big_model);
  CHECK(big_model->status == 413);
  CHECK_THAT(error_message(big_model), Catch::Contains("takes models up to 40000 bytes"));
  auto big_body = c.Post("/v1/predict", std::string(2 << 20, ' '), "application/json");
  REQUIRE(big_body);
  CHECK(big_body->status == 413);
  CHECK_THAT(error_message(big_body), Catch::Contains("over this server's limit of 1048576 bytes"));
  auto v = c.Post("/v1/validate", "{}", "application/json");
  REQUIRE(v);
  CHECK(v->status == 400);
  CHECK_THAT(error_message(v), Catch::Contains("no measurements"));
}

TEST_CASE("serve: a request past the time limit is 504, a full queue 503", "[serve]") {
  serve::ServiceOptions o;
  o.workers = 1;
  o.queue = 1;
  o.request_timeout_s = 2.0;
  Running s(o);
  const std::string unet = file_bytes(test::source_dir() + "/models/sd15_unet_64x64.onnx");
  // 100,000 sampled plans of the UNet take several seconds (about 6 s on a fast core): past the
  // limit. The first busies the one worker, the second waits in the queue, the third is turned away.
  // The server's own gauges say when each has got there, so no step depends on how fast this
  // machine is.
  const std::string slow = "/v1/plan?gpu=nvidia-rtx-3060&dim.batch=1&scheduler=random&samples=100000";
  auto gauge = [&](const std::string& name) {
    auto m = s.client().Get("/metrics");
    if (!m) return -1L;
    const auto at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1L : std::stol(m->body.substr(at + name.size() + 2));
  };
  auto wait_for = [&](const std::string& name, long want) {
    for (int i = 0; i < 3000 && gauge(name) != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return gauge(name) == want;
  };
  std::optional<httplib::Result> first, second;
  std::thread a([&] { first.emplace(s.client().Post(slow, unet, "application/octet-stream")); });
  const bool busy = wait_for("gpusim_workers_busy", 1);
  std::thread b([&] { second.emplace(s.client().Post(slow, unet, "application/octet-stream")); });
  const bool queued = wait_for("gpusim_queue_depth", 1);
  auto third = s.client().Post(slow, unet, "application/octet-stream");
  a.join();
  b.join();
  REQUIRE(busy);
  REQUIRE(queued);
  REQUIRE(third);
  CHECK(third->status == 503);
  CHECK(third->get_header_value("Retry-After") == "1");
  CHECK_THAT(error_message(third), Catch::Contains("the server is busy"));
  REQUIRE(first);
  REQUIRE(*first);
  CHECK((*first)->status == 504);
  CHECK_THAT(error_message(*first), Catch::Contains("ran past the server's limit of 2 s"));
  REQUIRE(second);
  REQUIRE(*second);
  CHECK((*second)->status == 504);
}

TEST_CASE("gpusim serve prints its port and stops gracefully on SIGTERM", "[serve][cli]") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl(GPUSIM_BINARY, GPUSIM_BINARY, "serve", "--port", "0", "--workers", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char ch;
  while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  INFO(line);
  const auto colon = line.rfind(':');
  REQUIRE(line.find("listening on http://127.0.0.1:") != std::string::npos);
  const int port = std::stoi(line.substr(colon + 1));
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/healthz");
  REQUIRE(h);
  CHECK(h->status == 200);
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::string rest;
  while (::read(out[0], &ch, 1) == 1) rest += ch;
  ::close(out[0]);
  CHECK_THAT(rest, Catch::Contains("gpusim serve: stopped"));
}

}  // namespace gpusim
