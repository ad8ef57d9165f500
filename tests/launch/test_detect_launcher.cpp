// Launcher detection from the environment: each launcher, precedence, malformed values.
#include <gtest/gtest.h>

#include "launch/detect_launcher.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {
LaunchInfo detect(std::map<std::string, std::string> vars) { return detect_launcher(map_env(std::move(vars))); }

void expect_error(std::map<std::string, std::string> vars, const std::string& fragment) {
  try {
    detect(std::move(vars));
    FAIL() << "expected UserError containing '" << fragment << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(DetectLauncher, NoneIsSingleProcess) {
  auto i = detect({});
  EXPECT_EQ(i.kind, LauncherKind::none);
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.size, 1);
  EXPECT_FALSE(i.has_pmi);
}

TEST(DetectLauncher, SlurmStep) {
  auto i = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"},
                   {"SLURM_NNODES", "4"}, {"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_GPUS", "0,1"}});
  EXPECT_EQ(i.kind, LauncherKind::slurm);
  EXPECT_EQ(i.name, "srun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.node_id, 2);
  EXPECT_EQ(i.num_nodes, 4);
  EXPECT_EQ(i.job_id, "1234");
  EXPECT_EQ(i.gpus, "0,1");
  EXPECT_EQ(i.rank_var, "SLURM_PROCID");
}

TEST(DetectLauncher, SlurmStepSizeWinsOverJobSize) {
  auto i = detect({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_NUM_TASKS", "2"}});
  EXPECT_EQ(i.size, 2);
  EXPECT_EQ(i.size_var, "SLURM_STEP_NUM_TASKS");
}

TEST(DetectLauncher, SlurmJobGpusFallback) {
  auto i = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_GPUS", "3"}});
  EXPECT_EQ(i.gpus, "3");
}

TEST(DetectLauncher, OpenMpiMpirun) {
  auto i = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(i.kind, LauncherKind::mpirun);
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 4);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 2);
}

TEST(DetectLauncher, Torchrun) {
  auto i = detect({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"},
                   {"GROUP_RANK", "1"}});
  EXPECT_EQ(i.kind, LauncherKind::torchrun);
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.size, 4);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.node_id, 1);
}

TEST(DetectLauncher, PmixWinsAndKeepsSlurmDetails) {
  auto i = detect({{"PMIX_NAMESPACE", "slurm.pmix.12.0"}, {"PMIX_RANK", "3"}, {"SLURM_PROCID", "3"},
                   {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "12"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(i.kind, LauncherKind::pmix);
  EXPECT_EQ(i.name, "srun+pmix");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 4);
  EXPECT_EQ(i.job_id, "12");
  EXPECT_TRUE(i.has_pmi);
}

TEST(DetectLauncher, PmixAloneLeavesSizeUnknownForPmixGet) {
  auto i = detect({{"PMIX_NAMESPACE", "ns"}, {"PMIX_RANK", "0"}});
  EXPECT_EQ(i.kind, LauncherKind::pmix);
  EXPECT_EQ(i.size, -1);
}

TEST(DetectLauncher, SlurmBeatsMpirunAndTorchrun) {
  auto i = detect({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "7"}});
  EXPECT_EQ(i.kind, LauncherKind::slurm);
  EXPECT_EQ(i.rank, 1);
}

TEST(DetectLauncher, MpirunInsideAllocationIgnoresStaleSlurm) {
  // mpirun in an sbatch script: SLURM_PROCID=0 describes the batch shell.
  auto i = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                   {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(i.kind, LauncherKind::mpirun);
  EXPECT_EQ(i.rank, 2);
}

TEST(DetectLauncher, MpirunBeatsTorchrun) {
  auto i = detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(i.kind, LauncherKind::mpirun);
}

TEST(DetectLauncher, Pmi2MarksPmiAvailable) {
  auto i = detect({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"PMI_FD", "7"}, {"PMI_RANK", "1"}});
  EXPECT_EQ(i.name, "srun+pmi2");
  EXPECT_TRUE(i.has_pmi);
  EXPECT_NO_THROW(check_pmi_available(i));
}

TEST(DetectLauncher, MalformedValues) {
  expect_error({{"SLURM_PROCID", "abc"}, {"SLURM_NTASKS", "4"}}, "SLURM_PROCID=abc");
  expect_error({{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "4"}}, "SLURM_PROCID=-1");
  expect_error({{"SLURM_PROCID", "1x"}, {"SLURM_NTASKS", "4"}}, "SLURM_PROCID=1x");
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", ""}}, "SLURM_NTASKS is empty");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "two"}}, "OMPI_COMM_WORLD_SIZE=two");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999999999999"}}, "WORLD_SIZE");
  expect_error({{"PMIX_NAMESPACE", "ns"}, {"PMIX_RANK", "x"}}, "PMIX_RANK=x");
}

