// test_bn_emulated.cpp — the NHWC batch norm's kernels and launch sequence
// (src/nn/cuda/batchnorm_nhwc_impl.cuh, the very code the GPU runs) executed on the CPU by
// an emulator of CUDA's execution model, against a host reference in double: GPU minutes
// are scarce (docs/gpu.md), so indexing, the reduction trees, the shared
// memory, the finalize arithmetic, the fusion flags, the access widths and the geometry
// are checked here, in every CI run, before a GPU sees them. The emulator: each block's
// threads are fibers (ucontext) on one host thread that meet at __syncthreads() (every
// live fiber runs to the barrier or its end before any goes on), blocks one after
// another, `__shared__` arrays static (one block runs at a time), the dynamic shared
// memory a per-launch buffer filled with NaN (a read of a word no thread wrote shows up as
// a NaN in the result). What it cannot show: races between blocks (there are none by
// design: blocks write disjoint partials), the GPU's memory model, misaligned vector
// accesses faulting (x86 tolerates them; vector_width is checked by the cases instead),
// performance. The GPU's own check is tests/nn/test_cuda_batchnorm_gpu.cpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>  // dim3, uint3, cudaStream_t: host types only, nothing of the runtime is called
#include <gtest/gtest.h>

#include <ucontext.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

// ---- what nvcc provides, for emulated threads ----
// Every thread of a block is a fiber (ucontext) on this one host thread; __syncthreads()
// returns to the scheduler, which runs every fiber of the block up to the barrier (or its
// end) before any goes on: CUDA's barrier semantics, deterministic, without OS threads.
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
namespace emu {
struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  uint3 idx;
  bool done = false;
};
ucontext_t scheduler;
Fiber* current = nullptr;
std::function<void()> body;               // the kernel call of the running launch
float* dynamic_shared_memory = nullptr;  // the running block's (one block at a time)
inline void run_fiber() {
  body();
  current->done = true;  // then uc_link returns to the scheduler
}
// The fibers of a block of n threads: stacks allocated once for the largest block (1024
// threads × 64 KiB) and reused by every launch.
inline std::vector<Fiber>& fibers(size_t n) {
  static std::vector<Fiber> pool(1024);
  static bool ready = false;
  if (!ready) {
    for (auto& f : pool) f.stack.resize(64 * 1024);
    ready = true;
  }
  (void)n;
  return pool;
}
// A fiber ready to run the kernel from its start (not inlined into the launch loop:
// getcontext returns twice).
[[gnu::noinline]] inline void prepare(Fiber& f, uint3 idx) {
  f.idx = idx;
  f.done = false;
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack.data();
  f.ctx.uc_stack.ss_size = f.stack.size();
  f.ctx.uc_link = &scheduler;
  makecontext(&f.ctx, run_fiber, 0);
}
}  // namespace emu
inline void __syncthreads() { swapcontext(&emu::current->ctx, &emu::scheduler); }
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
#define CNNSCALE_BN_EMULATED 1
namespace cnnscale::nn::cuda::bn::detail {
namespace {
inline float* dynamic_shared() { return emu::dynamic_shared_memory; }
}  // namespace
}  // namespace cnnscale::nn::cuda::bn::detail
#include "nn/cuda/batchnorm_nhwc_impl.cuh"  // its #pragma unroll: -Wno-unknown-pragmas (CMakeLists.txt)

#include "bn_reference.hpp"
#include "nn/rng.hpp"
#include "util/bf16.hpp"

using namespace cnnscale;
using nn::cuda::bf16_t;
namespace bnd = nn::cuda::bn::detail;

