// beam: decides the fusion candidates one at a time, in the order the passes found them (producers
// first), keeping the `beam_width` best partial plans; each step proposes, for every plan in the
// beam, the plan with and without that fusion. The simulator scores each whole plan.
#include <algorithm>
#include <numeric>

#include "gpusim/cancel.h"
#include "core/schedulers/registry.h"

namespace gpusim::schedulers {
namespace {

class Beam : public Scheduler {
 public:
  Beam(const FusionSpace& s, int width)
      : n_(s.candidates().size()), width_(static_cast<size_t>(std::max(1, width))), beam_{Decision(n_, 0)} {}
  std::string_view name() const override { return "beam"; }

  Proposals propose() override {
    if (step_ >= n_) return {};
    batch_.clear();
    for (const Decision& d : beam_) {
      check_cancelled();
      batch_.push_back(d);
      Decision with = d;
      with[step_] = 1;
      batch_.push_back(std::move(with));
    }
    return Proposals{batch_, nullptr, {}};
  }

  void report(const std::vector<double>& scores) override {
    std::vector<size_t> order(batch_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
    beam_.clear();
    for (size_t i = 0; i < order.size() && beam_.size() < width_; ++i) {
      const Decision& d = batch_[order[i]];
      if (std::find(beam_.begin(), beam_.end(), d) == beam_.end()) beam_.push_back(d);
    }
    ++step_;
  }

 private:
  size_t n_;
  size_t width_;
  size_t step_ = 0;
  std::vector<Decision> beam_, batch_;
};

}  // namespace

std::unique_ptr<Scheduler> make_beam(const FusionSpace& s, const SearchOptions& o) {
  return std::make_unique<Beam>(s, o.beam_width);
}

}  // namespace gpusim::schedulers
