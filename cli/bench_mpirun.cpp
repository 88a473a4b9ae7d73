// bench's points as JSON, and a point measured by `mpirun -np N` of this executable.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/bench_args.hpp"
#include "cli/bench_load.hpp"
#include "cli/commands.hpp"
#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/base/stop_signal.hpp"

namespace distrain::cli {

Json to_json(const Measured& m, const std::string& recipe_name) {
  return {{"recipe", recipe_name},
          {"strategy", m.strategy},
          {"replicas", m.replicas},
          {"global_batch", m.global_batch},
          {"threads", m.threads},
          {"images_per_sec", m.images_per_sec},
          {"tokens_per_example", m.tokens_per_example},
          {"step_ms", {{"min", m.min_ms}, {"median", m.median_ms}, {"max", m.max_ms}}},
          {"comm_share", m.comm_share},
          {"steps", m.steps},
          {"read_every", m.read_every},
          {"sent_per_step",
           {{"data_bytes", m.data_bytes},
            {"data_collectives", m.data_collectives},
            {"tensor_bytes", m.tensor_bytes},
            {"tensor_collectives", m.tensor_collectives},
            {"theory", m.theory.formula},
            {"theory_bytes", m.theory.bytes}}},
          {"pipeline",
           {{"layout", m.pipeline},
            {"idle_per_stage", m.stage_idle},
            {"idle_theory", m.idle_theory},
            {"activation_bytes_per_stage", m.stage_activations}}},
          {"memory_per_replica",
           {{"parameters", m.memory.parameters},
            {"gradients", m.memory.gradients},
            {"optimizer", m.memory.optimizer},
            {"activations", m.memory.activations}}},
          {"device_memory_peak", {{"device", m.device}, {"bytes", m.device_peak}}},
          {"device_memory_per_replica", m.replica_memory},
          {"update", {{"ms", m.update_ms}, {"parameters", m.updated}, {"place", m.update_place},
                      {"reference_gb_per_s", m.reference_gbps}}}};
}

Measured measured_from_json(const Json& j) {
  Measured m;
  m.strategy = j.at("strategy").get<std::string>();
  m.replicas = j.at("replicas").get<int>();
  m.global_batch = j.at("global_batch").get<int64_t>();
  m.threads = j.at("threads").get<int>();
  m.images_per_sec = j.at("images_per_sec").get<double>();
  m.tokens_per_example = j.value("tokens_per_example", int64_t{1});  // absent: an image model
  m.min_ms = j.at("step_ms").at("min").get<double>();
  m.median_ms = j.at("step_ms").at("median").get<double>();
  m.max_ms = j.at("step_ms").at("max").get<double>();
  m.comm_share = j.at("comm_share").get<double>();
  m.steps = j.at("steps").get<int64_t>();
  m.read_every = j.at("read_every").get<int64_t>();
  const Json& sent = j.at("sent_per_step");
  m.data_bytes = sent.at("data_bytes").get<double>();
  m.data_collectives = sent.at("data_collectives").get<double>();
  m.tensor_bytes = sent.at("tensor_bytes").get<double>();
  m.tensor_collectives = sent.value("tensor_collectives", 0.0);  // absent from older bench JSON
  m.theory = {sent.at("theory").get<std::string>(), sent.at("theory_bytes").get<double>()};
  if (const auto p = j.find("pipeline"); p != j.end()) {
    m.pipeline = p->at("layout").get<std::string>();
    m.stage_idle = p->at("idle_per_stage").get<std::vector<double>>();
    m.idle_theory = p->at("idle_theory").get<double>();
    m.stage_activations = p->at("activation_bytes_per_stage").get<std::vector<int64_t>>();
  }
  const Json& mem = j.at("memory_per_replica");
  m.memory = {mem.at("parameters").get<int64_t>(), mem.at("gradients").get<int64_t>(), mem.at("optimizer").get<int64_t>(),
              mem.at("activations").get<int64_t>()};
  const Json& peak = j.at("device_memory_peak");
  m.device = peak.at("device").get<std::string>();
  m.device_peak = peak.at("bytes").get<int64_t>();
  if (const auto r = j.find("device_memory_per_replica"); r != j.end())
    m.replica_memory = r->get<std::vector<std::pair<int64_t, int64_t>>>();
  if (const auto u = j.find("update"); u != j.end()) {
    m.update_ms = u->at("ms").get<double>();
    m.updated = u->at("parameters").get<int64_t>();
    m.update_place = u->at("place").get<std::string>();
    m.reference_gbps = u->at("reference_gb_per_s").get<double>();
  }
  return m;
}

namespace {

// The line of a child's output that best says what went wrong: the first naming an error,
// else the last one, so that our own error message stays on one line.
std::string telling_line(const std::string& out) {
  std::istringstream lines(out);
  std::string last = "(no output)";
  for (std::string line; std::getline(lines, line);) {
    if (line.find("error") != std::string::npos) return line.substr(0, 300);
    if (!line.empty()) last = line;
  }
  return last.substr(0, 300);
}

// The result object among the lines `mpirun -np n` printed; its own notices and the ranks'
// logs are not JSON and are skipped.
Json child_result(const std::string& out, int n) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) return j;
  }
  throw UserError(fmt::format("bench: `mpirun -np {}` printed no JSON result: {}", n, telling_line(out)));
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Measured measure_with_mpirun(const BenchArgs& a, const std::vector<std::string>& overrides, int n) {
  const int threads = std::max(1, cpu_threads() / n);
  std::string cmd = fmt::format("OMP_NUM_THREADS={} mpirun {}--oversubscribe --bind-to none -np {} {} bench {}", threads,
                                ::geteuid() == 0 ? "--allow-run-as-root " : "", n, shell_quote(self_path()), shell_quote(a.recipe));
  for (const auto& o : overrides) cmd += " --set " + shell_quote(o);
  cmd += fmt::format(" --steps {} --warmup {}", a.steps, a.warmup);
  if (a.read_every) cmd += fmt::format(" --read-every {}", a.read_every);
  cmd += " --json 2>&1";
  std::FILE* p = nullptr;
  {
    const StopSignalsUnblocked for_the_child;  // mpirun and its ranks must stop on SIGTERM and Ctrl-C
    p = ::popen(cmd.c_str(), "r");
  }
  DT_CHECK(p, "cannot run {}", cmd);
  std::string out;
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  const int rc = ::pclose(p);
  DT_USER_CHECK(rc == 0, "bench: `mpirun -np {}` failed (is openmpi-bin installed?): {}", n, telling_line(out));
  try {
    return measured_from_json(child_result(out, n));
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("bench: the result of `mpirun -np {}` is incomplete: {}", n, e.what()));
  }
}

}  // namespace distrain::cli
