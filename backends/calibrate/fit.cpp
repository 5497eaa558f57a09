#include "fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>

#include "gpusim/kernel_cost.h"

namespace gpusim::calibrate {
namespace {

double* slot(GpuProfile& p, const std::string& key) {
  Efficiency& e = p.efficiency;
  if (key == "efficiency.dram_bandwidth") return &e.dram_bandwidth;
  if (key == "efficiency.l2_bandwidth") return &e.l2_bandwidth;
  if (key == "efficiency.vector_flops") return &e.vector_flops;
  if (key == "efficiency.matrix_flops") return &e.matrix_flops;
  if (key == "efficiency.gemm_vector_flops") return &e.gemm_vector_flops;
  if (key == "launch.block_us") return &p.launch.block_us;
  if (key == "launch.latency_floor_us") return &p.launch.latency_floor_us;
  if (key == "compute.barrier_ns") return &p.compute.barrier_ns;
  return nullptr;
}

struct Problem {
  const GpuProfile& base;
  std::vector<const Observation*> rows;
  std::vector<double> weight;  // per row: 1 / rows of its class

  GpuProfile profile(const std::vector<Param>& params, const Eigen::VectorXd& x) const {
    std::vector<Param> q = params;
    for (size_t j = 0; j < q.size(); ++j) q[j].value = std::exp(x(static_cast<Eigen::Index>(j)));
    return with_parameters(base, q);
  }
  Eigen::VectorXd residuals(const std::vector<Param>& params, const Eigen::VectorXd& x) const {
    const DeviceModel d = make_device(profile(params, x));
    Eigen::VectorXd r(static_cast<Eigen::Index>(rows.size()));
    for (size_t i = 0; i < rows.size(); ++i) {
      const double pred = predict_us(*rows[i], d);
      const double meas = std::max(rows[i]->stats.p50, 1e-3);
      r(static_cast<Eigen::Index>(i)) = std::sqrt(weight[i]) * std::log(std::max(pred, 1e-6) / meas);
    }
    return r;
  }
  // Weighted mean squared log error of a whole profile.
  double cost(const GpuProfile& q) const {
    const DeviceModel d = make_device(q);
    double c = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const double l = std::log(std::max(predict_us(*rows[i], d), 1e-6) / std::max(rows[i]->stats.p50, 1e-3));
      c += weight[i] * l * l;
    }
    return c;
  }
};

// Whether a GEMM-like kernel fills the device: at least a full wave of blocks on every unit (every
// other kernel: true). Smaller ones take the time of their k-steps' latency, barriers and launch,
// which the model does not explain yet: fitted, they would pull a throughput (or the launch
// floor) to absorb it (bench/RESULTS.md, "Session 6").
// `c` is the GEMM-like kernel's price on `d`.
bool fills_device(const KernelCost& c, const DeviceModel& d) {
  return c.feasible && c.ctas >= static_cast<int64_t>(d.units) * std::max<int64_t>(1, c.ctas_per_unit);
}

// The observations the fit uses (not held out, measured, GEMMs that fill the device), each class
// weighing the same in total.
Problem problem(const GpuProfile& p, const std::vector<Observation>& obs) {
  Problem prob{p, {}, {}};
  const DeviceModel d = make_device(p);
  std::map<std::string, int> per_class;
  for (const Observation& o : obs) {
    if (o.held_out || o.stats.p50 <= 0) continue;
    if (has_gemm_view(o.work) && !fills_device(kernel_cost(o.work, o.tile, d), d)) continue;
    prob.rows.push_back(&o);
    ++per_class[o.cls];
  }
  for (const Observation* o : prob.rows) {
    prob.weight.push_back(1.0 / (per_class[o->cls] * static_cast<double>(per_class.size())));
  }
  return prob;
}

}  // namespace

double fit_cost(const GpuProfile& p, const std::vector<Observation>& obs) { return problem(p, obs).cost(p); }

std::vector<Param> fit_parameters(const GpuProfile& p, const std::vector<Observation>& obs) {
  std::vector<Param> v = {
      {"efficiency.dram_bandwidth", p.efficiency.dram_bandwidth, 1e-4, 1.0},
      {"efficiency.l2_bandwidth", p.efficiency.l2_bandwidth, 1e-4, 1.0},
      {"efficiency.vector_flops", p.efficiency.vector_flops, 1e-5, 1.0},
      {"launch.block_us", std::max(p.launch.block_us, 1e-3), 1e-4, 1000.0},
      {"launch.latency_floor_us", std::max(p.launch.latency_floor_us, 1e-2), 1e-3, 1000.0},
      {"compute.barrier_ns", std::max(p.compute.barrier_ns, 1e-3), 1e-4, 1e6},
  };
  // A GEMM rate (a throughput) is fitted only where some GEMM the fit sees fills the device
  // (fills_device). Fitted on GEMMs too small for that, the efficiency absorbed the latency the
  // model leaves out and slowed every large GEMM: the H200's calibration put the SIMT one at 4.1%
  // from MatMuls of 64-384 (bench/RESULTS.md, "Session 6").
  const DeviceModel d = make_device(p);
  bool matrix = false, simt = false;
  for (const Observation& o : obs) {
    if (o.held_out || !has_gemm_view(o.work)) continue;
    const KernelCost c = kernel_cost(o.work, o.tile, d);
    if (!fills_device(c, d)) continue;
    matrix = matrix || c.matrix_units;
    simt = simt || !c.matrix_units;
  }
  if (matrix) v.push_back({"efficiency.matrix_flops", p.efficiency.matrix_flops, 1e-4, 1.0});
  if (simt) {
    const double g = p.efficiency.gemm_vector_flops > 0 ? p.efficiency.gemm_vector_flops : p.efficiency.vector_flops;
    v.push_back({"efficiency.gemm_vector_flops", g, 1e-5, 1.0});
  }
  return v;
}

