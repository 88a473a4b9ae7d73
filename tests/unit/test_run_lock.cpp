// One trainer per run folder: the lock excludes a second holder, names the first's PID,
// and is free again once released; partial saves are recognised for the start-up cleanup.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/base/error.hpp"
#include "core/io/checkpoint.hpp"
#include "core/train/run_lock.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

TEST_CASE("run lock: a second holder is refused, naming the first's PID") {
  // Per process: test binaries of several checkouts may run at once.
  const fs::path dir = fs::temp_directory_path() / ("distrain_lock_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    const RunLock first(dir.string());
    std::string message;
    try {
      const RunLock second(dir.string());
    } catch (const UserError& e) {
      message = e.what();
    }
    CHECK(message.find(dir.string() + ": another distrain train (PID " + std::to_string(::getpid()) + ")") != std::string::npos);
  }
  CHECK_NOTHROW(RunLock(dir.string()));  // released with its holder
  fs::remove_all(dir);
}

TEST_CASE("run lock: partial saves are told from checkpoints") {
  CHECK(is_partial_save("run/ckpt-000010.h5.tmp.4242"));
  CHECK(is_partial_save("run/events.out.tfevents.1.host.tmp"));
  CHECK_FALSE(is_partial_save("run/ckpt-000010.h5"));
  CHECK_FALSE(is_partial_save("run/.lock"));
}

}  // namespace
}  // namespace distrain::test
