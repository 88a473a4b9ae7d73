// What `distrain check` says of a recipe: the lines it has always printed, or with --json
// one JSON object holding the same facts (printed by finish()).
#pragma once
#include <string>
#include <vector>

#include "core/base/json.hpp"
#include "core/io/recipe.hpp"
#include "core/model/memory_use.hpp"
#include "core/model/model.hpp"
#include "datasets/dataset.hpp"

namespace distrain::cli {

class CheckReport {
 public:
  explicit CheckReport(bool json) : json_(json) {}
  void notices(const std::vector<std::string>& notices);
  // How the launcher starts the job's processes, and what its servers hold.
  void launch(const std::vector<std::string>& lines);
  // The run: data, strategy (`strategy` describes it) with `replicas` replicas, steps,
  // optimizer, learning rate, loss, precision and checkpoints. Without `data` (check
  // --without-data) the steps are train.steps' where it sets them, else unknown.
  void run(const Recipe& recipe, const Splits* data, const std::string& strategy, int replicas, const std::string& optimizer,
           int64_t update_batch);
  void memory(const Recipe& recipe, const MemoryUse& mem);
  // Every mesh rank's predicted bytes; returns the largest rank's device total.
  int64_t mesh_ranks(const Recipe& recipe);
  // Replicas predicted without building them: the host memory this process would need.
  void unbuilt_host(size_t replicas, int64_t host_bytes);
  void model(const Model& model);
  // The JSON object (--json); nothing in text mode, whose lines are out already.
  void finish() const;

 private:
  bool json_;
  Json out_ = Json::object();
};

}  // namespace distrain::cli
