// random: samples the whole legal space reproducibly (for the Dojo): each plan takes each fusion
// candidate with a probability that is itself drawn per plan, so sparse and dense plans both
// appear. The same seed gives the same plans.
#include <random>

#include "gpusim/cancel.h"
#include "core/schedulers/registry.h"

namespace gpusim::schedulers {
namespace {

class Random : public Scheduler {
 public:
  Random(const FusionSpace& s, int samples, uint64_t seed)
      : n_(s.candidates().size()), samples_(std::max(1, samples)), rng_(seed) {}
  std::string_view name() const override { return "random"; }

  Proposals propose() override {
    if (done_) return {};
    done_ = true;
    std::vector<Decision> batch;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int i = 0; i < samples_; ++i) {
      if ((i & 255) == 0) check_cancelled();
      const double p = u(rng_);
      Decision d(n_, 0);
      for (auto& x : d) x = u(rng_) < p ? 1 : 0;
      batch.push_back(std::move(d));
    }
    return Proposals{std::move(batch), nullptr, {}};
  }
  void report(const std::vector<double>&) override {}

 private:
  size_t n_;
  int samples_;
  std::mt19937_64 rng_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Scheduler> make_random(const FusionSpace& s, const SearchOptions& o) {
  return std::make_unique<Random>(s, o.samples, o.seed);
}

}  // namespace gpusim::schedulers
