// eager: the baseline — one kernel per op, no fusion.
#include "core/schedulers/registry.h"

namespace gpusim::schedulers {
namespace {

class Eager : public Scheduler {
 public:
  explicit Eager(const FusionSpace& s) : n_(s.candidates().size()) {}
  std::string_view name() const override { return "eager"; }
  Proposals propose() override {
    if (done_) return {};
    done_ = true;
    Proposals p;
    p.decisions.push_back(Decision(n_, 0));
    return p;
  }
  void report(const std::vector<double>&) override {}

 private:
  size_t n_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Scheduler> make_eager(const FusionSpace& s, const SearchOptions&) { return std::make_unique<Eager>(s); }

}  // namespace gpusim::schedulers
