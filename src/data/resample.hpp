// resample.hpp — PIL's bilinear resample (Image.resize(size, BILINEAR): the antialiased
// filter under torchvision's Resize and RandomResizedCrop on PIL images), bit for bit,
// vectorised for the training reader.
//
// Pillow's algorithm (Resample.c, 8 bits per channel): per axis, for output index i the
// filter centre is (i + 0.5)·scale, its support 1·max(scale, 1) input pixels each side,
// the triangle weights normalised to sum 1 and rounded to 22-bit fixed point; the
// horizontal pass runs first, each value rounded and clipped to uint8, then the vertical
// pass on that. An axis whose size does not change is not filtered.
//
// Why a second implementation (PlaneResampler) beside the plain loop: the plain loop
// (resample_bilinear_scalar, Pillow's loop order) took 68 % of a reader core on
// `data-bench --augment rrc224,hflip --cache memory` (perf, issue 27: 0.75 ms of a core
// per 224×224 image). PlaneResampler computes the same integer sums in another order,
// which changes no bit (every weight is ≥ 0, so each partial sum stays below
// 255·2^22 + 2^21 < 2^31 and integer addition is exact): both passes become "output row
// = Σ weight · input row", vectorised across the row (AVX-512, AVX2 or the baseline,
// chosen at load time), the horizontal pass on a transposed copy of the window
// (SSE2 16×16 byte transposes). tests/data/test_resample.cpp compares the two on every
// size pair that matters; augment_torchvision.sh compares with PIL itself.
#pragma once
#include <cstdint>
#include <vector>

namespace cnnscale {

// The fixed-point filter of one axis: per output index its first input index and tap
// count (bounds[2i], bounds[2i+1]) and ksize weights (k[i·ksize + t], zero past the count).
struct ResampleAxis {
  int in = 0, out = 0, ksize = 0;
  std::vector<int> bounds;
  std::vector<int32_t> k;
};
ResampleAxis resample_axis(int in_size, int out_size);

// Resamples single-channel planes (one channel of a C×H×W sample), reusing the
// coefficients while the sizes stay and its buffers always. One per thread.
class PlaneResampler {
 public:
  // in_w × in_h → out_w × out_h (all ≥ 1).
  void set(int in_w, int in_h, int out_w, int out_h);
  // src: in_h rows of in_w bytes, `stride` bytes apart (a window into a larger plane);
  // dst: out_h rows of out_w bytes. flip: the output mirrored left-right (torchvision's
  // RandomHorizontalFlip after the resize), at no extra cost.
  void run(const uint8_t* src, int64_t stride, uint8_t* dst, bool flip = false);

 private:
  ResampleAxis x_, y_;
  std::vector<uint8_t> t_, ht_, h_;  // the window transposed; after the horizontal pass, transposed and not
  std::vector<int32_t> acc_;
};

// Pillow's loop, as written there: `channels` interleaved 8-bit channels, src in_w ×
// in_h, dst out_w × out_h. The reference PlaneResampler is tested against.
void resample_bilinear_scalar(const uint8_t* src, int in_w, int in_h, int channels, uint8_t* dst, int out_w, int out_h);

// The same result; PlaneResampler for one channel, the scalar loop for interleaved ones.
void resample_bilinear(const uint8_t* src, int in_w, int in_h, int channels, uint8_t* dst, int out_w, int out_h);

// dst[c·dst_stride + r] = src[r·src_stride + c] for r < rows, c < cols.
void transpose_u8(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride, int rows, int cols);

}  // namespace cnnscale