GpuProfile with_parameters(const GpuProfile& p, const std::vector<Param>& params) {
  GpuProfile q = p;
  for (const Param& x : params) {
    if (double* s = slot(q, x.key)) *s = std::clamp(x.value, x.lo, x.hi);
  }
  // Physics: the cache in front of DRAM is never slower than DRAM (the fit must not use L2 as a
  // knob that slows every streaming kernel).
  const double dram = q.memory.dram.bandwidth_gbps * q.efficiency.dram_bandwidth;
  if (q.memory.l2.bandwidth_gbps > 0 && q.memory.l2.bandwidth_gbps * q.efficiency.l2_bandwidth < dram) {
    q.efficiency.l2_bandwidth = std::min(1.0, dram / q.memory.l2.bandwidth_gbps);
  }
  return q;
}

double predict_us(const Observation& o, const DeviceModel& d) { return kernel_cost(o.work, o.tile, d).total_us; }

std::vector<ClassError> class_errors(const GpuProfile& p, const std::vector<Observation>& obs) {
  const DeviceModel d = make_device(p);
  std::map<std::pair<std::string, bool>, ClassError> by;
  for (const Observation& o : obs) {
    ClassError& e = by[{o.cls, o.held_out}];
    e.cls = o.cls;
    e.held_out = o.held_out;
    const double meas = std::max(o.stats.p50, 1e-3);
    const double pct = 100.0 * std::fabs(predict_us(o, d) - meas) / meas;
    e.mean_abs_pct += pct;
    e.max_abs_pct = std::max(e.max_abs_pct, pct);
    ++e.kernels;
  }
  std::vector<ClassError> v;
  for (auto& [k, e] : by) {
    e.mean_abs_pct /= std::max(1, e.kernels);
    v.push_back(e);
  }
  return v;
}

FitResult fit(const GpuProfile& p, const std::vector<Observation>& obs, std::vector<Param> start) {
  FitResult res;
  res.before = fit_parameters(p, obs);
  for (Param& s : start) s.value = std::clamp(s.value, s.lo, s.hi);
  const Problem prob = problem(p, obs);
  res.fitted = static_cast<int>(prob.rows.size());
  const Eigen::Index n = static_cast<Eigen::Index>(start.size());
  Eigen::VectorXd x(n), lo(n), hi(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const Param& s = start[static_cast<size_t>(j)];
    x(j) = std::log(s.value);
    lo(j) = std::log(s.lo);
    hi(j) = std::log(s.hi);
  }
  res.cost_before = prob.cost(p);
  Eigen::VectorXd r = prob.residuals(start, x);
  double cost = r.squaredNorm();
  double lambda = 1e-2;
  const double h = 1e-3;
  for (int it = 0; it < 100 && !prob.rows.empty(); ++it) {
    res.iterations = it + 1;
    Eigen::MatrixXd J(r.size(), n);
    for (Eigen::Index j = 0; j < n; ++j) {
      Eigen::VectorXd xp = x, xm = x;
      xp(j) += h;
      xm(j) -= h;
      J.col(j) = (prob.residuals(start, xp) - prob.residuals(start, xm)) / (2 * h);
    }
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    for (int tries = 0; tries < 12; ++tries) {
      Eigen::MatrixXd A = JtJ;
      for (Eigen::Index j = 0; j < n; ++j) A(j, j) += lambda * (JtJ(j, j) + 1e-9);
      const Eigen::VectorXd step = A.ldlt().solve(-g);
      Eigen::VectorXd xn = (x + step).cwiseMax(lo).cwiseMin(hi);
      const Eigen::VectorXd rn = prob.residuals(start, xn);
      const double cn = rn.squaredNorm();
      if (cn < cost) {
        const double gain = cost - cn;
        x = xn;
        r = rn;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-9);
        improved = gain > 1e-10 * std::max(cost, 1e-12);
        break;
      }
      lambda *= 4;
    }
    if (!improved) break;
  }
  res.after = start;
  for (Eigen::Index j = 0; j < n; ++j) res.after[static_cast<size_t>(j)].value = std::exp(x(j));
  const GpuProfile applied = with_parameters(p, res.after);
  for (Param& a : res.after) {
    if (a.key == "efficiency.l2_bandwidth") a.value = applied.efficiency.l2_bandwidth;
  }
  res.cost_after = cost;
  res.errors_before = class_errors(p, obs);
  res.errors_after = class_errors(with_parameters(p, res.after), obs);
  return res;
}

}  // namespace gpusim::calibrate
