// `gpusim report`: one self-contained HTML page (inline CSS and SVG, no script, nothing fetched)
// with what a person looks at first: the headline figures, the biggest costs, the roofline of every
// kernel, the timeline with its host track, and the comparison across runtimes or GPUs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gpusim/documents.h"
#include "gpusim/gpusim.h"

namespace gpusim {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control bytes (a crafted node name) are not text a page shows.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += "&#xFFFD;";
        } else {
          out += c;
        }
    }
  }
  return out;
}

// One colour per kernel class, the same in every figure and the legend.
const char* class_colour(OpClass c) {
  switch (c) {
    case OpClass::kGemm: return "#1f77b4";
    case OpClass::kConv: return "#2ca02c";
    case OpClass::kAttention: return "#9467bd";
    case OpClass::kNormalization: return "#ff7f0e";
    case OpClass::kReduction: return "#8c564b";
    case OpClass::kDataMovement: return "#7f7f7f";
    default: return "#d62728";  // elementwise and the rest
  }
}

std::string ms(double us) { return fmt::format("{:.3f} ms", us / 1e3); }

std::string bytes_text(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

// Roofline: every kernel at (FLOPs per DRAM byte, achieved TFLOP/s) on log axes, under the GPU's
// roofs (the DRAM bandwidth's slope, then the vector and matrix peaks of the graph's type).
std::string roofline_svg(const Prediction& p, const GpuProfile& gpu) {
  constexpr double W = 760, H = 420, L = 70, R = 20, T = 20, B = 50;
  const double bw_tbs = gpu.memory.dram.bandwidth_gbps / 1e3;  // TB/s: TFLOP/s per FLOP/byte
  const Precision prec = precision_of(p.dtype);
  const double vector_peak = gpu.vector_tflops(prec) > 0 ? gpu.vector_tflops(prec) : gpu.vector_tflops(Precision::kFp32);
  const double matrix_peak = gpu.matrix_tflops(prec, prec == Precision::kInt8 ? Precision::kInt32 : Precision::kFp32).value_or(0);
  const double top = std::max(vector_peak, matrix_peak);
  double x_lo = 1e-2, x_hi = 1e4, y_lo = 1e-4, y_hi = std::max(1.0, top) * 2;
  struct Dot {
    double x, y, share;
    const PlannedKernel* k;
  };
  std::vector<Dot> dots;
  for (const PlannedKernel& k : p.kernels) {
    if (k.cost.total_us <= 0) continue;
    const double tflops = p.achieved_tflops(k);
    const double flops = tflops * 1e12 * k.cost.total_us * 1e-6;
    const double x = std::max(flops / std::max(1.0, k.cost.dram_bytes), 1e-3);
    const double y = std::max(tflops, 1e-6);
    dots.push_back({x, y, p.kernels_us > 0 ? k.cost.total_us / p.kernels_us : 0, &k});
    x_lo = std::min(x_lo, x / 2);
    x_hi = std::max(x_hi, x * 2);
    y_lo = std::min(y_lo, y / 2);
  }
  const double lx0 = std::log10(x_lo), lx1 = std::log10(x_hi), ly0 = std::log10(y_lo), ly1 = std::log10(y_hi);
  auto X = [&](double v) { return L + (std::log10(v) - lx0) / (lx1 - lx0) * (W - L - R); };
  auto Y = [&](double v) { return T + (ly1 - std::log10(v)) / (ly1 - ly0) * (H - T - B); };
  std::string s = fmt::format(R"~(<svg id="roofline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="roofline">)~",
                              W, H, W, H);
  s += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#999"/>)~", L, T, W - L - R, H - T - B);
  for (int d = static_cast<int>(std::ceil(lx0)); d <= static_cast<int>(std::floor(lx1)); ++d) {
    const double x = X(std::pow(10.0, d));
    s += fmt::format(R"~(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#eee"/><text x="{:.1f}" y="{}" font-size="11" text-anchor="middle">1e{}</text>)~",
                     x, T, x, H - B, x, H - B + 15, d);
  }
  for (int d = static_cast<int>(std::ceil(ly0)); d <= static_cast<int>(std::floor(ly1)); ++d) {
    const double y = Y(std::pow(10.0, d));
    s += fmt::format(R"~(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#eee"/><text x="{}" y="{:.1f}" font-size="11" text-anchor="end">1e{}</text>)~",
                     L, y, W - R, y, L - 5, y + 4, d);
  }
  s += fmt::format(R"~(<text x="{}" y="{}" font-size="12" text-anchor="middle">FLOPs per DRAM byte</text>)~", (L + W - R) / 2, H - 12);
  s += fmt::format(R"~(<text x="14" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {})">achieved TFLOP/s</text>)~",
                   (T + H - B) / 2, (T + H - B) / 2);
  // Roofs: bandwidth x intensity up to each peak.
  for (const auto& [peak, name] : {std::pair{vector_peak, "vector"}, std::pair{matrix_peak, "matrix"}}) {
    if (peak <= 0) continue;
    const double knee = peak / bw_tbs;
    const double xa = std::max(x_lo, y_lo / bw_tbs);
    s += fmt::format(R"~(<polyline class="roof" fill="none" stroke="#444" stroke-width="1.5" points="{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}"/>)~",
                     X(xa), Y(std::max(y_lo, xa * bw_tbs)), X(std::clamp(knee, x_lo, x_hi)), Y(peak), X(x_hi), Y(peak));
    s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="end">{} peak {:.1f} TFLOP/s</text>)~", W - R - 4,
                     Y(peak) - 4, name, peak);
  }
  s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="11">DRAM {:.0f} GB/s</text>)~", X(std::max(x_lo * 3, 0.03)) + 4,
                   Y(std::max(y_lo * 3, 0.03 * bw_tbs)) - 6, gpu.memory.dram.bandwidth_gbps);
  for (const Dot& d : dots) {
    const double r = 2.5 + 14 * std::sqrt(d.share);
    s += fmt::format(R"~(<circle class="kernel" cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}" fill-opacity="0.6" stroke="#333" stroke-width="0.5"><title>{} ({}): {:.1f} us, {:.2f} TFLOP/s, {:.1f} FLOP/B, {}-bound</title></circle>)~",
                     X(d.x), Y(d.y), r, class_colour(d.k->work.cls), esc(d.k->name), esc(d.k->op_type), d.k->cost.total_us, d.y,
                     d.x, bound_name(d.k->cost.bound));
  }
  s += "</svg>";
  return s;
}

