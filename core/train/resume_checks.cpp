#include "core/train/resume_checks.hpp"

#include <fmt/ranges.h>

#include <optional>
#include <set>

#include "core/base/error.hpp"
#include "core/base/json.hpp"
#include "core/layers/layer.hpp"

namespace distrain {

namespace {

// Not --fresh: that would delete the other run's checkpoints.
constexpr const char* kOtherRun =
    "train into another run folder (--run-dir DIR), or start from its weights with checkpoint.init_from";

void check_same_dataset(const Recipe& recipe, const Recipe& stored, const CheckpointHeader& header) {
  DT_USER_CHECK(stored.data.dataset == recipe.data.dataset, "{}: trained on data.dataset = \"{}\", {} trains on \"{}\"; {}",
                header.path, stored.data.dataset, recipe.file, recipe.data.dataset, kOtherRun);
}

// Token ids mean what they meant when the checkpoint was written.
void check_same_vocabulary(const Recipe& recipe, const Dataset& data, const CheckpointHeader& header) {
  if (header.vocabulary.empty() || !data.vocabulary) return;
  const Vocabulary stored = Vocabulary::from_text(header.vocabulary, header.path + " (vocabulary)");
  const Vocabulary& now = *data.vocabulary;
  if (stored.to_text() == now.to_text()) return;
  std::string where = fmt::format("{} tokens, the data's {}", stored.size(), now.size());
  if (stored.kind() == Vocabulary::Kind::characters && now.kind() == Vocabulary::Kind::characters)
    for (int32_t id = 0; id < static_cast<int32_t>(std::min(stored.size(), now.size())); ++id)
      if (stored.decode({id}) != now.decode({id})) {
        where = fmt::format("token {} is '{}' there, '{}' in the data", id, stored.decode({id}), now.decode({id}));
        break;
      }
  throw UserError(fmt::format("{}: trained on another vocabulary than {}'s data ({}): its token ids would mean other "
                              "characters; {}",
                              header.path, recipe.file, where, kOtherRun));
}

// Class indices mean the classes they meant: an image folder's, by name.
void check_same_classes(const Recipe& recipe, const Dataset& data, const CheckpointHeader& header) {
  if (header.class_names.empty() || data.class_names.empty() || header.class_names == data.class_names) return;
  throw UserError(fmt::format("{}: trained on the classes [{}], {}'s data has [{}]; {}", header.path,
                              fmt::join(header.class_names, ", "), recipe.file, fmt::join(data.class_names, ", "), kOtherRun));
}

// Settings that only shape training (a dropout rate, batch norm's momentum) may change.
bool changes_function(const std::string& setting) {
  static const std::set<std::string> kTrainingOnly{"dropout", "rate", "momentum"};
  return !kTrainingOnly.contains(setting);
}

void check_same_model(const Recipe& recipe, const Recipe& stored, const CheckpointHeader& header) {
  const ModelSpec &now = recipe.model(), &then = stored.model();
  DT_USER_CHECK(now.layers.size() == then.layers.size(), "{}: its model has {} layers, {}'s has {}; {}", header.path,
                then.layers.size(), recipe.file, now.layers.size(), kOtherRun);
  for (size_t i = 0; i < now.layers.size(); ++i) {
    const Layer &a = *then.layers[i].prototype, &b = *now.layers[i].prototype;
    DT_USER_CHECK(a.type() == b.type() && a.name() == b.name(), "{}: {}: the checkpoint's model has {} '{}' there, {} has {} '{}'; {}",
                  header.path, now.layers[i].key, a.type(), a.name(), recipe.file, b.type(), b.name(), kOtherRun);
    const Json was = a.settings(), is = b.settings();
    for (const auto& [key, value] : is.items())
      if (changes_function(key) && was.contains(key) && was.at(key) != value)
        throw UserError(fmt::format("{}: {}.{}: the checkpoint's model has {}, {} has {}; the weights would compute another "
                                    "function; {}",
                                    header.path, now.layers[i].key, key, was.at(key).dump(), recipe.file, value.dump(), kOtherRun));
  }
}

}  // namespace

void check_resumable(const Recipe& recipe, const Dataset& data, const CheckpointHeader& header) {
  std::optional<Recipe> stored;
  try {
    stored = parse_recipe(header.recipe, header.path);
  } catch (const UserError&) {
    // a recipe this version no longer reads: only the vocabulary can be compared
  }
  if (stored) check_same_dataset(recipe, *stored, header);
  check_same_vocabulary(recipe, data, header);
  check_same_classes(recipe, data, header);
  if (stored) check_same_model(recipe, *stored, header);
}

}  // namespace distrain
