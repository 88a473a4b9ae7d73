// distrain: train neural networks from TOML recipes on one device or many.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "cli/commands.hpp"
#include "core/base/edit_distance.hpp"
#include "core/base/error.hpp"
#include "core/base/h5_id.hpp"
#include "core/base/log.hpp"
#include "core/base/openmp_wait.hpp"
#include "core/base/stop_signal.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace {

// A recipe key given as a flag (--epochs 1, as Keras and PyTorch scripts take it): the
// --set that says it, when CLI11 found the flag unexpected.
std::string recipe_flag_hint(const std::string& parse_error, int argc, char** argv) {
  static const std::map<std::string, std::string> kKeys{
      {"--epochs", "train.epochs"},          {"--lr", "optimizer.learning_rate"},
      {"--learning-rate", "optimizer.learning_rate"}, {"--learning_rate", "optimizer.learning_rate"},
      {"--batch-size", "strategy.per_replica_batch"}, {"--batch_size", "strategy.per_replica_batch"},
      {"--steps", "train.steps"},            {"--max-steps", "train.steps"},
      {"--max_steps", "train.steps"},        {"--max-iters", "train.steps"},
      {"--max_iters", "train.steps"},        {"--seed", "seed"},
      {"--devices", "strategy.devices"}};
  if (parse_error.find("not expected") == std::string::npos) return "";
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value = i + 1 < argc ? argv[i + 1] : "VALUE";
    if (const size_t eq = flag.find('='); eq != std::string::npos) value = flag.substr(eq + 1), flag.resize(eq);
    if (const auto it = kKeys.find(flag); it != kKeys.end()) return fmt::format("; use --set {}={}", it->second, value);
  }
  return "";
}


// A first word that is no subcommand (distrain trian): the one most likely meant.
std::string subcommand_hint(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string best;
  size_t best_distance = 3;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (const size_t d = distrain::edit_distance(word, sub->get_name()); d < best_distance) best = sub->get_name(), best_distance = d;
  return best.empty() ? fmt::format("; '{}' is not a command", word)
                      : fmt::format("; '{}' is not a command: did you mean {}?", word, best);
}

// eval, predict, export and generate given a checkpoint without --ckpt (distrain eval runs/x).
std::string checkpoint_hint(const std::string& parse_error, int argc, char** argv) {
  if (parse_error.find("--ckpt is required") == std::string::npos) return "";
  for (int i = 2; i < argc; ++i)
    if (argv[i][0] != '-' && (i == 2 || argv[i - 1][0] != '-'))
      return fmt::format("; give the checkpoint (or run folder) after --ckpt: distrain {} --ckpt {}", argv[1], argv[i]);
  return "";
}

// What to type instead, for the common ways a command line goes wrong.
std::string usage_hint(const CLI::App& app, const std::string& parse_error, int argc, char** argv) {
  if (parse_error.find("A subcommand is required") != std::string::npos) return subcommand_hint(app, argc, argv);
  return recipe_flag_hint(parse_error, argc, argv) + checkpoint_hint(parse_error, argc, argv);
}

// stdout is buffered when it is a file or a pipe: what the command printed before failing
// goes out first, so that the error is the last line and never lands inside another.
template <typename... Args>
void print_error(fmt::format_string<Args...> format, Args&&... args) {
  std::fflush(stdout);
  fmt::print(stderr, format, std::forward<Args>(args)...);
}

}  // namespace

int main(int argc, char** argv) {
  distrain::set_openmp_wait(argv);   // first: it may run this executable again, with OpenMP's wait set
  distrain::start_signal_watcher();  // before any thread: every later one inherits the blocked stop signals
  distrain::quiet_hdf5();            // before any other HDF5 call
  CLI::App app{"distrain: train neural networks from TOML recipes on one device or many"};
  app.set_version_flag("--version", std::string("distrain ") + DISTRAIN_VERSION);
  app.require_subcommand(1);
  distrain::cli::register_train(app);
  distrain::cli::register_eval(app);
  distrain::cli::register_predict(app);
  distrain::cli::register_export(app);
  distrain::cli::register_generate(app);
  distrain::cli::register_check(app);
  distrain::cli::register_info(app);
  distrain::cli::register_bench(app);
  distrain::cli::register_compare(app);
  distrain::cli::register_plan(app);
  distrain::cli::register_tokenize(app);
  distrain::cli::register_tokenizer(app);
  distrain::cli::register_import(app);
  // Under mpirun/srun every rank reports errors with its number, and one failing rank
  // ends the job (MPI_Abort) so that no other waits forever in a collective.
  const bool mpi = distrain::launched_by_mpi();
  if (mpi) {
    distrain::ensure_mpi();
    distrain::log::set_rank(distrain::launcher_rank());
  }
  // `info` reports on the machine under any launcher's variables: it starts no run.
  const bool info = argc > 1 && std::string_view(argv[1]) == "info";
  try {
    if (!info) distrain::check_launch();
  } catch (const distrain::UserError& e) {
    print_error("{}error: {}\n", distrain::log::prefix(), e.what());
    distrain::mpi_finalize();  // each process alone in its world: no abort needed
    return distrain::cli::kExitUsage;
  }
  auto fail = [&](int code) {
    if (mpi && distrain::launcher_size() > 1) distrain::mpi_abort(code);
    distrain::mpi_finalize();
    return code;
  };
  try {
    app.parse(argc, argv);
    distrain::cli::flush_stdout();  // a command's last lines: written, or an error
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error("{}error: {}{} (see distrain --help)\n", distrain::log::prefix(), e.what(),
               usage_hint(app, e.what(), argc, argv));
    return fail(distrain::cli::kExitUsage);
  } catch (const distrain::cli::ExitCode& e) {
    distrain::mpi_finalize();
    return e.code;
  } catch (const distrain::UserError& e) {
    print_error("{}error: {}\n", distrain::log::prefix(), e.what());
    return fail(distrain::cli::kExitUsage);
  } catch (const std::bad_alloc&) {  // the batch or model is too large for this machine: the user's to change
    print_error("{}error: out of memory; lower strategy.per_replica_batch or train.eval_batch, or make the "
               "model smaller\n", distrain::log::prefix());
    return fail(distrain::cli::kExitUsage);
  } catch (const std::filesystem::filesystem_error& e) {
    // A full disk, a path through a file, a folder without permission: the machine's state, not a bug.
    const bool user = distrain::cli::is_user_condition(e.code());
    print_error("{}{}: {}{}\n", distrain::log::prefix(), user ? "error" : "internal error", e.what(),
               user ? "; check the path, its permissions and free space" : "");
    return fail(user ? distrain::cli::kExitUsage : distrain::cli::kExitInternal);
  } catch (const std::exception& e) {
    print_error("{}internal error: {}\n", distrain::log::prefix(), e.what());
    return fail(distrain::cli::kExitInternal);
  }
  distrain::mpi_finalize();
  return 0;
}
