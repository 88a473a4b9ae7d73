#include "core/io/strategy_kind.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/base/error.hpp"
#include "core/io/recipe.hpp"

namespace distrain {

namespace {

struct Registered {
  int order;
  std::unique_ptr<StrategyKind> kind;
};

std::vector<Registered>& registry() {
  static std::vector<Registered> kinds;
  return kinds;
}

}  // namespace

void StrategyKind::parse(ConfigTable&, StrategySpec&, const std::vector<Device>&) const {}
void StrategyKind::check_optimizer(ConfigTable&, const OptimizerSpec&, const StrategySpec&) const {}
void StrategyKind::check_train(ConfigTable&, const TrainSpec&) const {}

int StrategyKind::replicas(const StrategySpec& s, int) const { return static_cast<int>(s.devices.size()); }

std::vector<Device> StrategyKind::devices_of_this_process(const Recipe& recipe) const {
  std::vector<Device> devices;
  for (const std::string& d : recipe.strategy.devices) devices.push_back(Device::parse(d, recipe.file + ": strategy.devices"));
  return devices;
}

std::vector<std::string> StrategyKind::launch_lines(const Recipe&) const { return {}; }
std::string StrategyKind::memory_note(const Recipe&) const { return ""; }
bool StrategyKind::offloads_masters(const Recipe&) const { return false; }
std::optional<MemoryUse> StrategyKind::memory_before_build(const Recipe&) const { return std::nullopt; }

bool register_strategy_kind(std::unique_ptr<StrategyKind> kind, int order) {
  std::vector<Registered>& kinds = registry();
  DT_CHECK(!find_strategy_kind(kind->name()), "strategy '{}' registered twice", kind->name());
  kinds.push_back(Registered{order, std::move(kind)});
  std::stable_sort(kinds.begin(), kinds.end(), [](const Registered& a, const Registered& b) { return a.order < b.order; });
  return true;
}

const StrategyKind* find_strategy_kind(const std::string& name) {
  for (const Registered& r : registry())
    if (r.kind->name() == name) return r.kind.get();
  return nullptr;
}

std::vector<const StrategyKind*> strategy_kinds() {
  std::vector<const StrategyKind*> out;
  for (const Registered& r : registry()) out.push_back(r.kind.get());
  return out;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const StrategyKind* k : strategy_kinds()) out.push_back(k->name());
  return out;
}

std::string strategy_names_where(bool (*pred)(const StrategyKind&)) {
  std::vector<std::string> names;
  for (const StrategyKind* k : strategy_kinds())
    if (pred(*k)) names.push_back(k->name());
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

const StrategyKind& StrategySpec::kind() const {
  const StrategyKind* k = find_strategy_kind(name);
  DT_CHECK(k, "strategy '{}' is not registered", name);
  return *k;
}

}  // namespace distrain
