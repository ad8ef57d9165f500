// Sampler: permutations are pure functions of (seed, epoch), exactly-once per epoch
// with drop-last, the documented wrap-around with --no-drop-last, rank slices.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/sampler.hpp"
#include "util/error.hpp"

using namespace cnnscale;

TEST(Sampler, PermutationIsAPermutationAndDeterministic) {
  for (int64_t n : {1, 2, 7, 1000}) {
    auto p = epoch_permutation(42, 3, n);
    auto q = epoch_permutation(42, 3, n);
    EXPECT_EQ(p, q);
    auto s = p;
    std::sort(s.begin(), s.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s[i], i);
  }
}

TEST(Sampler, FixedValuesDoNotDriftAcrossPlatforms) {
  // splitmix64 reference values (seed 1234567): the first outputs of the published generator.
  uint64_t st = 1234567;
  EXPECT_EQ(splitmix64_next(st), 6457827717110365317ull);
  EXPECT_EQ(splitmix64_next(st), 3203168211198807973ull);
}

TEST(Sampler, EpochsAndSeedsGiveDifferentPermutations) {
  const auto a = epoch_permutation(1, 0, 500), b = epoch_permutation(1, 1, 500), c = epoch_permutation(2, 0, 500);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  // Not a near-identity either: most positions move.
  int fixed = 0;
  for (int i = 0; i < 500; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 20);
}

TEST(Sampler, DropLastSeesEachSampleAtMostOnceAndDropsTheTail) {
  const int64_t n = 103, g = 12;
  Sampler s(n, g, true, 9);
  ASSERT_EQ(s.steps_per_epoch(), n / g);
  for (int epoch : {0, 1}) {
    std::multiset<int64_t> seen;
    std::vector<int64_t> ids;
    for (int64_t st = 0; st < s.steps_per_epoch(); ++st) {
      s.global_batch_ids(epoch, st, ids);
      seen.insert(ids.begin(), ids.end());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n / g * g);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size()) << "a duplicate in epoch " << epoch;
    // The dropped tail is exactly the last n mod g entries of the permutation.
    const auto perm = epoch_permutation(9, epoch, n);
    for (int64_t k = n / g * g; k < n; ++k) EXPECT_EQ(seen.count(perm[k]), 0u);
  }
}

TEST(Sampler, NoDropLastWrapsToTheStartOfTheSamePermutation) {
  const int64_t n = 103, g = 12;
  Sampler s(n, g, false, 9);
  ASSERT_EQ(s.steps_per_epoch(), (n + g - 1) / g);
  const auto perm = epoch_permutation(9, 4, n);
  std::vector<int64_t> ids;
  std::multiset<int64_t> seen;
  for (int64_t st = 0; st < s.steps_per_epoch(); ++st) {
    s.global_batch_ids(4, st, ids);
    ASSERT_EQ(static_cast<int64_t>(ids.size()), g);
    seen.insert(ids.begin(), ids.end());
  }
  s.global_batch_ids(4, s.steps_per_epoch() - 1, ids);
  const int64_t wrapped = s.steps_per_epoch() * g - n;  // 5
  for (int64_t k = 0; k < wrapped; ++k) EXPECT_EQ(ids[g - wrapped + k], perm[k]);
  for (int64_t i = 0; i < n; ++i) {
    const bool is_wrapped = std::find(perm.begin(), perm.begin() + wrapped, i) != perm.begin() + wrapped;
    EXPECT_EQ(seen.count(i), is_wrapped ? 2u : 1u) << "sample " << i;
  }
}

TEST(Sampler, RankSlicesTileTheGlobalBatch) {
  const int64_t n = 200, g = 24;
  Sampler ref(n, g, true, 5);
  for (int w : {1, 2, 3, 4}) {
    Sampler s(n, g, true, 5);
    std::vector<int64_t> whole, part, joined;
    for (int64_t st = 0; st < s.steps_per_epoch(); ++st) {
      ref.global_batch_ids(2, st, whole);
      joined.clear();
      for (int r = 0; r < w; ++r) {
        s.rank_slice(2, st, r, g / w, part);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      ASSERT_EQ(joined, whole) << "W=" << w << " step " << st;
    }
  }
}

TEST(Sampler, RejectsABatchLargerThanTheSplit) {
  EXPECT_THROW(Sampler(10, 11, true, 0), UserError);
  EXPECT_THROW(Sampler(10, 11, false, 0), UserError);
  EXPECT_THROW(Sampler(0, 1, true, 0), UserError);
  EXPECT_NO_THROW(Sampler(10, 10, true, 0));
}
