// greedy: fuse where the simulator says it saves. Each round proposes, from the current plan,
// every single fusion not yet taken (as flips of the current plan: linear time and memory in the
// number of candidates); takes all that helped, keeps the combination if it beats the best single
// one (else just that one), and stops when a round finds nothing better.
#include "core/schedulers/registry.h"

namespace gpusim::schedulers {
namespace {

class Greedy : public Scheduler {
 public:
  explicit Greedy(const FusionSpace& s) : cur_(s.candidates().size(), 0) {}
  std::string_view name() const override { return "greedy"; }

  Proposals propose() override {
    if (stage_ == Stage::kDone) return {};
    if (stage_ == Stage::kStart) {
      stage_ = Stage::kBase;
      return Proposals{{cur_}, nullptr, {}};
    }
    if (stage_ == Stage::kCombine) return Proposals{{combined_}, nullptr, {}};
    Proposals p;
    for (size_t c = 0; c < cur_.size(); ++c) {
      if (!cur_[c]) p.flips.push_back(c);
    }
    if (p.flips.empty()) {
      stage_ = Stage::kDone;
      return {};
    }
    flips_ = p.flips;
    p.base = std::make_shared<const Decision>(cur_);
    return p;
  }

  void report(const std::vector<double>& scores) override {
    if (stage_ == Stage::kBase) {
      cur_score_ = scores.at(0);
      stage_ = Stage::kFlips;
      return;
    }
    if (stage_ == Stage::kCombine) {
      if (scores.at(0) < best_single_score_) {
        cur_ = combined_;
        cur_score_ = scores.at(0);
      } else {
        cur_[best_single_] = 1;
        cur_score_ = best_single_score_;
      }
      stage_ = Stage::kFlips;
      return;
    }
    combined_ = cur_;
    best_single_score_ = cur_score_;
    bool any = false;
    for (size_t i = 0; i < scores.size(); ++i) {
      if (scores[i] < cur_score_ - 1e-9) {
        combined_[flips_[i]] = 1;
        any = true;
        if (scores[i] < best_single_score_) {
          best_single_score_ = scores[i];
          best_single_ = flips_[i];
        }
      }
    }
    stage_ = any ? Stage::kCombine : Stage::kDone;
  }

 private:
  enum class Stage { kStart, kBase, kFlips, kCombine, kDone };
  Stage stage_ = Stage::kStart;
  Decision cur_, combined_;
  size_t best_single_ = 0;  // the candidate whose flip alone helped most this round
  double cur_score_ = 0, best_single_score_ = 0;
  std::vector<size_t> flips_;
};

}  // namespace

std::unique_ptr<Scheduler> make_greedy(const FusionSpace& s, const SearchOptions&) { return std::make_unique<Greedy>(s); }

}  // namespace gpusim::schedulers
