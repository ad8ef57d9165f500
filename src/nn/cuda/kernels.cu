// kernels.cu — see kernels.hpp.
#include "nn/cuda/kernels.hpp"
#include "nn/dropout_mask.hpp"
#include "util/cuda/check.hpp"
#include "util/error.hpp"

#include <algorithm>

namespace cnnscale::nn::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void softmax_ce_kernel(const float* z, const int32_t* labels, int64_t n, int C, float loss_scale, float* dz,
                                  double* loss) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float* zi = z + i * C;
  float* di = dz + i * C;
  const int32_t y = labels[i];
  float m = zi[0];
  for (int j = 1; j < C; ++j) m = fmaxf(m, zi[j]);
  double s = 0;
  for (int j = 0; j < C; ++j) s += exp(static_cast<double>(zi[j] - m));
  const double lse = m + log(s);
  loss[i] = lse - zi[y];
  for (int j = 0; j < C; ++j) {
    const double p = exp(static_cast<double>(zi[j]) - lse);
    di[j] = static_cast<float>((p - (j == y ? 1.0 : 0.0)) * loss_scale);
  }
}

// One thread, in sample order: the same summation order as the CPU model.
__global__ void sum_kernel(const double* loss, int64_t n, double* total) {
  double t = 0;
  for (int64_t i = 0; i < n; ++i) t += loss[i];
  *total = t;
}

__global__ void dropout_forward_kernel(const float* x, float* y, uint8_t* mask, int64_t n, int64_t numel, uint64_t seed,
                                       int64_t step, int layer, const int64_t* ids, uint64_t threshold, float scale) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= n * numel) return;
  const int64_t i = k / numel, j = k - i * numel;
  const uint64_t key = dropout_sample_key(seed, step, layer, ids[i]);
  const bool keep = dropout_keep(key, j, threshold);
  mask[k] = keep;
  y[k] = __fmul_rn(x[k], keep ? scale : 0.f);  // a product, as PyTorch's: a NaN stays NaN, a dropped -x is -0
}

__global__ void dropout_backward_kernel(const float* dy, float* dx, const uint8_t* mask, int64_t total, float scale,
                                        bool accumulate) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= total) return;
  const float g = __fmul_rn(dy[k], mask[k] ? scale : 0.f);  // _rn: no fused multiply-add; NaN stays
  dx[k] = accumulate ? dx[k] + g : g;
}

__global__ void increment_kernel(float* p) { *p += 1.f; }

// Per image (blockIdx.z, striding by gridDim.z): in is rows×cols row-major, out is
// cols×rows; out[j][i] = store(load(in[i][j])). Tiles of 32×32 through shared memory (one
// column of padding: no bank conflicts), blocks of 32×8 threads, 4 rows per thread.
constexpr int kTile = 32, kTileRows = 8;

__device__ float load(float v) { return v; }
__device__ float load(bf16_t v) { return __bfloat162float(v); }

struct ToBf16 {
  bool accumulate;
  __device__ void operator()(bf16_t* o, float v) const {
    *o = __float2bfloat16_rn(accumulate ? __fadd_rn(__bfloat162float(*o), v) : v);
  }
};
struct ToFloat {
  bool accumulate;
  __device__ void operator()(float* o, float v) const { *o = accumulate ? *o + v : v; }
};
struct Copy {
  __device__ void operator()(float* o, float v) const { *o = v; }
};

template <class In, class Out, class Store>
__global__ void transpose_kernel(const In* in, Out* out, int64_t n, int rows, int cols, Store store) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t per = int64_t{rows} * cols;
  for (int64_t img = blockIdx.z; img < n; img += gridDim.z) {
    const In* src = in + img * per;
    Out* dst = out + img * per;
    int col = blockIdx.x * kTile + threadIdx.x;
    int row = blockIdx.y * kTile + threadIdx.y;
    for (int j = 0; j < kTile; j += kTileRows)
      if (row + j < rows && col < cols) tile[threadIdx.y + j][threadIdx.x] = load(src[int64_t{row + j} * cols + col]);
    __syncthreads();
    col = blockIdx.y * kTile + threadIdx.x;  // an input row: the output's column
    row = blockIdx.x * kTile + threadIdx.y;  // an input column: the output's row
    for (int j = 0; j < kTile; j += kTileRows)
      if (row + j < cols && col < rows) store(&dst[int64_t{row + j} * rows + col], tile[threadIdx.x][threadIdx.y + j]);
    __syncthreads();  // the tile is refilled for the next image
  }
}

__global__ void to_bf16_kernel(const float* x, bf16_t* y, int64_t count) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k < count) y[k] = __float2bfloat16_rn(x[k]);
}

