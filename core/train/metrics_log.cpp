#include "core/train/metrics_log.hpp"

#include <fstream>

#include "core/base/json.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

Json mean_or_null(const LossStats& s) { return s.count ? Json(s.mean_loss()) : Json(nullptr); }
Json accuracy_or_null(const LossStats& s) { return s.count ? Json(s.accuracy()) : Json(nullptr); }

}  // namespace

void append_metrics(const fs::path& file, const EpochReport& r, bool complete) {
  const Json line = {{"epoch", r.epoch},
                     {"step", r.step},
                     {"loss", r.train.mean_loss()},
                     {"accuracy", r.train.accuracy()},
                     {"val_loss", mean_or_null(r.validation)},
                     {"val_accuracy", accuracy_or_null(r.validation)},
                     {"learning_rate", r.learning_rate},
                     {"images_per_sec", r.images_per_sec},
                     {"seconds", r.seconds},
                     {"complete", complete}};
  std::ofstream(file, std::ios::app) << dump_line(line) << "\n";
}

void trim_metrics(const fs::path& file, int64_t completed_epochs) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("epoch") && j["epoch"].is_number_integer() && j["epoch"].get<int64_t>() <= completed_epochs)
      kept += line + "\n";
  }
  in.close();
  std::ofstream(file, std::ios::trunc) << kept;
}

void write_summary(const fs::path& file, const std::string& name, const TrainSummary& s) {
  const Json summary = {{"name", name},
                        {"steps", s.steps},
                        {"epochs_completed", s.epochs},
                        {"loss", s.loss},
                        {"accuracy", s.accuracy},
                        {"val_loss", s.validated ? Json(s.val_loss) : Json(nullptr)},
                        {"val_accuracy", s.validated ? Json(s.val_accuracy) : Json(nullptr)},
                        {"train_seconds", s.train_seconds},
                        {"images_per_sec", s.images_per_sec},
                        {"last_checkpoint", s.last_checkpoint}};
  std::ofstream(file) << dump_line(summary) << "\n";
}

}  // namespace distrain
