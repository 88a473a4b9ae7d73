// The angles of rotary position embeddings (RoFormer, as Llama applies them): head element
// pair e (of D/2) at position t turns by t / theta^(2e/D), optionally with Llama 3's
// frequency scaling for contexts past the one it was trained on.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/base/config_table.hpp"
#include "core/base/json.hpp"

namespace distrain {

// Llama 3.1's rope_scaling ("rope_type": "llama3"): long wavelengths slowed by `factor`,
// short ones kept, those between blended.
struct Llama3Scaling {
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_context = 8192;  // original_max_position_embeddings
};

struct RotarySpec {
  double theta = 10000.0;
  std::optional<Llama3Scaling> scaling;

  // From an attention layer's keys: rope_theta and the [rope_scaling] table.
  static RotarySpec parse(ConfigTable& c);
  Json settings() const;
  // The D/2 frequencies (radians per position) of heads of width d.
  std::vector<double> frequencies(int64_t d) const;
};

// (2, t, d/2): the cosines of every position's angles, then their sines, as
// Backend::rotary takes them.
std::vector<float> rotary_angles(const RotarySpec& spec, int64_t t, int64_t d);

}  // namespace distrain