namespace {

struct EmuLaunch {
  static inline int launches = 0, blocks = 0;
  template <class... P, class... A>
  static void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t /*stream*/,
                     A&&... args) {
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || shared > 48 * 1024)
      throw std::logic_error("an impossible launch: grid " + std::to_string(grid.x) + "x" + std::to_string(grid.y) +
                             "x" + std::to_string(grid.z) + ", block of " + std::to_string(threads) + ", " +
                             std::to_string(shared) + " B of dynamic shared memory");
    ++launches;
    std::vector<float> shm(shared / sizeof(float) + 1);
    std::vector<emu::Fiber>& pool = emu::fibers(threads);
    emu::body = [&] { kernel(args...); };
    gridDim = grid, blockDim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
      for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          ++blocks;
          std::fill(shm.begin(), shm.end(), std::numeric_limits<float>::quiet_NaN());
          emu::dynamic_shared_memory = shm.data();
          blockIdx = {bx, by, bz};
          size_t t = 0;
          for (unsigned tz = 0; tz < block.z; ++tz)
            for (unsigned ty = 0; ty < block.y; ++ty)
              for (unsigned tx = 0; tx < block.x; ++tx) emu::prepare(pool[t++], {tx, ty, tz});
          // Rounds: every live fiber runs to the next barrier or its end.
          for (bool live = true; live;) {
            live = false;
            for (size_t i = 0; i < threads; ++i) {
              emu::Fiber& f = pool[i];
              if (f.done) continue;
              emu::current = &f;
              threadIdx = f.idx;
              swapcontext(&emu::scheduler, &f.ctx);
              live |= !f.done;
            }
          }
        }
  }
};

template <class T>
struct Elem;
template <>
struct Elem<float> {
  static float from(double v) { return static_cast<float>(v); }
  static double to(float v) { return v; }
  static constexpr double tol = 1e-4;  // as test_cuda_batchnorm_gpu.cpp
  static constexpr const char* name = "fp32";
};
template <>
struct Elem<bf16_t> {
  static bf16_t from(double v) { return __float2bfloat16_rn(static_cast<float>(v)); }
  static double to(bf16_t v) { return __bfloat162float(v); }
  static constexpr double tol = 8e-3;
  static constexpr const char* name = "bf16";
};

template <class T>
std::vector<T> random_tensor(size_t count, uint64_t seed, double offset, double scale) {
  nn::SplitMix64 r(seed);
  std::vector<T> h(count);
  for (auto& v : h) v = Elem<T>::from(offset + scale * r.uniform(-1, 1));
  return h;
}

