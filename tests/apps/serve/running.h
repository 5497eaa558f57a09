// Support for the gpusim serve tests: a service on a free loopback port, and reading its errors.
#pragma once

#include <catch2/catch.hpp>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "service.h"

namespace gpusim::test_serve {

// A service on a free loopback port, stopped and joined when it goes out of scope.
struct Running {
  serve::Service svc;
  int port = 0;
  std::thread thread;
  explicit Running(serve::ServiceOptions o) : svc((o.port = 0, std::move(o))) {
    auto p = svc.bind();
    REQUIRE(p);
    port = *p;
    thread = std::thread([this] { (void)svc.run(); });
  }
  ~Running() {
    svc.stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }
};

inline serve::ServiceOptions small_service() {
  serve::ServiceOptions o;
  o.workers = 2;
  return o;
}

// The error document's message, checking the document's shape on the way.
inline std::string error_message(const httplib::Result& r) {
  const nlohmann::json j = nlohmann::json::parse(r->body);
  CHECK(j.at("schema") == "gpusim.error/1");
  return j.at("error").at("message").get<std::string>();
}

}  // namespace gpusim::test_serve
