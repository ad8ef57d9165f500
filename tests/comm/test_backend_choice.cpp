// --backend decision from injected facts (no MPI, no GPU): auto falls back to the CPU
// with a warning where GPUs seem to exist, nccl fails with CUDA's reason (two ranks on
// one GPU are refused earlier, at the device binding); after a rendezvous the CPU
// backend is Gloo, and the per-rank facts from the store combine as over MPI.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/make_communicator.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

const char* kWhy = "cudaGetDeviceCount failed: CUDA driver version is insufficient for CUDA runtime version "
                   "(cudaErrorInsufficientDriver); ... Fix: run on GPU nodes whose NVIDIA driver is R580 or newer";

BackendFacts gpus_everywhere() {
  BackendFacts f;
  f.rank = 5;
  f.built_with_cuda = true;
  return f;
}

BackendFacts no_gpu_on_rank(int r, bool hints) {
  BackendFacts f = gpus_everywhere();
  f.rank_without_gpu = r;
  f.its_host = "gpu07";
  f.its_problem = kWhy;
  if (hints) {
    f.rank_with_hints = 0;
    f.hints = "/dev/nvidia0 /dev/nvidia1; SLURM_JOB_GPUS=0,1";
    f.hints_host = "gpu01";
  }
  return f;
}

std::string error_of(Backend b, const BackendFacts& f) {
  try {
    decide_backend(b, f);
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.rank(), f.rank);  // every rank throws it; the one with rank 0 prints
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(BackendChoice, AutoPicksNcclWhenEveryRankHasItsOwnGpu) {
  const BackendDecision d = decide_backend(Backend::automatic, gpus_everywhere());
  EXPECT_EQ(d.backend, Backend::nccl);
  EXPECT_EQ(d.warning, "");
}

TEST(BackendChoice, AutoOnACpuNodeIsQuiet) {
  const BackendDecision d = decide_backend(Backend::automatic, no_gpu_on_rank(0, false));
  EXPECT_EQ(d.backend, Backend::mpi);
  EXPECT_EQ(d.warning, "");
}

TEST(BackendChoice, AutoWarnsWhenTheNodeLooksLikeAGpuNode) {
  const BackendDecision d = decide_backend(Backend::automatic, no_gpu_on_rank(3, true));
  EXPECT_EQ(d.backend, Backend::mpi);
  EXPECT_TRUE(has(d.warning, "--backend auto trains on the CPU (MPI) although gpu01 looks like a GPU node "
                             "(/dev/nvidia0 /dev/nvidia1; SLURM_JOB_GPUS=0,1)"))
      << d.warning;
  EXPECT_TRUE(has(d.warning, "rank 3 on gpu07 has no usable GPU: cudaGetDeviceCount failed: CUDA driver version is "
                             "insufficient for CUDA runtime version"))
      << d.warning;
  EXPECT_TRUE(has(d.warning, "R580")) << d.warning;
}

TEST(BackendChoice, AutoWithoutCudaBuildWarnsToo) {
  BackendFacts f = no_gpu_on_rank(0, true);
  f.built_with_cuda = false;
  f.its_problem = "this cnnscale was built without CUDA";
  const BackendDecision d = decide_backend(Backend::automatic, f);
  EXPECT_EQ(d.backend, Backend::mpi);
  EXPECT_TRUE(has(d.warning, "built without CUDA")) << d.warning;
}

TEST(BackendChoice, NcclWithoutGpuNamesCudasReason) {
  const std::string m = error_of(Backend::nccl, no_gpu_on_rank(2, false));
  EXPECT_TRUE(has(m, "--backend nccl needs a GPU on every rank, but rank 2 on gpu07 has none: cudaGetDeviceCount "
                     "failed: CUDA driver version is insufficient for CUDA runtime version"))
      << m;
  EXPECT_TRUE(has(m, "--backend mpi")) << m;
  BackendFacts nobuild = gpus_everywhere();
  nobuild.built_with_cuda = false;
  EXPECT_TRUE(has(error_of(Backend::nccl, nobuild), "built without CUDA/NCCL"));
}

// `--device cuda` (backend auto) resolves to NCCL; its errors name the switch the user typed
// and --device cpu (--backend mpi would keep --device cuda and fail again).
TEST(BackendChoice, DeviceCudaWithoutGpuNamesDeviceSwitch) {
  BackendFacts f = no_gpu_on_rank(1, false);
  f.device_cuda = true;
  const std::string m = error_of(Backend::nccl, f);
  EXPECT_TRUE(has(m, "--device cuda needs a GPU on every rank, but rank 1 on gpu07 has none: cudaGetDeviceCount"))
      << m;
  EXPECT_TRUE(has(m, "or use --device cpu for a CPU run")) << m;
  EXPECT_FALSE(has(m, "--backend")) << m;
  BackendFacts nobuild = gpus_everywhere();
  nobuild.built_with_cuda = false;
  nobuild.device_cuda = true;
  const std::string b = error_of(Backend::nccl, nobuild);
  EXPECT_TRUE(has(b, "--device cuda: this cnnscale was built without CUDA/NCCL")) << b;
  EXPECT_TRUE(has(b, "use --device cpu")) << b;
}

TEST(BackendChoice, CombineRankFacts) {
  std::vector<RankGpuFacts> r(4);
  const char* hosts[] = {"n0", "n1", "n2", "n3"};
  for (size_t i = 0; i < 4; ++i) r[i].host = hosts[i];
  BackendFacts none = combine_rank_facts(r, 2, true);
  EXPECT_EQ(none.rank, 2);
  EXPECT_TRUE(none.rendezvous);
  EXPECT_EQ(none.rank_without_gpu, -1);
  EXPECT_EQ(none.rank_with_hints, -1);
  EXPECT_EQ(decide_backend(Backend::automatic, none).backend, Backend::nccl);
  r[3].no_gpu = true;
  r[3].problem = "p3";
  r[1].no_gpu = true;
  r[1].problem = "p1";
  r[3].hints = "h3";
  const BackendFacts f = combine_rank_facts(r, 0, true);
  EXPECT_EQ(f.rank_without_gpu, 1);
  EXPECT_EQ(f.its_problem, "p1");
  EXPECT_EQ(f.its_host, "n1");
  EXPECT_EQ(f.rank_with_hints, 3);
  EXPECT_EQ(f.hints, "h3");
  EXPECT_EQ(f.hints_host, "n3");
  EXPECT_EQ(decide_backend(Backend::automatic, f).backend, Backend::gloo);
  EXPECT_FALSE(combine_rank_facts(r, 0, false).built_with_cuda);
}
