#include "core/base/log.hpp"

#include <atomic>

namespace distrain::log {

namespace {
std::atomic<int> g_rank{0};
}

void set_rank(int r) { g_rank = r; }
int rank() { return g_rank; }

}  // namespace distrain::log
