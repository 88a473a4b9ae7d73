// The unit-test runner. Tests write under std::filesystem::temp_directory_path(); each
// run of this binary points TMPDIR at a folder of its own (removed at the end), so two
// runs of the suite, or ctest -j, never share a folder name such as distrain_eq_one.
// In a build with CUDA, the GPU cases load the build's plugin unless
// DISTRAIN_CUDA_PLUGIN names another (bench/gpu_session.sh names the bundle's).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
#ifdef DISTRAIN_TEST_CUDA_PLUGIN
  setenv("DISTRAIN_CUDA_PLUGIN", DISTRAIN_TEST_CUDA_PLUGIN, 0);
#endif
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/distrain_unit.XXXXXX";
  const char* own = mkdtemp(pattern.data());
  if (own) setenv("TMPDIR", own, 1);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (own) {
    std::error_code ignored;
    std::filesystem::remove_all(own, ignored);
  }
  return result;
}
