// JSON through nlohmann/json. Keys keep their insertion order, so files read in the order
// they are documented; output is one line. A path may hold bytes that are not UTF-8: they
// become U+FFFD rather than an exception at the end of a run.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace distrain {

using Json = nlohmann::ordered_json;

inline std::string dump_line(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace distrain
