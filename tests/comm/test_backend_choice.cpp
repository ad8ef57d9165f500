// --backend decision from injected facts (no MPI, no GPU): auto falls back to the CPU
// with a warning where GPUs seem to exist, nccl fails with CUDA's reason, and ranks
// sharing a GPU (--allow-gpu-sharing) never get NCCL.
#include <gtest/gtest.h>

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

BackendFacts shared() {
  BackendFacts f = gpus_everywhere();
  f.rank_sharing = 0;
  f.sharing = "local ranks 0 and 1 on gpu01 share GPU GPU-aaaa";
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

TEST(BackendChoice, SharedGpuNeverGetsNccl) {
  for (Backend b : {Backend::automatic, Backend::nccl}) {
    const std::string m = error_of(b, shared());
    EXPECT_TRUE(has(m, std::string(b == Backend::nccl ? "--backend nccl" : "--backend auto") +
                           " with --allow-gpu-sharing: local ranks 0 and 1 on gpu01 share GPU GPU-aaaa"))
        << m;
    EXPECT_TRUE(has(m, "NCCL, which cannot put two ranks on one GPU")) << m;
    EXPECT_TRUE(has(m, "--backend mpi")) << m;
  }
}

TEST(BackendChoice, MpiIsAlwaysMpi) {
  EXPECT_EQ(decide_backend(Backend::mpi, shared()).backend, Backend::mpi);
  EXPECT_EQ(decide_backend(Backend::mpi, no_gpu_on_rank(0, true)).warning, "");
}