// Timeline: the host's launches, the compute stream and the copy engine, on one time axis.
std::string timeline_svg(const Prediction& p) {
  constexpr double W = 1000, L = 170, R = 10, row = 26;
  const double H = 3 * row + 50;
  const double span = std::max(p.total_us, 1e-3);
  auto X = [&](double us) { return L + us / span * (W - L - R); };
  std::string s = fmt::format(R"~(<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="timeline">)~",
                              W, H, W, H);
  const char* tracks[] = {"host", "compute", "copy"};
  for (int t = 0; t < 3; ++t) {
    s += fmt::format(R"~(<text x="4" y="{:.1f}" font-size="12">{}</text><rect x="{}" y="{:.1f}" width="{}" height="{}" fill="#fafafa" stroke="#ddd"/>)~",
                     10 + t * row + 17, t == 0 ? fmt::format("host ({})", esc(p.runtime)) : tracks[t], L, 10 + t * row,
                     W - L - R, row - 4);
  }
  for (const PlannedKernel& k : p.kernels) {
    if (k.host_end_us > k.host_start_us) {
      s += fmt::format(R"~(<rect class="launch" x="{:.2f}" y="12" width="{:.2f}" height="{}" fill="#bbb"><title>{}: host {:.1f}-{:.1f} us</title></rect>)~",
                       X(k.host_start_us), std::max(0.3, X(k.host_end_us) - X(k.host_start_us)), row - 8, esc(k.name),
                       k.host_start_us, k.host_end_us);
    }
    s += fmt::format(R"~(<rect class="kernel" x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="{}"><title>{} ({}): {:.1f}-{:.1f} us</title></rect>)~",
                     X(k.start_us), 12 + row, std::max(0.3, X(k.start_us + k.cost.total_us) - X(k.start_us)), row - 8,
                     class_colour(k.work.cls), esc(k.name), esc(k.op_type), k.start_us, k.start_us + k.cost.total_us);
  }
  for (const Transfer& t : p.transfers) {
    s += fmt::format(R"~(<rect class="copy" x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="#17becf"><title>{} {}: {} in {:.1f} us</title></rect>)~",
                     X(t.start_us), 12 + 2 * row, std::max(0.3, X(t.start_us + t.duration_us) - X(t.start_us)), row - 8,
                     t.to_device ? "to the device" : "back", esc(t.tensor), bytes_text(static_cast<double>(t.bytes)), t.duration_us);
  }
  for (int i = 0; i <= 4; ++i) {
    const double us = span * i / 4;
    s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="{}">{}</text>)~", X(us), 10 + 3 * row + 16,
                     i == 4 ? "end" : i == 0 ? "start" : "middle", ms(us));
  }
  s += "</svg>";
  return s;
}