template <class T>
double rel_err(const std::vector<T>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = Elem<T>::to(got[i]);
    err = std::max(err, std::isnan(g) ? std::numeric_limits<double>::infinity() : std::fabs(g - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}
double rel_errf(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::isnan(got[i]) ? std::numeric_limits<double>::infinity()
                                           : std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

struct Case {
  int64_t rows;
  int c;
  double offset;
};

// As test_cuda_batchnorm_gpu.cpp's check_case: training forward and backward against
// double, twice (bitwise), then evaluation; `misalign` moves every activation one element
// off its vector alignment (one-element accesses).
template <class T, class L = EmuLaunch>
void check_case(const Case& k, bool relu, bool res, bool accumulate, bool misalign = false) {
  using E = Elem<T>;
  SCOPED_TRACE(std::string(E::name) + " rows=" + std::to_string(k.rows) + " c=" + std::to_string(k.c) +
               " offset=" + std::to_string(k.offset) + (relu ? " relu" : "") + (res ? " +z" : "") +
               (accumulate ? " accumulate" : "") + (misalign ? " misaligned" : ""));
  const int64_t R = k.rows;
  const int C = k.c;
  const size_t N = static_cast<size_t>(R) * C, off = misalign ? 1 : 0;
  const double eps = 1e-5, momentum = 0.1;
  const auto x0 = random_tensor<T>(N, 1 + R + C, k.offset, 2.0), z0 = random_tensor<T>(N, 2 + R, 0.0, 1.0),
             dy0 = random_tensor<T>(N, 3 + C, 0.0, 1.0), dx0 = random_tensor<T>(N, 4, 0.0, 1.0),
             dz0 = random_tensor<T>(N, 6, 0.0, 1.0);
  // 16-byte aligned storage (as cudaMalloc's 256), offset by `off` elements when misaligned.
  auto buf = [&](const std::vector<T>& init) {
    std::vector<T> v(N + 16);
    const size_t skew = (16 - reinterpret_cast<uintptr_t>(v.data()) % 16) % 16 / sizeof(T) + off;
    std::copy(init.begin(), init.end(), v.begin() + static_cast<std::ptrdiff_t>(skew));
    return std::make_pair(std::move(v), skew);
  };
  auto [xv, xs] = buf(x0);
  auto [zv, zs] = buf(z0);
  auto [dyv, dys] = buf(dy0);
  auto [yv, ys] = buf(std::vector<T>(N, E::from(0)));
  auto [dxv, dxs] = buf(dx0);
  auto [dzv, dzs] = buf(dz0);
  T *x = xv.data() + xs, *z = zv.data() + zs, *dy = dyv.data() + dys, *y = yv.data() + ys, *dx = dxv.data() + dxs,
    *dz = dzv.data() + dzs;
  if (!misalign) {
    ASSERT_EQ(reinterpret_cast<uintptr_t>(x) % 16, 0u);
  }
  std::vector<float> gamma(C), beta(C), rm(C), rv(C), sm(C), si(C), dg(C), db(C);
  nn::SplitMix64 r(7);
  for (int c = 0; c < C; ++c)
    gamma[c] = float(r.uniform(0.5, 1.5)), beta[c] = float(r.uniform(-0.5, 0.5)), rm[c] = float(r.uniform(-1, 1)),
    rv[c] = float(r.uniform(0.5, 2));
  const std::vector<float> rm0 = rm, rv0 = rv;
  std::vector<char> ws(bnd::workspace_bytes_impl(R, C, sizeof(T) == 2, bnd::TargetOf<L>::value));

  const auto doubles = [](const std::vector<T>& v) { return test::to_doubles<E>(v); };
  const std::vector<double> xd = doubles(x0), zd = doubles(z0), dyd = doubles(dy0), dx0d = doubles(dx0),
                            dz0d = doubles(dz0);
  const test::BnStatistics ref = test::bn_statistics(xd, R, C, eps);
  const std::vector<double>& mean = ref.mean;
  const std::vector<double>& invstd = ref.invstd;
  const std::vector<double> y_ref = test::bn_forward(xd, res ? &zd : nullptr, mean, invstd, gamma, beta, relu);

  std::vector<T> first_y, first_dx;
  for (int run = 0; run < 2; ++run) {
    rm = rm0, rv = rv0;
    std::copy(dx0.begin(), dx0.end(), dx), std::copy(dz0.begin(), dz0.end(), dz);
    const nn::cuda::bn::Stats st{gamma.data(), beta.data(), rm.data(), rv.data()};
    bnd::forward_train_impl<L, T>(x, res ? z : nullptr, y, R, C, st, momentum, eps, sm.data(), si.data(), relu,
                                          ws.data(), nullptr);
    bnd::backward_impl<L, T>(x, relu ? y : nullptr, dy, dx, accumulate, res ? dz : nullptr, accumulate, R, C,
                                     gamma.data(), sm.data(), si.data(), dg.data(), db.data(), relu, ws.data(), nullptr);
    std::vector<T> yo(y, y + N), dxo(dx, dx + N), dzo(dz, dz + N);
    if (run == 1) {
      EXPECT_EQ(std::memcmp(yo.data(), first_y.data(), N * sizeof(T)), 0) << "forward not reproducible";
      EXPECT_EQ(std::memcmp(dxo.data(), first_dx.data(), N * sizeof(T)), 0) << "backward not reproducible";
      break;
    }
    first_y = yo, first_dx = dxo;
    EXPECT_LT(rel_err<T>(yo, y_ref), E::tol) << "y";
    std::vector<double> rm_ref, rv_ref;
    test::bn_running(ref, R, momentum, rm0, rv0, &rm_ref, &rv_ref);
    EXPECT_LT(rel_errf(sm, mean), 2e-5) << "saved mean";
    EXPECT_LT(rel_errf(si, invstd), 2e-5) << "saved 1/std";
    EXPECT_LT(rel_errf(rm, rm_ref), 2e-5) << "running mean";
    EXPECT_LT(rel_errf(rv, rv_ref), 2e-5) << "running variance";
    const test::BnGradients gr = test::bn_backward(xd, dyd, doubles(yo), ref, gamma, relu, accumulate ? &dx0d : nullptr,
                                                   accumulate ? &dz0d : nullptr);
    const std::vector<double>&dx_ref = gr.dx, &dz_ref = gr.dz;
    EXPECT_LT(rel_errf(db, gr.dbeta), 1e-5) << "dβ";
    EXPECT_LT(rel_errf(dg, gr.dgamma), 1e-4) << "dγ";
    EXPECT_LT(rel_err<T>(dxo, dx_ref), E::tol * 2) << "dx";
    if (res) EXPECT_LT(rel_err<T>(dzo, dz_ref), E::tol) << "dz";
    else EXPECT_EQ(std::memcmp(dzo.data(), dz0.data(), N * sizeof(T)), 0) << "dz written without a residual";
  }
  // Evaluation: the running statistics as updated by the (second) training forward.
  std::vector<double> em(C), eis(C);
  for (int c = 0; c < C; ++c) em[c] = rm[c], eis[c] = 1 / std::sqrt(double(rv[c]) + eps);
  const std::vector<double> ye_ref = test::bn_forward(xd, res ? &zd : nullptr, em, eis, gamma, beta, relu);
  const std::vector<float> rm_before = rm;
  bnd::forward_eval_impl<L, T>(x, res ? z : nullptr, y, R, C, {gamma.data(), beta.data(), rm.data(), rv.data()},
                                       eps, relu, ws.data(), nullptr);
  EXPECT_LT(rel_err<T>(std::vector<T>(y, y + N), ye_ref), E::tol) << "evaluation y";
  EXPECT_EQ(rm, rm_before) << "evaluation changed the running mean";
}

// Channel counts for every access width (64: 16-byte accesses in both types; 12, 6, 5),
// one row chunk and many (20000 rows: 78 chunks), many channel blocks (2048), a mean of
// 1000 (the shifted sums), the 3-row minimum case.
const Case kCases[] = {{1000, 64, 0.0}, {777, 12, 0.5}, {301, 6, -1.0}, {3, 5, 0.0},
                       {20000, 64, 0.0}, {300, 2048, 0.0}, {2000, 32, 1000.0}};

template <class T>
void check_all() {
  for (const Case& k : kCases)
    for (int f = 0; f < 3; ++f)
      for (bool acc : {false, true}) check_case<T>(k, f >= 1, f == 2, acc);
  check_case<T>({1000, 64, 0.0}, true, true, true, true);
}

}  // namespace

TEST(EmulatedBatchNormNhwc, Bf16AgainstDoubleReference) {
  check_all<bf16_t>();
  EXPECT_GT(EmuLaunch::blocks, 0);
}

TEST(EmulatedBatchNormNhwc, Fp32AgainstDoubleReference) { check_all<float>(); }

// The launch geometry: at most 512 blocks per reduction whatever the shape, enough rows
// per thread, the same geometry for the same shape (determinism: never the GPU's size).
TEST(EmulatedBatchNormNhwc, GeometryBounded) {
  for (const int64_t rows : {int64_t{1}, int64_t{3}, int64_t{6272}, int64_t{401408}, int64_t{1605632}})
    for (const int c : {1, 5, 64, 256, 2048})
      for (const int V : {1, 2, 4, 8}) {
        if (c % V) continue;
        const auto g = bnd::geometry(rows, c, V);
        EXPECT_LE(int64_t{g.grid.x} * g.grid.y, 512 + int64_t{g.grid.x}) << rows << " " << c << " " << V;
        EXPECT_GE(int64_t{g.grid.y} * g.chunk, rows);
        EXPECT_LT(int64_t{g.grid.y - 1} * g.chunk, rows) << "an empty row chunk";
        EXPECT_LE(g.block.x * g.block.y, 256u);
        EXPECT_LE(g.shared_bytes(), 48u * 1024u);
        const auto h = bnd::geometry(rows, c, V);
        EXPECT_EQ(h.grid.y, g.grid.y);
        EXPECT_EQ(h.chunk, g.chunk);
      }
}

// A launcher that names kTargetBlocks (the development bench's versions 3-5,
// bench/kernels/batchnorm_nhwc.cu) gets that geometry, and its workspace size, in every
// pass; the others get the product's 512.
struct EmuTarget3 : EmuLaunch {
  static constexpr int kTargetBlocks = 3;
};
TEST(EmulatedBatchNormNhwc, LauncherBlockTargetHonoured) {
  static_assert(bnd::TargetOf<EmuLaunch>::value == bnd::kTargetBlocks);
  static_assert(bnd::TargetOf<EmuTarget3>::value == 3);
  const auto g = bnd::geometry(6000, 8, 4, 3), d = bnd::geometry(6000, 8, 4);
  EXPECT_EQ(g.grid.y, 3u);
  EXPECT_GT(d.grid.y, 3u);
  EXPECT_LT(bnd::workspace_bytes_impl(6000, 8, false, 3), bnd::workspace_bytes_impl(6000, 8, false));
  {  // one training forward: stats (3 blocks), finalize (1), apply (3)
    const int64_t R = 6000;
    const int C = 8;
    std::vector<float> x = random_tensor<float>(R * C, 5, 0.0, 1.0), y(R * C), g(C, 1.f), b(C, 0.f), rm(C, 0.f),
                       rv(C, 1.f), sm(C), si(C);
    std::vector<char> ws(bnd::workspace_bytes_impl(R, C, false, 3));
    const int b0 = EmuLaunch::blocks;
    bnd::forward_train_impl<EmuTarget3, float>(x.data(), nullptr, y.data(), R, C, {g.data(), b.data(), rm.data(),
                                               rv.data()}, 0.1, 1e-5, sm.data(), si.data(), false, ws.data(), nullptr);
    EXPECT_EQ(EmuLaunch::blocks - b0, 3 + 1 + 3);
  }
  const int before = EmuLaunch::blocks;
  // fp32, c = 8: 2 channel vectors × 128 rows per block; 3 row chunks.
  for (int f = 0; f < 3; ++f) check_case<float, EmuTarget3>({6000, 8, 0.5}, f >= 1, f == 2, f == 1);
  check_case<bf16_t, EmuTarget3>({3001, 16, 0.0}, true, true, false);
  EXPECT_GT(EmuLaunch::blocks, before);
}

// --sync-bn: a batch split over two "ranks" (two halves of its rows, each its own passes,
// the per-channel sums added on the host as ControlComm would) gives the one-batch result:
// outputs, saved statistics, running statistics, dx and dz; each half's dγ, dβ its own
// share (their sum the whole batch's). Fused ReLU and residual, bf16 and fp32.
template <class T>
void check_sync(int64_t R1, int64_t R2, int C) {
  using E = Elem<T>;
  SCOPED_TRACE(std::string(E::name) + " rows " + std::to_string(R1) + "+" + std::to_string(R2) + " c=" +
               std::to_string(C));
  const int64_t R = R1 + R2;
  const size_t N = static_cast<size_t>(R) * C, N1 = static_cast<size_t>(R1) * C;
  auto x = random_tensor<T>(N, 11, 0.3, 2.0), z = random_tensor<T>(N, 12, 0, 1), dy = random_tensor<T>(N, 13, 0, 1);
  std::vector<float> gamma(C, 1.25f), beta(C, -0.1f);
  // One batch.
  std::vector<T> y(N), dx(N), dz(N);
  std::vector<float> rm(C, 0.f), rv(C, 1.f), sm(C), si(C), dg(C), db(C);
  std::vector<char> ws(bnd::workspace_bytes_impl(R, C, sizeof(T) == 2));
  bnd::forward_train_impl<EmuLaunch, T>(x.data(), z.data(), y.data(), R, C, {gamma.data(), beta.data(), rm.data(),
                                        rv.data()}, 0.1, 1e-5, sm.data(), si.data(), true, ws.data(), nullptr);
  bnd::backward_impl<EmuLaunch, T>(x.data(), y.data(), dy.data(), dx.data(), false, dz.data(), false, R, C,
                                   gamma.data(), sm.data(), si.data(), dg.data(), db.data(), true, ws.data(), nullptr);
  // Two halves.
  std::vector<T> y2(N), dx2(N), dz2(N);
  std::vector<float> rm2(C, 0.f), rv2(C, 1.f), sm2(C), si2(C), dg_a(C), db_a(C), dg_b(C), db_b(C);
  std::vector<double> sa(2 * static_cast<size_t>(C)), sb(sa.size()), sum(sa.size());
  const size_t off[2] = {0, N1};
  const int64_t rows[2] = {R1, R2};
  for (int h = 0; h < 2; ++h)
    bnd::forward_local_sums_impl<EmuLaunch, T>(x.data() + off[h], rows[h], C, ws.data(), h ? sb.data() : sa.data(),
                                               nullptr);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = sa[i] + sb[i];
  for (int h = 0; h < 2; ++h) {
    std::vector<float> rmh(C, 0.f), rvh(C, 1.f);  // each rank updates its own copy alike
    bnd::forward_global_impl<EmuLaunch, T>(x.data() + off[h], z.data() + off[h], y2.data() + off[h], rows[h], C,
                                           sum.data(), double(R), {gamma.data(), beta.data(), rmh.data(), rvh.data()},
                                           0.1, 1e-5, sm2.data(), si2.data(), true, ws.data(), nullptr);
    rm2 = rmh, rv2 = rvh;
  }
  std::vector<double> la(sa.size()), lb(sa.size()), gsum(sa.size());
  for (int h = 0; h < 2; ++h)
    bnd::backward_local_sums_impl<EmuLaunch, T>(x.data() + off[h], y2.data() + off[h], dy.data() + off[h],
                                                dz2.data() + off[h], false, rows[h], C, sm2.data(), true, ws.data(),
                                                h ? lb.data() : la.data(), nullptr);
  for (size_t i = 0; i < gsum.size(); ++i) gsum[i] = la[i] + lb[i];
  for (int h = 0; h < 2; ++h)
    bnd::backward_global_impl<EmuLaunch, T>(x.data() + off[h], y2.data() + off[h], dy.data() + off[h],
                                            dx2.data() + off[h], false, rows[h], C, gamma.data(), sm2.data(),
                                            si2.data(), h ? lb.data() : la.data(), gsum.data(), double(R),
                                            h ? dg_b.data() : dg_a.data(), h ? db_b.data() : db_a.data(), true,
                                            ws.data(), nullptr);
  const auto as_double = [](const std::vector<T>& v) { return test::to_doubles<E>(v); };
  auto f2d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  EXPECT_LT(rel_err<T>(y2, as_double(y)), E::tol) << "y";
  EXPECT_LT(rel_errf(sm2, f2d(sm)), 1e-5) << "saved mean";
  EXPECT_LT(rel_errf(si2, f2d(si)), 1e-5) << "saved 1/std";
  EXPECT_LT(rel_errf(rm2, f2d(rm)), 1e-5) << "running mean";
  EXPECT_LT(rel_errf(rv2, f2d(rv)), 1e-5) << "running variance (unbiased over the global batch)";
  EXPECT_LT(rel_err<T>(dx2, as_double(dx)), 2 * E::tol) << "dx";
  EXPECT_LT(rel_err<T>(dz2, as_double(dz)), E::tol) << "dz";
  std::vector<float> dgs(C), dbs(C);
  for (int c = 0; c < C; ++c) dgs[c] = dg_a[c] + dg_b[c], dbs[c] = db_a[c] + db_b[c];
  EXPECT_LT(rel_errf(dgs, f2d(dg)), 1e-4) << "dγ of the halves summed";
  EXPECT_LT(rel_errf(dbs, f2d(db)), 1e-5) << "dβ of the halves summed";
  EXPECT_GT(rel_errf(dg_a, f2d(dg)), 1e-3) << "a half's dγ is its own share, not the whole batch's";
}

TEST(EmulatedBatchNormNhwc, SyncOverTwoRanksEqualsOneBatch) {
  check_sync<float>(700, 300, 64);
  check_sync<float>(5, 4, 6);
  check_sync<bf16_t>(700, 300, 64);
  check_sync<bf16_t>(300, 301, 12);
}
