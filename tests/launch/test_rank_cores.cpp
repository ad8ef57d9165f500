// test_rank_cores.cpp — a GPU rank's default --data-threads from made-up CPU facts
// (launch/rank_cores.hpp): one rank on a 16-core H100 node, ranks sharing an unbound
// node, Slurm's --cpus-per-task, masks bound per core or per socket, unknown facts, and
// SLURM_CPUS_PER_TASK read from a made-up environment.
#include <gtest/gtest.h>

#include <sched.h>

#include "launch/rank_cores.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

RankCpus cpus(int affinity, int online, int slurm, int local) {
  RankCpus c;
  c.affinity = affinity, c.online = online, c.slurm_cpus_per_task = slurm, c.local_ranks = local;
  return c;
}

TEST(RankCores, OneRankOnASixteenCoreNodeFeedsFromFifteen) {
  // The H100 node of the 2026-11-27 run: 16 cores, one rank, mpiexec --bind-to none.
  EXPECT_EQ(rank_cores(cpus(16, 16, 0, 1)), 16);
  EXPECT_EQ(gpu_default_data_threads(cpus(16, 16, 0, 1)), 15);
}

TEST(RankCores, UnboundRanksShareTheNode) {
  // mpirun --bind-to none: every rank's mask is the whole node.
  EXPECT_EQ(gpu_default_data_threads(cpus(16, 16, 0, 4)), 3);
  EXPECT_EQ(gpu_default_data_threads(cpus(128, 128, 0, 8)), 15);
  // Bound to a socket: 4 ranks on each 64-core socket of a 128-core node.
  EXPECT_EQ(gpu_default_data_threads(cpus(64, 128, 0, 8)), 15);
}

TEST(RankCores, DisjointMasksAreTakenAsTheyAre) {
  EXPECT_EQ(gpu_default_data_threads(cpus(8, 64, 0, 8)), 7);   // 8 cores each, 8 ranks
  EXPECT_EQ(gpu_default_data_threads(cpus(4, 16, 0, 2)), 3);   // a smaller mask than the share
}

TEST(RankCores, SlurmCpusPerTaskCapsTheMask) {
  EXPECT_EQ(gpu_default_data_threads(cpus(8, 64, 8, 4)), 7);    // srun bound the task to its CPUs
  EXPECT_EQ(gpu_default_data_threads(cpus(64, 64, 12, 4)), 11);  // --cpu-bind=none: the mask is the node
  EXPECT_EQ(gpu_default_data_threads(cpus(64, 64, 32, 4)), 15);  // more than the share: the share
}

TEST(RankCores, NeverBelowOneThread) {
  EXPECT_EQ(gpu_default_data_threads(cpus(1, 16, 0, 1)), 1);   // bound to one core
  EXPECT_EQ(gpu_default_data_threads(cpus(2, 2, 0, 4)), 1);    // more ranks than cores
  EXPECT_EQ(gpu_default_data_threads(cpus(0, 0, 0, 1)), 1);    // nothing known
  EXPECT_EQ(gpu_default_data_threads(cpus(0, 16, 0, 1)), 15);  // no mask: the node's cores
  EXPECT_EQ(gpu_default_data_threads(cpus(16, 16, 0, 0)), 15); // a local rank count of 0 counts as 1
}

TEST(RankCores, ThisProcessReadsItsMaskAndSlurmsVariable) {
  const RankCpus c = this_rank_cpus(3, map_env({{"SLURM_CPUS_PER_TASK", "6"}}));
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(c.affinity, CPU_COUNT(&set));
  EXPECT_GE(c.online, c.affinity);
  EXPECT_EQ(c.slurm_cpus_per_task, 6);
  EXPECT_EQ(c.local_ranks, 3);
  EXPECT_EQ(this_rank_cpus(1, map_env({})).slurm_cpus_per_task, 0);
  try {
    this_rank_cpus(1, map_env({{"SLURM_CPUS_PER_TASK", "six"}}));
    ADD_FAILURE() << "SLURM_CPUS_PER_TASK=six was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_CPUS_PER_TASK"), std::string::npos) << e.what();
  }
}

}  // namespace