// Elementwise layers on bf16 (the activation store): y[k] = f(a[k], b[k], y[k]) over
// packs of W consecutive values, W = 8 (one 16-byte load or store per operand) where the
// count and the pointers allow, else W = 1; grid-stride loops.
template <int W>
struct alignas(2 * W) Pack {
  bf16_t v[W];
};

template <int W, class F>
__global__ void map_bf16_kernel(const bf16_t* a, const bf16_t* b, bf16_t* y, int64_t packs, F f) {
  using P = Pack<W>;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < packs; k += int64_t{gridDim.x} * blockDim.x) {
    const P pa = reinterpret_cast<const P*>(a)[k];
    P pb{}, py{};
    if (b) pb = reinterpret_cast<const P*>(b)[k];
    if (f.reads_out) py = reinterpret_cast<const P*>(y)[k];
#pragma unroll
    for (int i = 0; i < W; ++i) py.v[i] = f(pa.v[i], pb.v[i], py.v[i]);
    reinterpret_cast<P*>(y)[k] = py;
  }
}

__device__ bf16_t sum_bf16(bf16_t a, bf16_t b) {  // fp32 sum, one rounding
  return __float2bfloat16_rn(__fadd_rn(__bfloat162float(a), __bfloat162float(b)));
}

struct ReluForward {  // a = x; a NaN passes (its bits), -0 → +0
  bool reads_out = false;
  __device__ bf16_t operator()(bf16_t x, bf16_t, bf16_t) const {
    const float v = __bfloat162float(x);
    return v > 0.f || v != v ? x : __float2bfloat16_rn(0.f);
  }
};
struct ReluBackward {  // a = y, b = dy, out = dx
  bool reads_out;      // accumulate
  __device__ bf16_t operator()(bf16_t y, bf16_t dy, bf16_t dx) const {
    const bool pass = __bfloat162float(y) > 0.f;
    if (!reads_out) return pass ? dy : __float2bfloat16_rn(0.f);
    return pass ? sum_bf16(dx, dy) : dx;
  }
};
struct AddBf16 {
  bool reads_out = false;
  __device__ bf16_t operator()(bf16_t a, bf16_t b, bf16_t) const { return sum_bf16(a, b); }
};

__global__ void bias_add_nhwc_bf16_kernel(bf16_t* y, const float* b, int64_t rows, int c) {
  const int64_t count = rows * c;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < count; k += int64_t{gridDim.x} * blockDim.x)
    y[k] = __float2bfloat16_rn(__fadd_rn(__bfloat162float(y[k]), b[k % c]));
}

// Stage 1: block (x: 32 channels, y: kTileRows row lanes) of chunk blockIdx.y sums the
// rows r ≡ lane (mod kTileRows) of its chunk in order, then the lanes in order.
__global__ void bias_grad_partial_kernel(const bf16_t* dy, int64_t rows, int c, float* partial) {
  __shared__ float lanes[kTileRows][kTile];
  const int ch = blockIdx.x * kTile + threadIdx.x;
  const int64_t per = (rows + kBiasChunks - 1) / kBiasChunks;
  const int64_t begin = blockIdx.y * per, end = min(rows, begin + per);
  float sum = 0.f;
  if (ch < c)
    for (int64_t r = begin + threadIdx.y; r < end; r += kTileRows) sum = __fadd_rn(sum, __bfloat162float(dy[r * c + ch]));
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    float t = 0.f;
    for (int l = 0; l < kTileRows; ++l) t = __fadd_rn(t, lanes[l][threadIdx.x]);
    partial[int64_t{blockIdx.y} * c + ch] = t;
  }
}

// Stage 2: db[ch] = the chunks' sums in chunk order.
__global__ void bias_grad_sum_kernel(const float* partial, int c, float* db) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  float t = 0.f;
  for (int k = 0; k < kBiasChunks; ++k) t = __fadd_rn(t, partial[int64_t{k} * c + ch]);
  db[ch] = t;
}

// Enough blocks to fill the GPU without a block per element of a large activation (the
// loops stride); gridDim.x allows 2^31 - 1.
unsigned stride_blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 20)); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class F>
void map_bf16(const bf16_t* a, const bf16_t* b, bf16_t* y, int64_t count, F f, cudaStream_t s) {
  if (count == 0) return;
  if (count % 8 == 0 && aligned16(a) && (!b || aligned16(b)) && aligned16(y))
    map_bf16_kernel<8><<<stride_blocks(count / 8), kThreads, 0, s>>>(a, b, y, count / 8, f);
  else
    map_bf16_kernel<1><<<stride_blocks(count), kThreads, 0, s>>>(a, b, y, count, f);
  cudaCheck(cudaGetLastError());
}

