#include "cli/scaling_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace distrain::cli {

namespace {
constexpr double kW = 720, kH = 440, kLeft = 80, kRight = 80, kTop = 50, kBottom = 60;

double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}
}  // namespace

void compare_to_first(std::vector<ScalingPoint>& points) {
  if (points.empty()) return;
  const ScalingPoint& first = points.front();
  for (auto& p : points) {
    p.speedup = p.images_per_sec / first.images_per_sec;
    const double ideal = static_cast<double>(p.replicas) / first.replicas;
    p.efficiency = p.speedup / ideal;  // weak: ips(N) / (N x ips(1)); strong: speed-up / N
    p.within_noise = &p != &first && p.spread() + first.spread() > std::abs(p.efficiency - 1);
  }
}

std::string scaling_svg(const std::string& title, const std::vector<ScalingPoint>& points) {
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  double max_ips = 0, max_eff = 0;
  for (const auto& p : points) {
    max_ips = std::max({max_ips, p.images_per_sec, p.max_images_per_sec});
    max_eff = std::max(max_eff, p.efficiency);
  }
  const double y_max = nice_ceiling(max_ips * 1.1);
  // Ticks at fifths of the axis: 0 to 1.25 unless a point is above 1.1, then to the data.
  const double e_max = max_eff <= 1.1 ? 1.25 : nice_ceiling(max_eff * 1.1);
  const size_t n = points.size();
  auto x_at = [&](size_t i) { return kLeft + (n == 1 ? plot_w / 2 : plot_w * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto y_ips = [&](double v) { return kTop + plot_h * (1 - v / y_max); };
  auto y_eff = [&](double v) { return kTop + plot_h * (1 - v / e_max); };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n",
      kW, kH, kW / 2, escape(title));
  // Grid and left axis (images/s).
  for (int k = 0; k <= 5; ++k) {
    const double v = y_max * k / 5, y = y_ips(v);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft, y, kLeft + plot_w, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.0f}</text>\n", kLeft - 6, y + 4, v);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">{:.2f}</text>\n", kLeft + plot_w + 6, y_eff(e_max * k / 5) + 4,
                     e_max * k / 5);
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", kLeft, kTop, plot_w, plot_h);
  s += fmt::format("<text transform=\"translate(22,{}) rotate(-90)\" text-anchor=\"middle\" fill=\"#1f77b4\">images / second</text>\n",
                   kTop + plot_h / 2);
  s += fmt::format("<text transform=\"translate({},{}) rotate(90)\" text-anchor=\"middle\" fill=\"#d62728\">efficiency</text>\n",
                   kW - 24, kTop + plot_h / 2);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">replicas</text>\n", kLeft + plot_w / 2, kH - 14);
  std::string ips_line, eff_line;
  for (size_t i = 0; i < n; ++i) {
    const double x = x_at(i);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, kTop + plot_h + 20, points[i].replicas);
    ips_line += fmt::format("{:.1f},{:.1f} ", x, y_ips(points[i].images_per_sec));
    eff_line += fmt::format("{:.1f},{:.1f} ", x, y_eff(points[i].efficiency));
    if (points[i].rounds > 1)  // the rounds' range
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#1f77b4\"/>\n", x,
                       y_ips(points[i].min_images_per_sec), x, y_ips(points[i].max_images_per_sec));
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f77b4\"/>\n", x, y_ips(points[i].images_per_sec));
    // Hollow: the point's efficiency is within the noise of the rounds.
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"8\" height=\"8\" fill=\"{}\" stroke=\"#d62728\"/>\n", x - 4,
                     y_eff(points[i].efficiency) - 4, points[i].within_noise ? "white" : "#d62728");
  }
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", ips_line);
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6,4\"/>\n", eff_line);
  // Legend.
  const double lx = kLeft + 12, ly = kTop + 14;
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"230\" height=\"64\" fill=\"white\" stroke=\"#999\"/>\n", lx - 6, ly - 12);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", lx, ly, lx + 24, ly);
  s += fmt::format("<text x=\"{}\" y=\"{}\">images/s</text>\n", lx + 30, ly + 4);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6,4\"/>\n", lx,
                   ly + 20, lx + 24, ly + 20);
  s += fmt::format("<text x=\"{}\" y=\"{}\">efficiency</text>\n", lx + 30, ly + 24);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"8\" height=\"8\" fill=\"white\" stroke=\"#d62728\"/>\n", lx + 8, ly + 36);
  s += fmt::format("<text x=\"{}\" y=\"{}\">within the rounds' noise</text>\n", lx + 30, ly + 44);
  return s + "</svg>\n";
}

}  // namespace distrain::cli