// Horizontal bars: one per row, the first part GPU time, the second the wait for launches.
std::string bars_svg(const std::string& id, const std::vector<std::tuple<std::string, double, double>>& rows) {
  constexpr double W = 760, L = 240, R = 90, row = 24;
  const double H = row * static_cast<double>(rows.size()) + 10;
  double top = 1e-9;
  for (const auto& [name, busy, wait] : rows) top = std::max(top, busy + wait);
  std::string s = fmt::format(R"~(<svg id="{}" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)~",
                              id, W, H, W, H);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, busy, wait] = rows[i];
    const double y = 5 + row * static_cast<double>(i);
    const double wb = busy / top * (W - L - R), ww = wait / top * (W - L - R);
    s += fmt::format(R"~(<text x="{}" y="{:.1f}" font-size="12" text-anchor="end">{}</text>)~", L - 6, y + 15, esc(name));
    s += fmt::format(R"~(<rect class="bar" x="{}" y="{:.1f}" width="{:.1f}" height="{}" fill="#1f77b4"><title>{}: {}</title></rect>)~", L, y + 3,
                     std::max(0.5, wb), row - 8, esc(name), ms(busy));
    if (ww > 0) {
      s += fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{}" fill="#ccc"><title>waiting for launches: {}</title></rect>)~",
                       L + wb, y + 3, ww, row - 8, ms(wait));
    }
    s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="12">{}</text>)~", L + wb + ww + 4, y + 15, ms(busy + wait));
  }
  s += "</svg>";
  return s;
}

}  // namespace

