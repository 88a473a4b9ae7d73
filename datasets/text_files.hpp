// The text of dataset = "text": data.path names one file, a folder (its files, in every
// subfolder, by path; hidden files and distrain's token caches left out) or a glob
// pattern (*, ?, [...]; its matching files, by path). Each file is one document.
#pragma once
#include <string>
#include <vector>

namespace distrain {

struct TextDocument {
  std::string path;
  std::string text;  // the file's bytes, not yet checked as UTF-8
};

// The documents of `path`, in order; a missing file, an empty folder or a pattern that
// matches nothing is a UserError naming data.path.
std::vector<TextDocument> read_text_documents(const std::string& path);

// Where a token cache for `path`'s documents goes: beside a single file
// ("<file>"), else in the folder (or the pattern's folder before its first wildcard) as
// "<folder>/.distrain"; the
// cache's name adds the hashes to it.
std::string token_cache_stem(const std::string& path, const std::vector<TextDocument>& documents);

}  // namespace distrain
