// libFuzzer target: recipe text and --set overrides, as `distrain train RECIPE --set ...`
// reads them. The input is the recipe; lines after a line "#--set" are KEY=VALUE
// overrides. Bad input must end in a UserError; anything else (a crash, a sanitizer
// report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/recipe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  static const std::string kMarker = "\n#--set\n";
  const size_t at = input.find(kMarker);
  std::vector<std::string> overrides;
  if (at != std::string::npos) {
    size_t pos = at + kMarker.size();
    while (pos <= input.size()) {
      const size_t end = std::min(input.find('\n', pos), input.size());
      overrides.push_back(input.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  try {
    const distrain::Recipe r = distrain::parse_recipe(input.substr(0, at), "fuzz.toml", overrides);
    (void)r.resolved_text();
  } catch (const distrain::UserError&) {
  }
  return 0;
}
