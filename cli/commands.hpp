// One registration function per subcommand (cli/cmd_<name>.cpp). Each adds its
// subcommand and flags to the app and a callback that throws on failure; main.cpp
// reports errors and sets the exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <system_error>
#include <vector>

namespace distrain::cli {

void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_predict(CLI::App& app);
void register_export(CLI::App& app);
void register_generate(CLI::App& app);
void register_check(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_compare(CLI::App& app);
void register_plan(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_tokenizer(CLI::App& app);
void register_import(CLI::App& app);

// Thrown by a command to end with a given exit code and no error message.
struct ExitCode {
  int code;
};

// Exit codes: 0 success, 1 internal error, 2 bad input (recipe, data, checkpoint, flags),
// 3 stopped by SIGTERM/SIGINT with a checkpoint saved: rerun to resume. Not 128+signal
// (143, 130), which a shell reports for a process the signal killed, having saved nothing
// (as a second signal does): a job script can tell the two apart.
constexpr int kExitInternal = 1;
constexpr int kExitUsage = 2;
constexpr int kExitStopped = 3;

bool stdout_is_terminal();

// A whole-number flag of at least `lowest`, refused in plain words (CLI11's own range
// checks print their bounds as doubles: "not in range 0.000000 to 1797...").
CLI::Validator at_least(long long lowest);
// A whole number of 0 to 2^64 - 1 written in digits alone (a seed): CLI11 would take "-1"
// as 2^64 - 1 and clamp a larger number to it.
CLI::Validator unsigned_64();

// --out FILE checked before any work: not (a link to) one of `inputs` (flag, path), which
// writing it would destroy; not a folder; in a folder that exists and can be written.
struct NamedPath {
  std::string flag, path;
};
void check_output_file(const NamedPath& out, const std::vector<NamedPath>& inputs);

// Text to standard output, flushed: a full disk or a closed pipe is a UserError then, not
// text lost behind an exit code of 0.
void print_out(const std::string& text);
// What is left in standard output's buffer, flushed with the same check.
void flush_stdout();

// "label       text" with the text cut between words to stay within 80 columns, its
// further lines indented under its first (the labels of check's and plan's reports are
// 12 columns wide).
std::string labelled_lines(const std::string& label, const std::string& text);

// Errors of the file system the user can fix (no space, no permission, not a folder, no
// such file), as opposed to a bug in distrain.
bool is_user_condition(const std::error_code& code);

}  // namespace distrain::cli
