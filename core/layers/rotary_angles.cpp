#include "core/layers/rotary_angles.hpp"

#include <cmath>
#include <numbers>

namespace distrain {

RotarySpec RotarySpec::parse(ConfigTable& c) {
  RotarySpec s;
  s.theta = c.get_float("rope_theta", 10000.0);
  if (!(s.theta > 1.0)) c.fail("rope_theta", "must be greater than 1");
  if (!c.has("rope_scaling")) return s;
  ConfigTable t = c.sub("rope_scaling");
  t.get_choice("type", "llama3", {"llama3"});
  Llama3Scaling l;
  l.factor = t.get_float("factor", l.factor);
  l.low_freq_factor = t.get_float("low_freq_factor", l.low_freq_factor);
  l.high_freq_factor = t.get_float("high_freq_factor", l.high_freq_factor);
  l.original_context = t.get_int("original_max_position_embeddings", l.original_context);
  if (!(l.factor >= 1.0)) t.fail("factor", "must be at least 1");
  if (!(l.low_freq_factor > 0.0) || !(l.high_freq_factor > l.low_freq_factor))
    t.fail("high_freq_factor", "must be greater than low_freq_factor, both positive");
  if (l.original_context <= 0) t.fail("original_max_position_embeddings", "must be positive");
  t.finish();
  s.scaling = l;
  return s;
}

Json RotarySpec::settings() const {
  Json j = {{"rope_theta", theta}};
  if (scaling)
    j["rope_scaling"] = {{"type", "llama3"},
                         {"factor", scaling->factor},
                         {"low_freq_factor", scaling->low_freq_factor},
                         {"high_freq_factor", scaling->high_freq_factor},
                         {"original_max_position_embeddings", scaling->original_context}};
  return j;
}

std::vector<double> RotarySpec::frequencies(int64_t d) const {
  std::vector<double> f(static_cast<size_t>(d / 2));
  for (int64_t e = 0; e < d / 2; ++e) {
    double inv = 1.0 / std::pow(theta, static_cast<double>(2 * e) / static_cast<double>(d));
    if (scaling) {
      const Llama3Scaling& l = *scaling;
      const double context = static_cast<double>(l.original_context);
      const double wavelength = 2.0 * std::numbers::pi / inv;
      if (wavelength > context / l.low_freq_factor) {
        inv /= l.factor;
      } else if (wavelength >= context / l.high_freq_factor) {  // between: blended
        const double smooth = (context / wavelength - l.low_freq_factor) / (l.high_freq_factor - l.low_freq_factor);
        inv = (1.0 - smooth) * inv / l.factor + smooth * inv;
      }
    }
    f[static_cast<size_t>(e)] = inv;
  }
  return f;
}

std::vector<float> rotary_angles(const RotarySpec& spec, int64_t t, int64_t d) {
  const std::vector<double> f = spec.frequencies(d);
  const int64_t half = d / 2;
  std::vector<float> a(static_cast<size_t>(2 * t * half));
  for (int64_t p = 0; p < t; ++p)
    for (int64_t e = 0; e < half; ++e) {
      // A float32 frequency times a float32 position, as transformers computes the angle.
      const float angle = static_cast<float>(p) * static_cast<float>(f[static_cast<size_t>(e)]);
      a[static_cast<size_t>(p * half + e)] = static_cast<float>(std::cos(angle));
      a[static_cast<size_t>((t + p) * half + e)] = static_cast<float>(std::sin(angle));
    }
  return a;
}

}  // namespace distrain
