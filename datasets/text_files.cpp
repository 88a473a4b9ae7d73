#include "datasets/text_files.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

bool is_pattern(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

// Files distrain itself writes beside text (token caches) and hidden files are no documents.
bool is_document(const fs::path& file) {
  const std::string name = file.filename().string();
  return !name.starts_with(".") && !name.ends_with(".tokens") && !name.ends_with(".tokens.partial");
}

std::vector<std::string> folder_files(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_document(it->path())) files.push_back(it->path().string());
  }
  DT_USER_CHECK(!ec, "{}: cannot list the folder: {} (data.path)", folder, ec.message());
  DT_USER_CHECK(!files.empty(), "{}: the folder holds no text files (data.path)", folder);
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> pattern_files(const std::string& pattern) {
  glob_t matches{};
  const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> files;
  for (size_t i = 0; rc == 0 && i < matches.gl_pathc; ++i) {
    std::error_code ec;
    if (fs::is_regular_file(matches.gl_pathv[i], ec) && is_document(matches.gl_pathv[i])) files.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  DT_USER_CHECK(rc == 0 || rc == GLOB_NOMATCH, "{}: cannot search for the pattern's files (data.path)", pattern);
  DT_USER_CHECK(!files.empty(), "{}: the pattern matches no file (data.path){}", pattern, relative_note(pattern));
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> text_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return folder_files(path);
  if (is_pattern(path) && !fs::exists(path, ec)) return pattern_files(path);
  const std::string problem = not_a_file(path);
  DT_USER_CHECK(problem.empty(), "{}: {} (data.path){}", path, problem, problem == "not found" ? relative_note(path) : "");
  return {path};
}

std::string read_whole(const std::string& path, int64_t size) {
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  DT_USER_CHECK(in && in.gcount() == size, "{}: cannot read all {} bytes (data.path)", path, size);
  return text;
}

}  // namespace

std::vector<TextDocument> read_text_documents(const std::string& path) {
  const std::vector<std::string> files = text_files(path);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    sizes.push_back(static_cast<int64_t>(fs::file_size(file, ec)));
    DT_USER_CHECK(!ec, "{}: cannot read its size ({}) (data.path)", file, ec.message());
    total += sizes.back();
  }
  // The text, its code points and its ids: about 13 bytes for each byte of a file.
  const std::optional<int64_t> available = available_host_memory();
  DT_USER_CHECK(!available || 13 * total <= *available, "{}: {} of text need about {} in memory, more than the {} free",
                path, format_bytes(total), format_bytes(13 * total), format_bytes(*available));
  std::vector<TextDocument> documents;
  for (size_t i = 0; i < files.size(); ++i) documents.push_back({files[i], read_whole(files[i], sizes[i])});
  return documents;
}

std::string token_cache_stem(const std::string& path, const std::vector<TextDocument>& documents) {
  std::error_code ec;
  if (documents.size() == 1 && fs::is_regular_file(path, ec)) return path;
  fs::path folder;  // the folder, or the pattern's part before its first wildcard
  if (fs::is_directory(path, ec)) {
    folder = path;
  } else {
    for (const fs::path& part : fs::path(path).parent_path()) {
      if (is_pattern(part.string())) break;
      folder /= part;
    }
  }
  return (folder / ".distrain").string();
}

}  // namespace distrain
