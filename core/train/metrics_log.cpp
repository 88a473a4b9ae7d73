#include "core/train/metrics_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <unistd.h>

#include "core/base/error.hpp"
#include "core/base/json.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

Json mean_or_null(const LossStats& s) { return s.count ? Json(s.mean_loss()) : Json(nullptr); }
Json accuracy_or_null(const LossStats& s) { return s.count ? Json(s.accuracy()) : Json(nullptr); }

// Writes (appends) text to file, or throws naming the file and why: a full disk must stop
// the run with a clear message, not leave a metrics file missing epochs without a word.
void write_text(const fs::path& file, const std::string& text, std::ios::openmode mode) {
  errno = 0;
  std::ofstream out(file, mode);
  if (out) out << text << std::flush;
  DT_USER_CHECK(out.good(), "{}: cannot write ({}); check free space and permissions of the run folder", file.string(),
                errno ? std::strerror(errno) : "write failed");
}

// Replaces file atomically: a crash or a full disk leaves the old file (or none), never
// half of the new one.
void replace_text(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp." + std::to_string(::getpid());
  try {
    write_text(tmp, text, std::ios::trunc);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fs::rename(tmp, file);
}

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
                     {"grad_norm", r.grad_norm ? Json(*r.grad_norm) : Json(nullptr)},
                     {"complete", complete}};
  write_text(file, dump_line(line) + "\n", std::ios::app);
}

void trim_metrics(const fs::path& file, int64_t completed_epochs) {
  if (!fs::is_regular_file(file)) return;  // none yet; anything else fails, named, at the first append
  std::ifstream in(file);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("epoch") && j["epoch"].is_number_integer() && j["epoch"].get<int64_t>() <= completed_epochs)
      kept += line + "\n";
  }
  in.close();
  replace_text(file, kept);
}

bool summary_from_metrics(const fs::path& file, TrainSummary& s) {
  std::ifstream in(file);
  Json last;
  double seconds = 0;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("loss")) continue;
    seconds += j.value("seconds", 0.0);
    last = j;
  }
  if (last.is_null()) return false;
  const auto number = [&](const char* key) { return last[key].is_number() ? last[key].get<double>() : 0.0; };
  s.loss = number("loss");
  s.accuracy = number("accuracy");
  s.validated = last["val_loss"].is_number();
  s.val_loss = number("val_loss");
  s.val_accuracy = number("val_accuracy");
  s.train_seconds = seconds;
  s.images_per_sec = number("images_per_sec");
  return true;
}

void write_summary(const fs::path& file, const std::string& name, const TrainSummary& s) {
  Json summary = {{"name", name},
                        {"steps", s.steps},
                        {"epochs_completed", s.epochs},
                        {"loss", s.loss},
                        {"accuracy", s.accuracy},
                        {"val_loss", s.validated ? Json(s.val_loss) : Json(nullptr)},
                        {"val_accuracy", s.validated ? Json(s.val_accuracy) : Json(nullptr)},
                        {"train_seconds", s.train_seconds},
                        {"images_per_sec", s.images_per_sec},
                        {"skipped_steps", s.skipped_steps},
                        {"last_checkpoint", s.last_checkpoint}};
  if (!s.monitored.empty() && !std::isnan(s.best.best))
    summary["best"] = {{"monitor", s.monitored}, {"value", s.best.best}, {"step", s.best.best_step}};
  if (s.best.stopped_early) summary["stopped_early_at"] = s.steps;
  replace_text(file, dump_line(summary) + "\n");
}

}  // namespace distrain
