// mpi_gtest_main.cpp — main() for GoogleTest executables run under mpiexec: MPI is
// initialised once, every rank runs every test, and the process exit status is
// non-zero on every rank if any rank failed (so CTest sees one verdict).
// A test binary that finds no GPU where it needs one exits 77 (CTest SKIP).
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    // Keep failures visible on every rank, but only rank 0 prints the progress lines.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Every test of the binary skipped on every rank → exit 77 (CTest SKIP).
  int ran = ::testing::UnitTest::GetInstance()->test_to_run_count() -
            ::testing::UnitTest::GetInstance()->skipped_test_count();
  int any_ran = 0;
  MPI_Allreduce(&ran, &any_ran, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (any_failed) return 1;
  if (any_ran == 0 && ::testing::UnitTest::GetInstance()->skipped_test_count() > 0) return 77;
  return 0;
}
