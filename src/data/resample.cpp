// resample.cpp — see resample.hpp.
#include "data/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "util/error.hpp"

namespace cnnscale {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

double bilinear(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

inline uint8_t clip8(int32_t ss) { return static_cast<uint8_t>(std::clamp(ss >> kPrecisionBits, 0, 255)); }

// out[p] = clip8(2^21 + Σ_t k[t] · rows[(first + t)·stride + p]) for p < len: the taps in
// groups of four per sweep over the row (a partial sum in acc between sweeps).
__attribute__((target_clones("avx512f", "avx2", "default"))) void weighted_rows(const uint8_t* rows, int64_t stride,
                                                                                int first, int n, const int32_t* k,
                                                                                int len, int32_t* acc, uint8_t* out) {
  const uint8_t* r0 = rows + first * stride;
  for (int t = 0; t < n; t += 4) {
    const int m = std::min(4, n - t);
    const uint8_t* a = r0 + t * stride;
    const uint8_t* b = m > 1 ? a + stride : a;
    const uint8_t* c = m > 2 ? a + 2 * stride : a;
    const uint8_t* d = m > 3 ? a + 3 * stride : a;
    const int32_t ka = k[t], kb = m > 1 ? k[t + 1] : 0, kc = m > 2 ? k[t + 2] : 0, kd = m > 3 ? k[t + 3] : 0;
    const bool fresh = t == 0, last = t + 4 >= n;
    if (fresh && last) {
      for (int p = 0; p < len; ++p) out[p] = clip8(kHalf + a[p] * ka + b[p] * kb + c[p] * kc + d[p] * kd);
    } else if (fresh) {
      for (int p = 0; p < len; ++p) acc[p] = kHalf + a[p] * ka + b[p] * kb + c[p] * kc + d[p] * kd;
    } else if (!last) {
      for (int p = 0; p < len; ++p) acc[p] += a[p] * ka + b[p] * kb + c[p] * kc + d[p] * kd;
    } else {
      for (int p = 0; p < len; ++p) out[p] = clip8(acc[p] + a[p] * ka + b[p] * kb + c[p] * kc + d[p] * kd);
    }
  }
}

#if defined(__SSE2__)
// One 16×16 block: 16 rows of 16 bytes in, 16 columns out (four rounds of unpacking).
inline void transpose16(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ss));
  for (int i = 0; i < 8; ++i) {  // byte pairs: rows 2i, 2i+1
    b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  for (int j = 0; j < 4; ++j) {  // rows 4j..4j+3: columns 0-3, 4-7, 8-11, 12-15
    a[4 * j] = _mm_unpacklo_epi16(b[4 * j], b[4 * j + 2]);
    a[4 * j + 1] = _mm_unpackhi_epi16(b[4 * j], b[4 * j + 2]);
    a[4 * j + 2] = _mm_unpacklo_epi16(b[4 * j + 1], b[4 * j + 3]);
    a[4 * j + 3] = _mm_unpackhi_epi16(b[4 * j + 1], b[4 * j + 3]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7: column pairs (0,1), (2,3), …
    for (int q = 0; q < 4; ++q) {
      b[8 * h + 2 * q] = _mm_unpacklo_epi32(a[8 * h + q], a[8 * h + 4 + q]);
      b[8 * h + 2 * q + 1] = _mm_unpackhi_epi32(a[8 * h + q], a[8 * h + 4 + q]);
    }
  }
  for (int m = 0; m < 8; ++m) {  // column 2m and 2m+1, all 16 rows
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * m) * ds), _mm_unpacklo_epi64(b[m], b[8 + m]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * m + 1) * ds), _mm_unpackhi_epi64(b[m], b[8 + m]));
  }
}
#endif

}  // namespace

ResampleAxis resample_axis(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale;
  ResampleAxis c;
  c.in = in_size;
  c.out = out_size;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // Pillow's own rounding (truncation of x + 0.5), kept for its bits.
    int xmin = static_cast<int>(center - support + 0.5);  // NOLINT(bugprone-incorrect-roundings)
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);  // NOLINT(bugprone-incorrect-roundings)
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = bilinear((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[x] / ww : w[x];
      c.k[static_cast<size_t>(xx) * c.ksize + x] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.bounds[2 * xx] = xmin;
    c.bounds[2 * xx + 1] = xmax;
  }
  return c;
}