std::string report_html(const ReportData& d) {
  const Prediction& p = d.prediction;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += fmt::format("<title>gpusim report: {} on {}</title>", esc(d.model), esc(d.gpu.name));
  h += "<style>body{font-family:system-ui,sans-serif;margin:24px;max-width:1080px;color:#222}"
       "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}"
       "td:first-child,th:first-child,td.l,th.l{text-align:left}h2{margin-top:28px;border-bottom:1px solid #ccc}"
       ".kpi{display:inline-block;margin:0 22px 8px 0}.kpi b{display:block;font-size:20px}"
       ".legend span{display:inline-block;margin-right:12px;font-size:12px}.legend i{display:inline-block;width:10px;"
       "height:10px;margin-right:4px}.note{font-size:13px;color:#555}</style></head><body>\n";
  h += fmt::format("<h1>{} on {}</h1>\n", esc(d.model), esc(d.gpu.display_name.empty() ? d.gpu.name : d.gpu.display_name));
  h += fmt::format("<p class=\"note\">runtime {}, {} tiles, {}; predicted by gpusim {} from the model's shapes and the "
                   "GPU profile {}, not measured.</p>\n",
                   esc(p.runtime), esc(p.tiles), dtype_name(p.dtype), version(), esc(d.gpu.name));
  h += "<div id=\"headline\">";
  for (const auto& [label, value] :
       {std::pair<std::string, std::string>{"latency", ms(p.total_us)},
        {"kernels", fmt::format("{} ({} of GPU time)", p.kernels.size(), ms(p.kernels_us))},
        {"GPU waiting on launches", ms(p.launch_bound_us)},
        {"peak memory", bytes_text(static_cast<double>(p.peak_memory_bytes)) + (p.fits_in_memory ? "" : " (does not fit)")},
        {"energy", fmt::format("{:.3f} J", p.energy_j)}}) {
    h += fmt::format("<div class=\"kpi\">{}<b>{}</b></div>", esc(label), esc(value));
  }
  h += "</div>\n";

  // The biggest costs.
  h += "<h2>Where the time goes</h2>\n";
  std::map<OpClass, std::pair<double, int>> by_class;
  for (const PlannedKernel& k : p.kernels) {
    by_class[k.work.cls].first += k.cost.total_us;
    ++by_class[k.work.cls].second;
  }
  h += "<p class=\"legend\">";
  for (const auto& [c, v] : by_class) {
    h += fmt::format("<span><i style=\"background:{}\"></i>{}: {} kernels, {:.1f}%</span>", class_colour(c), op_class_name(c), v.second,
                     p.kernels_us > 0 ? 100 * v.first / p.kernels_us : 0.0);
  }
  h += "</p>\n";
  std::vector<const PlannedKernel*> top;
  for (const PlannedKernel& k : p.kernels) top.push_back(&k);
  std::stable_sort(top.begin(), top.end(), [](const PlannedKernel* a, const PlannedKernel* b) { return a->cost.total_us > b->cost.total_us; });
  if (top.size() > 20) top.resize(20);
  h += "<table id=\"top-costs\"><tr><th>kernel</th><th class=\"l\">ops</th><th>us</th><th>share</th><th>bound</th><th>TFLOP/s</th>"
       "<th>GB/s</th><th class=\"l\">share of GPU time</th></tr>\n";
  for (const PlannedKernel* k : top) {
    const double share = p.kernels_us > 0 ? k->cost.total_us / p.kernels_us : 0;
    h += fmt::format("<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.1f}</td><td>{:.1f}%</td><td>{}</td><td>{:.2f}</td>"
                     "<td>{:.0f}</td><td class=\"l\"><div style=\"background:{};height:9px;width:{:.0f}px\"></div></td></tr>\n",
                     esc(k->name), esc(k->op_type), k->cost.total_us, 100 * share, bound_name(k->cost.bound), p.achieved_tflops(*k),
                     p.achieved_gbps(*k), class_colour(k->work.cls), 200 * share);
  }
  h += "</table>\n";

  h += "<h2>Roofline</h2>\n<p class=\"note\">Each kernel at its FLOPs per DRAM byte and achieved rate, its area its share "
       "of GPU time; the lines are the profile's DRAM bandwidth and peaks.</p>\n";
  h += roofline_svg(p, d.gpu) + "\n";
  h += "<h2>Timeline</h2>\n<p class=\"note\">The host's launches (the runtime's calls), the kernels on the compute "
       "stream and the copies, on one axis.</p>\n";
  h += timeline_svg(p) + "\n";

  if (d.runtimes && !d.runtimes->rows.empty()) {
    h += "<h2>Runtimes on this GPU</h2>\n";
    std::vector<std::tuple<std::string, double, double>> rows;
    for (const ComparedRuntime& r : d.runtimes->rows) {
      rows.emplace_back(r.runtime, r.prediction.total_us - r.prediction.launch_bound_us, r.prediction.launch_bound_us);
    }
    h += bars_svg("runtimes", rows) + "\n";
    h += fmt::format("<p>{}</p>\n<table><tr><th>runtime</th><th>latency</th><th>items/s</th><th>kernels</th><th>bound</th>"
                     "<th class=\"l\">why</th></tr>\n",
                     esc(d.runtimes->verdict));
    for (const ComparedRuntime& r : d.runtimes->rows) {
      h += fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
                       esc(r.runtime), ms(r.prediction.total_us), r.items_per_s, r.prediction.kernels.size(), r.bound, esc(r.why));
    }
    h += "</table>\n";
  }
  if (d.gpus && !d.gpus->empty()) {
    h += "<h2>The same model on other GPUs</h2>\n";
    std::vector<std::tuple<std::string, double, double>> rows;
    for (const ComparedGpu& g : *d.gpus) {
      rows.emplace_back(g.gpu.name, g.prediction.total_us - g.prediction.launch_bound_us, g.prediction.launch_bound_us);
    }
    h += bars_svg("gpus", rows) + "\n";
  }
  h += "<h2>Notes</h2>\n<ul id=\"notes\">";
  for (const std::string& n : p.notes) h += "<li>" + esc(n) + "</li>";
  h += "</ul>\n</body></html>\n";
  return h;
}

}  // namespace gpusim
