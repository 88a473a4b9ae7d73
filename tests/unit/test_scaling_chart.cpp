// bench's scaling curve: efficiency against the first point, points within the rounds'
// noise marked, and the chart's axes scaled to the data.
#include <doctest/doctest.h>

#include <regex>

#include "cli/scaling_chart.hpp"

using distrain::cli::ScalingPoint;

namespace {

ScalingPoint point(int replicas, double ips, double lo, double hi) {
  ScalingPoint p;
  p.replicas = replicas;
  p.images_per_sec = ips;
  p.min_images_per_sec = lo;
  p.max_images_per_sec = hi;
  p.rounds = 3;
  return p;
}

}  // namespace

TEST_CASE("scaling: efficiency against the first point, and a departure from ideal within the rounds' spread is marked") {
  std::vector<ScalingPoint> points{point(1, 1000, 990, 1010), point(2, 1900, 1880, 1920), point(4, 3000, 2000, 4000)};
  distrain::cli::compare_to_first(points);
  CHECK(points[1].efficiency == doctest::Approx(0.95));
  CHECK_FALSE(points[1].within_noise);  // 5% from ideal, 2% + 2.1% spread
  CHECK(points[2].efficiency == doctest::Approx(0.75));
  CHECK(points[2].within_noise);  // 25% from ideal, 67% spread
  CHECK_FALSE(points[0].within_noise);
}

TEST_CASE("scaling: the chart's efficiency axis reaches the largest point, every mark on the canvas") {
  // A noisy first point once gave 335%: drawn at y = -504 on an axis fixed at 0-1.25.
  std::vector<ScalingPoint> points{point(1, 300, 250, 400), point(2, 2010, 2000, 2020)};
  distrain::cli::compare_to_first(points);
  REQUIRE(points[1].efficiency > 3);
  const std::string svg = distrain::cli::scaling_svg("t", points);
  const std::regex y(R"re((?:cy|y|y1|y2)="(-?[0-9.]+)")re");
  int seen = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), y); it != std::sregex_iterator(); ++it, ++seen)
    CHECK(std::stod((*it)[1]) >= 0);
  CHECK(seen > 10);
  CHECK(svg.find("within the rounds' noise") != std::string::npos);
}
