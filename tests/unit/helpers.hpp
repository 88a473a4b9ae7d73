// Shared test helpers: build a single layer from TOML text, move tensors to and from
// the host, deterministic random fills.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/rng.hpp"
#include "core/layers/registry.hpp"

namespace distrain::test {

inline Backend& cpu() { return backend_for(Device{DeviceType::cpu, 0}); }

inline std::unique_ptr<Layer> make_layer(const std::string& toml_text) {
  static std::vector<toml::table> keep;  // ConfigTable reads the table during construction only
  keep.push_back(toml::parse(toml_text));
  ConfigTable config(keep.back(), "test", "");
  auto layer = create_layer(config);
  layer->set_name("layer");
  return layer;
}

inline std::vector<float> to_host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  cpu().download(t, v.data());
  return v;
}

inline void from_host(const std::vector<float>& v, Tensor t) {
  REQUIRE(static_cast<int64_t>(v.size()) == t.numel());
  cpu().upload(v.data(), t);
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

}  // namespace distrain::test