void transpose_u8(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride, int rows, int cols) {
  int r0 = 0;
#if defined(__SSE2__)
  for (; r0 + 16 <= rows; r0 += 16) {
    int c0 = 0;
    for (; c0 + 16 <= cols; c0 += 16)
      transpose16(src + r0 * src_stride + c0, src_stride, dst + c0 * dst_stride + r0, dst_stride);
    for (int c = c0; c < cols; ++c)
      for (int r = r0; r < r0 + 16; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
#endif
  for (int c = 0; c < cols; ++c)
    for (int r = r0; r < rows; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
}

void PlaneResampler::set(int in_w, int in_h, int out_w, int out_h) {
  if (in_w < 1 || in_h < 1 || out_w < 1 || out_h < 1)
    internal_error("resize ", in_w, "x", in_h, " to ", out_w, "x", out_h);
  if (x_.in != in_w || x_.out != out_w) x_ = resample_axis(in_w, out_w);
  if (y_.in != in_h || y_.out != out_h) y_ = resample_axis(in_h, out_h);
}

void PlaneResampler::run(const uint8_t* src, int64_t stride, uint8_t* dst, bool flip) {
  const int in_w = x_.in, in_h = y_.in, out_w = x_.out, out_h = y_.out;
  acc_.resize(static_cast<size_t>(std::max(in_h, out_w)));
  // Horizontal pass on the transposed window: row x of ht_ (in_h bytes) is output column
  // x (out_w − 1 − x when flipped); ht_ transposed back is the in_h × out_w image.
  const uint8_t* mid = src;
  int64_t mid_stride = stride;
  bool flipped = false;
  if (out_w != in_w) {
    t_.resize(static_cast<size_t>(in_w) * in_h);
    ht_.resize(static_cast<size_t>(out_w) * in_h);
    h_.resize(static_cast<size_t>(in_h) * out_w);
    transpose_u8(src, stride, t_.data(), in_h, in_h, in_w);
    for (int x = 0; x < out_w; ++x) {
      const int row = flip ? out_w - 1 - x : x;
      weighted_rows(t_.data(), in_h, x_.bounds[2 * x], x_.bounds[2 * x + 1], x_.k.data() + int64_t{x} * x_.ksize, in_h,
                    acc_.data(), ht_.data() + int64_t{row} * in_h);
    }
    transpose_u8(ht_.data(), in_h, h_.data(), out_w, out_w, in_h);
    mid = h_.data();
    mid_stride = out_w;
    flipped = flip;
  }
  if (out_h != in_h) {
    for (int y = 0; y < out_h; ++y)
      weighted_rows(mid, mid_stride, y_.bounds[2 * y], y_.bounds[2 * y + 1], y_.k.data() + int64_t{y} * y_.ksize, out_w,
                    acc_.data(), dst + int64_t{y} * out_w);
  } else {
    for (int y = 0; y < out_h; ++y)
      std::memcpy(dst + int64_t{y} * out_w, mid + y * mid_stride, static_cast<size_t>(out_w));
  }
  if (flip && !flipped)  // no horizontal pass to fold the flip into
    for (int y = 0; y < out_h; ++y) std::reverse(dst + int64_t{y} * out_w, dst + int64_t{y + 1} * out_w);
}

void resample_bilinear_scalar(const uint8_t* src, int in_w, int in_h, int channels, uint8_t* dst, int out_w,
                              int out_h) {
  if (out_w < 1 || out_h < 1 || in_w < 1 || in_h < 1)
    internal_error("resize ", in_w, "x", in_h, " to ", out_w, "x", out_h);
  const size_t in_stride = static_cast<size_t>(in_w) * channels;
  std::vector<uint8_t> mid;  // after the horizontal pass: in_h rows of out_w pixels
  const uint8_t* cur = src;
  int cur_w = in_w;
  if (out_w != in_w) {
    const ResampleAxis c = resample_axis(in_w, out_w);
    const bool last = out_h == in_h;
    mid.resize(static_cast<size_t>(out_w) * in_h * channels);
    uint8_t* out = last ? dst : mid.data();
    for (int y = 0; y < in_h; ++y) {
      const uint8_t* s = src + y * in_stride;
      uint8_t* d = out + static_cast<size_t>(y) * out_w * channels;
      for (int x = 0; x < out_w; ++x) {
        const int xmin = c.bounds[2 * x], n = c.bounds[2 * x + 1];
        const int32_t* k = c.k.data() + static_cast<size_t>(x) * c.ksize;
        for (int ch = 0; ch < channels; ++ch) {
          int32_t ss = kHalf;
          for (int i = 0; i < n; ++i) ss += s[channels * (xmin + i) + ch] * k[i];
          d[channels * x + ch] = clip8(ss);
        }
      }
    }
    if (last) return;
    cur = mid.data();
    cur_w = out_w;
  }
  const size_t stride = static_cast<size_t>(cur_w) * channels;
  if (out_h == in_h) {  // same size: a copy
    std::memcpy(dst, cur, stride * in_h);
    return;
  }
  const ResampleAxis c = resample_axis(in_h, out_h);
  for (int y = 0; y < out_h; ++y) {
    const int ymin = c.bounds[2 * y], n = c.bounds[2 * y + 1];
    const int32_t* k = c.k.data() + static_cast<size_t>(y) * c.ksize;
    uint8_t* d = dst + y * stride;
    for (size_t p = 0; p < stride; ++p) {
      int32_t ss = kHalf;
      for (int i = 0; i < n; ++i) ss += cur[(ymin + i) * stride + p] * k[i];
      d[p] = clip8(ss);
    }
  }
}

void resample_bilinear(const uint8_t* src, int in_w, int in_h, int channels, uint8_t* dst, int out_w, int out_h) {
  if (channels != 1) return resample_bilinear_scalar(src, in_w, in_h, channels, dst, out_w, out_h);
  PlaneResampler r;
  r.set(in_w, in_h, out_w, out_h);
  r.run(src, in_w, dst);
}

}  // namespace cnnscale
