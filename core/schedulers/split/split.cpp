// split: top-down. Fuse everything the passes allow, then split: each round proposes, for every
// fusion still taken, the plan without it, and drops every fusion whose removal made the plan
// faster (a kernel that grew past what the device does well: too many registers or too little
// parallelism), until no split helps. No mainstream compiler searches in this direction.
#include "core/schedulers/registry.h"

namespace gpusim::schedulers {
namespace {

class Split : public Scheduler {
 public:
  explicit Split(const FusionSpace& s) : cur_(s.candidates().size(), 1) {}
  std::string_view name() const override { return "split"; }

  Proposals propose() override {
    if (done_) return {};
    if (!scored_) return Proposals{{cur_}, nullptr, {}};
    flips_.clear();
    std::vector<Decision> batch;
    for (size_t c = 0; c < cur_.size(); ++c) {
      if (!cur_[c]) continue;
      Decision d = cur_;
      d[c] = 0;
      flips_.push_back(c);
      batch.push_back(std::move(d));
    }
    if (batch.empty()) done_ = true;
    return Proposals{std::move(batch), nullptr, {}};
  }

  void report(const std::vector<double>& scores) override {
    if (!scored_) {
      scored_ = true;
      cur_score_ = scores.at(0);
      return;
    }
    size_t best = scores.size();
    for (size_t i = 0; i < scores.size(); ++i) {
      if (scores[i] < cur_score_ - 1e-9 && (best == scores.size() || scores[i] < scores[best])) best = i;
    }
    if (best == scores.size()) {
      done_ = true;
      return;
    }
    cur_[flips_[best]] = 0;  // the most profitable split; the next round re-evaluates the rest
    cur_score_ = scores[best];
  }

 private:
  Decision cur_;
  double cur_score_ = 0;
  bool scored_ = false;
  bool done_ = false;
  std::vector<size_t> flips_;
};

}  // namespace

std::unique_ptr<Scheduler> make_split(const FusionSpace& s, const SearchOptions&) { return std::make_unique<Split>(s); }

}  // namespace gpusim::schedulers
