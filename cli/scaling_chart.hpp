// An SVG chart of a scaling curve: images/s (left axis) and efficiency (right axis)
// against the replica count, with axes, labels and a legend.
#pragma once
#include <string>
#include <vector>

namespace distrain::cli {

// A point of the curve: the median of its rounds (bench --rounds), measured in turns with
// the other points', and their range.
struct ScalingPoint {
  int replicas = 1;
  int64_t global_batch = 0;
  double images_per_sec = 0, speedup = 0, efficiency = 0, step_ms = 0, comm_share = 0;
  double min_images_per_sec = 0, max_images_per_sec = 0;
  int rounds = 1;
  // The rounds' range relative to the median, (max - min) / median.
  double spread() const { return images_per_sec > 0 ? (max_images_per_sec - min_images_per_sec) / images_per_sec : 0; }
  // Its departure from ideal scaling, |efficiency - 1|, is smaller than the noise of the two
  // points it compares (its spread and the first point's): it does not tell them apart.
  bool within_noise = false;
};

// Speed-up and efficiency of every point against the first, and which are within noise.
void compare_to_first(std::vector<ScalingPoint>& points);

std::string scaling_svg(const std::string& title, const std::vector<ScalingPoint>& points);

}  // namespace distrain::cli
