// test_nn_conv_algo.cpp — the GPU model's convolution algorithm choice without a GPU
// (nn/conv_algo.hpp): the winner among made-up cuDNN results (benchmark and heuristic
// ranking), the errors when nothing is usable, the cache key, and the tuning text that
// checkpoints store (round trip, malformed lines).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/conv_algo.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

constexpr size_t MiB = size_t{1} << 20;

AlgoResult R(int algo, bool ok, float ms, size_t memory, bool det) { return {algo, ok, ms, memory, det}; }

std::string error_of(const std::vector<AlgoResult>& r, bool fastest) {
  try {
    fastest ? choose_fastest(r, kMaxConvWorkspace, "backward-filter") : choose_ranked(r, kMaxConvWorkspace, "backward-filter");
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConvAlgo, FastestDeterministicUsableWins) {
  const std::vector<AlgoResult> r = {
      R(0, true, 0.5f, 0, false),                   // fastest, but not deterministic
      R(1, false, 0.1f, 0, true),                   // failed
      R(2, true, 0.2f, kMaxConvWorkspace + 1, true),  // over the cap
      R(3, true, 0.9f, 0, true),
      R(4, true, 0.7f, 4 * MiB, true),              // the winner
      R(5, true, 0.8f, kMaxConvWorkspace, true),    // exactly the cap is allowed
  };
  EXPECT_EQ(choose_fastest(r, kMaxConvWorkspace, "forward"), 4);
  // The heuristic keeps cuDNN's order: the first usable deterministic one.
  EXPECT_EQ(choose_ranked(r, kMaxConvWorkspace, "forward"), 3);
}

TEST(ConvAlgo, TiesGoToLessWorkspaceThenLowerId) {
  EXPECT_EQ(choose_fastest({R(7, true, 1.f, 8 * MiB, true), R(6, true, 1.f, 2 * MiB, true)}, kMaxConvWorkspace, "forward"), 6);
  EXPECT_EQ(choose_fastest({R(5, true, 1.f, 2 * MiB, true), R(2, true, 1.f, 2 * MiB, true)}, kMaxConvWorkspace, "forward"), 2);
  // The order cuDNN lists them in does not matter.
  EXPECT_EQ(choose_fastest({R(2, true, 1.f, 2 * MiB, true), R(5, true, 1.f, 2 * MiB, true)}, kMaxConvWorkspace, "forward"), 2);
}

// cudnnFind lists an algorithm once per math type it tried (fp32 data under
// CUDNN_DEFAULT_MATH: plain and tensor-op kernels; the numbers here are made up): the choice keeps the
// math type of the entry that won, the one that was timed (found on the first GPU run:
// --tf32 on ran slower than --tf32 off while the math type was dropped).
TEST(ConvAlgo, TheWinningEntrysMathTypeIsKept) {
  auto M = [](int algo, float ms, int math) {
    AlgoResult r = R(algo, true, ms, 0, true);
    r.math_type = math;
    return r;
  };
  const std::vector<AlgoResult> r = {M(1, 2.f, 0), M(1, 0.5f, 2), M(6, 1.f, 2), M(1, 0.9f, 1)};
  EXPECT_EQ(pick_fastest(r, kMaxConvWorkspace, "forward"), ConvChoice(1, 2));
  EXPECT_EQ(choose_fastest(r, kMaxConvWorkspace, "forward"), 1);
  EXPECT_EQ(pick_ranked(r, kMaxConvWorkspace, "forward"), ConvChoice(1, 0));
  // Equal times: the lower math type, whatever the listing order.
  EXPECT_EQ(pick_fastest({M(3, 1.f, 2), M(3, 1.f, 1)}, kMaxConvWorkspace, "forward"), ConvChoice(3, 1));
  EXPECT_EQ(pick_fastest({M(3, 1.f, 1), M(3, 1.f, 2)}, kMaxConvWorkspace, "forward"), ConvChoice(3, 1));
}

TEST(ConvAlgo, NothingDeterministicFallsBackToTheFastestUsable) {
  const std::vector<AlgoResult> r = {R(0, true, 3.f, 0, false), R(1, true, 2.f, 0, false),
                                     R(2, true, 1.f, kMaxConvWorkspace * 2, false)};
  EXPECT_EQ(choose_fastest(r, kMaxConvWorkspace, "backward-data"), 1);
  EXPECT_EQ(choose_ranked(r, kMaxConvWorkspace, "backward-data"), 0);
}

TEST(ConvAlgo, NothingUsableIsTheWorkspaceCapError) {
  const std::vector<AlgoResult> over = {R(0, true, 1.f, kMaxConvWorkspace + 1, true), R(1, false, 1.f, 0, true)};
  const std::string want =
      "cuDNN offers no usable backward-filter algorithm for this convolution within the 512 MiB workspace cap; lower "
      "--batch-size or change the layer's shape";
  EXPECT_EQ(error_of(over, true), want);
  EXPECT_EQ(error_of(over, false), want);
  EXPECT_EQ(error_of({}, true), want);
}

TEST(ConvAlgo, KeyNamesEverythingTheChoiceDependsOn) {
  ConvProblem p;
  p.dir = ConvDir::backward_data;
  p.n = 65;
  p.c = 3;
  p.h = 31;
  p.w = 17;
  p.k = 130;
  p.kernel = 7;
  p.pad = 3;
  p.stride = 2;
  p.math = ConvMath::tf32;
  EXPECT_EQ(p.key(), "bwd_data n=65 c=3 h=31 w=17 k=130 kernel=7 pad=3 stride=2 math=tf32");
  ConvProblem q = p;
  q.math = ConvMath::fma;
  q.dir = ConvDir::forward;
  EXPECT_EQ(q.key(), "fwd n=65 c=3 h=31 w=17 k=130 kernel=7 pad=3 stride=2 math=fma");
  q.dir = ConvDir::backward_filter;
  EXPECT_EQ(q.key().substr(0, 11), "bwd_filter ");
  q.math = ConvMath::bf16;
  EXPECT_EQ(q.key(), "bwd_filter n=65 c=3 h=31 w=17 k=130 kernel=7 pad=3 stride=2 math=bf16");
  q.math = ConvMath::tf32_nhwc;
  EXPECT_EQ(q.key(), "bwd_filter n=65 c=3 h=31 w=17 k=130 kernel=7 pad=3 stride=2 math=tf32nhwc");
  EXPECT_STREQ(conv_dir_name(ConvDir::backward_filter), "backward-filter");
}

TEST(ConvAlgo, TuningTextRoundTrips) {
  ConvTuning t;
  t["fwd n=64 c=3 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=fma"] = 1;
  t["bwd_filter n=64 c=3 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=fma"] = 0;
  t["bwd_data n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=tf32"] = 7;
  t["bwd_data n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=bf16"] = 1;
  t["fwd n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=tf32"] = ConvChoice(6, 2);
  t["bwd_filter n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=tf32nhwc"] = ConvChoice(1, 0);
  const std::string text = format_tuning(t, "cuDNN 91900, NVIDIA H100, sm_90");
  EXPECT_EQ(text.substr(0, 2), "# ");
  EXPECT_NE(text.find("\nbwd_data n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=tf32 algo=7\n"), std::string::npos);
  EXPECT_NE(text.find("\nfwd n=64 c=16 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=tf32 algo=6 mathtype=2\n"),
            std::string::npos);
  EXPECT_EQ(parse_tuning(text), t);
  // A record from before the math type was kept: -1, the descriptor's own.
  EXPECT_EQ(parse_tuning("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=tf32 algo=2\n").begin()->second,
            ConvChoice(2, -1));
  EXPECT_EQ(format_tuning(parse_tuning(text), "cuDNN 91900, NVIDIA H100, sm_90"), text);
  EXPECT_EQ(format_tuning({}), "");
  EXPECT_TRUE(parse_tuning("").empty());
  EXPECT_TRUE(parse_tuning("# only a comment\n\n").empty());
  // CRLF line ends (an edited copy) are accepted.
  EXPECT_EQ(parse_tuning("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2\r\n").size(), 1u);
}

TEST(ConvAlgo, MalformedTuningIsAClearError) {
  auto message = [](const std::string& text) {
    try {
      parse_tuning(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string good = "fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2";
  for (const std::string& bad :
       {std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma"),  // no algo
        std::string("up n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2"),
        std::string("fwd n=x c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2"),
        std::string("fwd c=1 n=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2"),  // order
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=-1 stride=1 math=fma algo=2"),
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fp16 algo=2"),
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=-2"),
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2 extra"),
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2 mathtype=4"),
        std::string("fwd n=1 c=1 h=5 w=7 k=1 kernel=1 pad=0 stride=1 math=fma algo=2 mathtype=1 extra"),
        good + "\n" + good}) {
    const std::string m = message("# header\n" + bad);
    EXPECT_NE(m.find("convolution algorithm record, line "), std::string::npos) << bad << " → " << m;
    EXPECT_NE(m.find("expected '<fwd|bwd_data|bwd_filter> n=N"), std::string::npos) << m;
  }
  EXPECT_NE(message("# header\n" + good + "\nbogus\n").find("line 3 'bogus'"), std::string::npos);
}

}  // namespace
}  // namespace cnnscale::nn
