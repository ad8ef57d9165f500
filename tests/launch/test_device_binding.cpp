// GPU choice among local ranks: node-wide sets, per-task binding, sharing, CPU.
#include <gtest/gtest.h>

#include "launch/device_binding.hpp"
#include "util/error.hpp"

using namespace cnnscale;

TEST(DeviceBinding, NoGpuMeansCpu) {
  std::vector<VisibleDevices> local{{"(all)", 0}, {"(all)", 0}};
  EXPECT_EQ(choose_device(local, 1, false, "h").device, -1);
}

TEST(DeviceBinding, NodeWideSetEachRankTakesItsOwn) {
  std::vector<VisibleDevices> local(4, {"0,1,2,3", 4});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_device(local, r, false, "h").device, r);
}

TEST(DeviceBinding, PerTaskBindingUsesOrdinalZero) {
  // srun --gpus-per-task=1: each task sees only its own GPU; SLURM_LOCALID is not the index.
  std::vector<VisibleDevices> local{{"0", 1}, {"1", 1}, {"2", 1}, {"3", 1}};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_device(local, r, false, "h").device, 0);
}

TEST(DeviceBinding, RestrictedVisibleSetTwoRanksTwoGpus) {
  std::vector<VisibleDevices> local{{"2,3", 2}, {"2,3", 2}};
  EXPECT_EQ(choose_device(local, 0, false, "h").device, 0);
  EXPECT_EQ(choose_device(local, 1, false, "h").device, 1);
}

TEST(DeviceBinding, MoreRanksThanGpusIsAnError) {
  std::vector<VisibleDevices> local(3, {"0,1", 2});
  try {
    choose_device(local, 2, false, "node7");
    FAIL();
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("3 ranks on node7 see the same 2 GPU(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("--allow-gpu-sharing"), std::string::npos) << m;
  }
}

TEST(DeviceBinding, SharingAllowedWrapsAround) {
  std::vector<VisibleDevices> local(3, {"0,1", 2});
  EXPECT_EQ(choose_device(local, 2, true, "h").device, 0);
  EXPECT_EQ(choose_device(local, 2, true, "h").ranks_on_device, 2);
  EXPECT_EQ(choose_device(local, 1, true, "h").ranks_on_device, 1);
}
