// gpu_gtest_main.cpp — main() for single-process GPU GoogleTest executables: runs all
// tests and exits 77 (CTest SKIP) when every test skipped (no CUDA device), so that a
// machine without a GPU shows SKIP rather than a pass that tested nothing.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (RUN_ALL_TESTS() != 0) return 1;
  const auto* u = ::testing::UnitTest::GetInstance();
  if (u->test_to_run_count() > 0 && u->skipped_test_count() == u->test_to_run_count()) return 77;
  return 0;
}
