// What `distrain bench` was asked (its flags), and what its parts share: a point as JSON
// (the form a point measured under mpirun comes back in), a point measured by
// `mpirun -np N` of this executable, and the scaling curve.
#pragma once
#include <string>
#include <vector>

#include "core/base/json.hpp"
#include "core/train/bench_measure.hpp"

namespace distrain::cli {

struct BenchArgs : MeasureOptions {
  std::string recipe, strategy, replicas, mode = "weak", csv, svg;
  std::vector<std::string> overrides;
  int busy = 0;        // --busy: load processes beside the measured point
  int64_t rounds = 3;  // --busy: quiet and busy measurements, interleaved
  bool json = false;
};

// A point as `bench --json` prints it, and back (throws Json::exception when a key is
// missing or of another type).
Json to_json(const Measured& m, const std::string& recipe_name);
Measured measured_from_json(const Json& j);

// A point of `n` replicas, one per process: this executable under `mpirun -np n`, its
// JSON read back.
Measured measure_with_mpirun(const BenchArgs& a, const std::vector<std::string>& overrides, int n);

// --replicas (or --strategy, --csv, --svg): one point per replica count, printed as a
// table or JSON, written as CSV and SVG.
void scaling(const BenchArgs& a);

}  // namespace distrain::cli
