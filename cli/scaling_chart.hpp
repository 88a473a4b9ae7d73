// An SVG chart of a scaling curve: images/s (left axis) and efficiency (right axis)
// against the replica count, with axes, labels and a legend.
#pragma once
#include <string>
#include <vector>

namespace distrain::cli {

struct ScalingPoint {
  int replicas = 1;
  int64_t global_batch = 0;
  double images_per_sec = 0, speedup = 0, efficiency = 0, step_ms = 0, comm_share = 0;
};

std::string scaling_svg(const std::string& title, const std::vector<ScalingPoint>& points);

}  // namespace distrain::cli
