#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/commands.hpp"
#include "core/base/error.hpp"

namespace distrain::cli {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string labelled_lines(const std::string& label, const std::string& text) {
  constexpr size_t kWidth = 80, kIndent = 12;
  std::string out = label + std::string(kIndent > label.size() ? kIndent - label.size() : 1, ' ');
  size_t column = out.size();
  for (size_t at = 0; at < text.size();) {
    const size_t space = text.find(' ', at);
    const std::string word = text.substr(at, space == std::string::npos ? std::string::npos : space - at);
    at = space == std::string::npos ? text.size() : space + 1;
    if (column > kIndent && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(kIndent, ' ');
      column = kIndent;
    } else if (column > kIndent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out + "\n";
}

CLI::Validator at_least(long long lowest) {
  return CLI::Validator(
      [lowest](std::string& text) -> std::string {
        long long value = 0;
        if (CLI::detail::lexical_cast(text, value) && value >= lowest) return "";
        return "must be a whole number of at least " + std::to_string(lowest) + ", got '" + text + "'";
      },
      "INT>=" + std::to_string(lowest));
}

CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits && (std::strtoull(text.c_str(), nullptr, 10), errno == 0)) return "";
        return "must be a whole number from 0 to 18446744073709551615, got '" + text + "'";
      },
      "UINT64");
}

void check_output_file(const NamedPath& out, const std::vector<NamedPath>& inputs) {
  namespace fs = std::filesystem;
  const fs::path path(out.path);
  std::error_code ec;
  for (const NamedPath& in : inputs)
    DT_USER_CHECK(!fs::equivalent(path, in.path, ec), "{} {}: is the {} file {}; writing it would destroy it: choose another name",
                  out.flag, out.path, in.flag, in.path);
  DT_USER_CHECK(!fs::is_directory(path, ec), "{} {}: is a folder; name a file (inside it, for example)", out.flag, out.path);
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  DT_USER_CHECK(fs::is_directory(folder, ec), "{} {}: the folder {} does not exist", out.flag, out.path, folder.string());
  DT_USER_CHECK(::access(folder.c_str(), W_OK) == 0, "{} {}: the folder {} is not writable ({})", out.flag, out.path,
                folder.string(), std::strerror(errno));
  DT_USER_CHECK(!fs::exists(path, ec) || ::access(path.c_str(), W_OK) == 0, "{} {}: not writable ({})", out.flag, out.path,
                std::strerror(errno));
}

void print_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  flush_stdout();
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int error = errno ? errno : EIO;
  std::clearerr(stdout);
  throw UserError(fmt::format("standard output: cannot write ({})", std::strerror(error)));
}

bool is_user_condition(const std::error_code& code) {
  if (code.category() != std::generic_category() && code.category() != std::system_category()) return false;
  switch (code.value()) {
    case ENOSPC: case EDQUOT: case EACCES: case EPERM: case EROFS: case ENOTDIR: case EISDIR: case ENOENT:
    case EEXIST: case ENAMETOOLONG: case ELOOP: case EXDEV: case EBUSY: case ENOTEMPTY:
      return true;
    default:
      return false;
  }
}

}  // namespace distrain::cli