template <class In, class Out, class Store>
void transpose(const In* in, Out* out, int64_t n, int64_t rows, int64_t cols, Store store, cudaStream_t s) {
  if (n * rows * cols == 0) return;
  const int64_t gx = (cols + kTile - 1) / kTile, gy = (rows + kTile - 1) / kTile;
  if (gy > 65535)  // gridDim.y's limit (x allows 2^31 - 1)
    fail("a ", rows, "x", cols, " layout change is beyond the GPU grid (", 65535 * kTile,
         " rows); lower the image size, or run the convolutions on NCHW tensors: --precision fp32 with --tf32 off "
         "(or CNNSCALE_TF32_NCHW=1 to keep TF32)");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(std::min<int64_t>(n, 65535)));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(in, out, n, static_cast<int>(rows), static_cast<int>(cols),
                                                           store);
  cudaCheck(cudaGetLastError());
}

}  // namespace

void softmax_ce(const float* z, const int32_t* labels, int64_t n, int C, float loss_scale, float* dz, double* loss,
                double* total, cudaStream_t s) {
  softmax_ce_kernel<<<blocks_for(n), kThreads, 0, s>>>(z, labels, n, C, loss_scale, dz, loss);
  cudaCheck(cudaGetLastError());
  sum_kernel<<<1, 1, 0, s>>>(loss, n, total);
  cudaCheck(cudaGetLastError());
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t numel, uint64_t seed, int64_t step,
                     int layer, const int64_t* ids, uint64_t threshold, float scale, cudaStream_t s) {
  if (n * numel == 0) return;
  dropout_forward_kernel<<<blocks_for(n * numel), kThreads, 0, s>>>(x, y, mask, n, numel, seed, step, layer, ids,
                                                                      threshold, scale);
  cudaCheck(cudaGetLastError());
}

void dropout_backward(const float* dy, float* dx, const uint8_t* mask, int64_t total, float scale, bool accumulate,
                      cudaStream_t s) {
  if (total == 0) return;
  dropout_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, dx, mask, total, scale, accumulate);
  cudaCheck(cudaGetLastError());
}

void to_bf16_nhwc(const float* x, bf16_t* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s, bool accumulate) {
  transpose(x, y, n, c, hw, ToBf16{accumulate}, s);  // per image: c×hw → hw×c
}

void relu_forward_bf16(const bf16_t* x, bf16_t* y, int64_t count, cudaStream_t s) {
  map_bf16(x, nullptr, y, count, ReluForward{}, s);
}

void relu_backward_bf16(const bf16_t* y, const bf16_t* dy, bf16_t* dx, int64_t count, bool accumulate,
                        cudaStream_t s) {
  map_bf16(y, dy, dx, count, ReluBackward{accumulate}, s);
}

void add_bf16(const bf16_t* a, const bf16_t* b, bf16_t* y, int64_t count, cudaStream_t s) {
  map_bf16(a, b, y, count, AddBf16{}, s);
}

void bias_add_nhwc_bf16(bf16_t* y, const float* b, int64_t rows, int c, cudaStream_t s) {
  if (rows * c == 0) return;
  bias_add_nhwc_bf16_kernel<<<stride_blocks(rows * c), kThreads, 0, s>>>(y, b, rows, c);
  cudaCheck(cudaGetLastError());
}

void bias_grad_nhwc_bf16(const bf16_t* dy, float* db, int64_t rows, int c, float* partial, cudaStream_t s) {
  if (c == 0) return;
  const dim3 grid(static_cast<unsigned>((c + kTile - 1) / kTile), kBiasChunks);
  bias_grad_partial_kernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(dy, rows, c, partial);
  cudaCheck(cudaGetLastError());
  bias_grad_sum_kernel<<<blocks_for(c), kThreads, 0, s>>>(partial, c, db);
  cudaCheck(cudaGetLastError());
}

void from_bf16_nhwc(const bf16_t* x, float* y, int64_t n, int64_t c, int64_t hw, bool accumulate, cudaStream_t s) {
  transpose(x, y, n, hw, c, ToFloat{accumulate}, s);  // per image: hw×c → c×hw
}

void to_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s, bool accumulate) {
  if (accumulate) transpose(x, y, n, c, hw, ToFloat{true}, s);
  else transpose(x, y, n, c, hw, Copy{}, s);
}

void from_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw, bool accumulate, cudaStream_t s) {
  transpose(x, y, n, hw, c, ToFloat{accumulate}, s);
}

void to_bf16(const float* x, bf16_t* y, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  to_bf16_kernel<<<blocks_for(count), kThreads, 0, s>>>(x, y, count);
  cudaCheck(cudaGetLastError());
}

void increment(float* p, cudaStream_t s) {
  increment_kernel<<<1, 1, 0, s>>>(p);
  cudaCheck(cudaGetLastError());
}

}  // namespace cnnscale::nn::cuda
