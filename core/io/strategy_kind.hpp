// StrategyKind: what one value of strategy.name means before anything is built: the
// [strategy] keys that strategy reads, the keys elsewhere it refuses, how many replicas it
// trains for a number of processes, how it is launched, what `check` says of it, and how
// it builds itself. Each strategy registers one from its own .cpp file
// (DT_REGISTER_STRATEGY); recipe parsing, train, check, plan and bench ask the kind
// instead of comparing names.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/config_table.hpp"
#include "core/io/strategy_spec.hpp"
#include "core/model/memory_use.hpp"
#include "core/tensor/device.hpp"

namespace distrain {

class Mesh;
class Strategy;
struct OptimizerSpec;
struct Recipe;
struct TrainSpec;

class StrategyKind {
 public:
  // How the processes of a job come to be.
  enum class Processes {
    one,       // one process (several started by a launcher would write the same files)
    launched,  // under mpirun/srun, every process a rank of the job
    either,    // one process, or one worker per process when launched
  };

  virtual ~StrategyKind() = default;
  virtual std::string name() const = 0;
  virtual Processes processes() const = 0;

  // [strategy] keys this strategy reads beyond the common ones. Under another strategy
  // they are dropped, with a notice (a recipe run with --set strategy.name=...).
  virtual std::vector<std::string> own_keys() const { return {}; }
  // Reads the own keys into s (the common keys and `devices` are parsed already).
  virtual void parse(ConfigTable& strategy, StrategySpec& s, const std::vector<Device>& devices) const;
  // Refuses keys of [optimizer] and [train] this strategy cannot honour.
  virtual void check_optimizer(ConfigTable& optimizer, const OptimizerSpec& o, const StrategySpec& s) const;
  virtual void check_train(ConfigTable& train, const TrainSpec& t) const;

  // strategy.devices: exactly one (devices = "auto" then takes the first GPU, not all).
  virtual bool single_device() const { return false; }
  // Several replicas of one process may share a GPU (logical devices).
  virtual bool replicas_may_share_a_gpu() const { return false; }
  // The data-parallel replicas of a job of `ranks` processes (launched, or planned).
  virtual int replicas(const StrategySpec& s, int ranks) const;
  // The devices this process computes on.
  virtual std::vector<Device> devices_of_this_process(const Recipe& recipe) const;
  // `bench --profile` times its layers' passes (its collectives run outside them).
  virtual bool profiled() const { return false; }

  // For `check`: how its processes are launched and what its servers hold (lines); a note
  // on its memory figures ("" none); whether offload_optimizer also moves float32 masters.
  virtual std::vector<std::string> launch_lines(const Recipe& recipe) const;
  virtual std::string memory_note(const Recipe& recipe) const;
  virtual bool offloads_masters(const Recipe& recipe) const;
  // A short label of the strategy as specified ("zero stage 3").
  virtual std::string label(const StrategySpec&) const { return name(); }
  // The strategy `check` builds in one process to show one of its workers (a server-less
  // stand-in for parameter_server).
  virtual std::string checked_alone_as() const { return name(); }
  // `check` predicts each rank's memory from the model's layout rather than building one.
  virtual bool checked_per_rank() const { return false; }
  // A replica's memory predicted before anything is built (for a strategy that can need
  // more host memory than is free before its first allocation fails); none: build and see.
  virtual std::optional<MemoryUse> memory_before_build(const Recipe& recipe) const;

  virtual std::unique_ptr<Strategy> make(const Recipe& recipe) const = 0;
  // On a given mesh (of threads, in tests and benches): only a strategy made of one.
  virtual std::unique_ptr<Strategy> make_on(const Recipe& recipe, const Mesh& mesh) const;
};

// Registers `kind`; `order` is its place in lists of strategies (docs/recipe.md's order).
bool register_strategy_kind(std::unique_ptr<StrategyKind> kind, int order);
// The kind named `name`; nullptr when none is.
const StrategyKind* find_strategy_kind(const std::string& name);
// Every kind, in `order`.
std::vector<const StrategyKind*> strategy_kinds();
std::vector<std::string> strategy_names();
// "a, b and c": the names of the kinds for which `pred` holds.
std::string strategy_names_where(bool (*pred)(const StrategyKind&));

#define DT_REGISTER_STRATEGY(Class, order) \
  [[maybe_unused]] static const bool dt_registered_##Class = ::distrain::register_strategy_kind(std::make_unique<Class>(), order)

}  // namespace distrain