TEST(DetectLauncher, RankNotBelowSize) {
  expect_error({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}, "rank 4 (SLURM_PROCID) is not below the job size 4");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "is not below the job size 2");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}, "at least one rank");
}

TEST(DetectLauncher, LocalRankNotBelowLocalSize) {
  expect_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
               "local rank 2 is not below the local size 2");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"}},
               "local size 3 exceeds the job size 2");
}

TEST(DetectLauncher, NodeIdNotBelowNodeCount) {
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODEID", "2"}, {"SLURM_NNODES", "2"}},
               "node id 2 is not below the node count 2");
}

TEST(DetectLauncher, IncompleteLaunchers) {
  expect_error({{"SLURM_PROCID", "0"}}, "neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS");
  expect_error({{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not");
  expect_error({{"WORLD_SIZE", "2"}}, "WORLD_SIZE is set but RANK is not");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"}}, "OMPI_COMM_WORLD_SIZE is not");
}

TEST(CheckPmi, SrunWithoutPmiIsTheClassicFailure) {
  auto i = detect({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}});
  try {
    check_pmi_available(i);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("srun --mpi=pmix"), std::string::npos) << m;
    EXPECT_NE(m.find("every task would run as rank 0"), std::string::npos) << m;
  }
}

TEST(CheckPmi, SingleTaskSrunNeedsNoPmi) {
  auto i = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_NO_THROW(check_pmi_available(i));
}

TEST(DetectLauncher, TorchrunStoreAddress) {
  auto i = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(i.kind, LauncherKind::torchrun);
  EXPECT_EQ(i.store_addr, "node0");
  EXPECT_EQ(i.store_port, 29500);
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}, "MASTER_PORT=http");
  // Out of range: once 4294967297 silently became port 1, and 0 read as "not set".
  for (const char* bad : {"4294967297", "0", "65536", "-1", ""})
    expect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n0"}, {"MASTER_PORT", bad}},
                 std::string(*bad ? "MASTER_PORT=" : "MASTER_PORT is empty") + bad);
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}, "is not a TCP port (1..65535)");
  EXPECT_EQ(detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65535"}}).store_port, 65535);
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": ["a:4294967297"]}, "task": {"type": "worker", "index": 0}})"}},
               "TF_CONFIG's first worker port=4294967297 is not a TCP port");
}

// Ranks and sizes beyond an int are refused, not wrapped (WORLD_SIZE=99999999999 once
// became 1215752191).
TEST(DetectLauncher, CountsBeyondAnIntAreRefused) {
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE=99999999999 is beyond 2147483647");
  expect_error({{"RANK", "2147483648"}, {"WORLD_SIZE", "2"}}, "RANK=2147483648 is beyond 2147483647");
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4294967297"}}, "SLURM_NTASKS=4294967297 is beyond");
}

TEST(DetectLauncher, TfConfigWorkers) {
  const std::string cluster = R"("cluster": {"worker": ["host-a:2222", "host-b:2223", "host-c:2224"]})";
  auto i = detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "worker", "index": 2}})"}});
  EXPECT_EQ(i.kind, LauncherKind::tfconfig);
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.size, 3);
  EXPECT_EQ(i.store_addr, "host-a");  // the first worker hosts the store, on its port
  EXPECT_EQ(i.store_port, 2222);
}

TEST(DetectLauncher, TfConfigChiefIsRankZero) {
  const std::string cluster = R"("cluster": {"chief": ["[fe80::1]:5000"], "worker": ["w0:5001", "w1:5002"]})";
  auto chief = detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "chief", "index": 0}})"}});
  EXPECT_EQ(chief.rank, 0);
  EXPECT_EQ(chief.size, 3);
  EXPECT_EQ(chief.store_addr, "fe80::1");
  EXPECT_EQ(chief.store_port, 5000);
  auto w1 = detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "worker", "index": 1}})"}});
  EXPECT_EQ(w1.rank, 2);
}

TEST(DetectLauncher, TorchrunVariablesWinOverTfConfig) {
  auto i = detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TF_CONFIG", "not json"}});
  EXPECT_EQ(i.kind, LauncherKind::torchrun);
}

TEST(DetectLauncher, TfConfigMalformed) {
  expect_error({{"TF_CONFIG", "{not json"}}, "TF_CONFIG is not valid JSON");
  expect_error({{"TF_CONFIG", R"({"task": {"type": "worker", "index": 0}})"}}, "no cluster.worker list");
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]}})"}}, "no task.index");
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}})"}},
               "task.index 1 is not an entry of cluster.worker (1 entries)");
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"], "ps": ["p:2"]}, "task": {"type": "ps", "index": 0}})"}},
               "task.type 'ps' is not trained by cnnscale");
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}})"}},
               "has no port");
  expect_error({{"TF_CONFIG", R"({"cluster": {"worker": [1]}, "task": {"type": "worker", "index": 0}})"}},
               "must be a list of");
}
