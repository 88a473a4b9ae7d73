#include "core/base/log.hpp"

#include <atomic>

namespace distrain::log {

namespace {
std::atomic<int> g_rank{0};
std::atomic<bool> g_leader{true};
std::atomic<bool> g_ranked{false};
std::atomic<std::FILE*> g_info{stdout};
}  // namespace

void set_rank(int r) {
  g_rank = r;
  g_leader = r == 0;
  g_ranked = true;
}
std::string prefix() { return g_ranked ? fmt::format("[rank {}] ", g_rank.load()) : ""; }
int rank() { return g_rank; }
void set_leader(bool leader) { g_leader = leader; }
bool leader() { return g_leader; }
void set_info_stream(std::FILE* stream) { g_info = stream; }
std::FILE* info_stream() { return g_info; }

}  // namespace distrain::log
