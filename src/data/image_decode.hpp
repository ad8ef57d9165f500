// image_decode.hpp — JPEG (libjpeg-turbo) and PNG (libpng) files → 8-bit RGB, as
// PIL's Image.open(path).convert("RGB") gives them (what torchvision's ImageFolder
// loader does), plus the two geometric transforms prep applies once: torchvision's
// Resize(S) (shorter side to S, bilinear with antialias = PIL's resample) and
// CenterCrop(S).
//
// Colour conversions (checked against PIL in tests/data/imagefolder_pil.sh):
//   JPEG YCbCr / RGB      → libjpeg's RGB output (same decoder and settings as PIL)
//   JPEG greyscale        → R = G = B = Y
//   JPEG CMYK / YCCK      → PIL's Adobe convention: C' = 255 − C (etc.), then
//                           R = K − K·C'/255 (PIL's MULDIV255 rounding), likewise G, B
//   PNG palette           → the palette colours (transparency ignored)
//   PNG grey (1/2/4/8-bit)→ R = G = B = the 8-bit expanded grey
//   PNG with alpha        → the colour channels, alpha dropped (no compositing)
//   PNG 16-bit            → the high byte of each sample (PIL differs for 16-bit grey,
//                           which it clips to 255 from its 32-bit "I" mode)
// Anything else (not JPEG or PNG by its first bytes, a corrupt or truncated file, 12-bit
// JPEG) is a UserError naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch_source.hpp"

namespace cnnscale {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height × width × 3, interleaved RGB, rows top to bottom
};

// PIL's decompression-bomb limit: Image.MAX_IMAGE_PIXELS = 89 478 485 warns, twice that
// raises DecompressionBombError; cnnscale refuses what PIL refuses.
constexpr int64_t kDefaultMaxImagePixels = 2 * int64_t{89478485};

// max_pixels > 0: an image whose header claims more than max_pixels pixels (width ×
// height) is a UserError naming the file and --max-image-pixels, raised from the
// header alone, before any pixel is allocated or decoded. 0: no limit.
RgbImage decode_image(const std::string& path, int64_t max_pixels = kDefaultMaxImagePixels);

// torchvision.transforms.Resize(size) on a PIL image: the shorter side becomes `size`,
// the longer int(size · long / short); PIL's bilinear resample with antialias (filter
// support scaled by the reduction factor, 22-bit fixed-point coefficients, horizontal
// pass then vertical, rounding to uint8 after each).
RgbImage resize_shorter(const RgbImage& in, int size);
// PIL's Image.resize((w, h), BILINEAR) (the primitive under resize_shorter).
RgbImage resize_bilinear(const RgbImage& in, int width, int height);
// (On raw planes or interleaved channels: resample_bilinear, data/resample.hpp.)

// JPEG bytes (`prep --store jpeg`): whether they start like a JPEG; decoding them from
// memory at scale scale_num/8 (libjpeg's DCT scaling: 8 decodes full size, exactly as
// decode_image does, so as PIL does; smaller scales decode a smaller image for less
// work, as FFCV does) into C×H×W planes (3 channels; greyscale and CMYK as above),
// `shape` the decoded size; a UserError naming `what` when they do not decode; and
// encoding an image as a baseline JPEG of the given quality (libjpeg's defaults:
// 4:2:0 chroma, the standard tables).
bool is_jpeg(const uint8_t* data, size_t n);
// A window of the image decoded at scale_num/8 (top, left, height, width in its pixels).
// Given to decode_jpeg_planes, it selects the fast mode (libjpeg-turbo's fast integer DCT,
// plain chroma upsampling: not PIL's pixels) and only the window's rows and columns,
// widened to whole iMCU columns, are decoded (the rows below it only Huffman-decoded, to
// the end of the data, so that damage there is an error as in the whole decode); on return
// `shape` is the decoded part and top/left say where the window starts in it.
// With `recorded` (the reader: the sample's /shapes entry; width and height compared, not
// the channels: greyscale and CMYK decode to 3), a JPEG whose header gives another size (bytes
// of another sample, its checksums made right: issue 48 item 7) is a UserError naming
// `what` and both sizes, raised from the header, before anything is decoded: a window
// drawn on the recorded size is never cut from an image of another.
struct JpegWindow {
  int top = 0, left = 0, height = 0, width = 0;
};
void decode_jpeg_planes(const uint8_t* data, size_t len, int scale_num, const std::string& what,
                        std::vector<uint8_t>& planes, SampleShape* shape, JpegWindow* win = nullptr,
                        const SampleShape* recorded = nullptr);
std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality);
// `prep --verify` of a stored JPEG: its header must give width × height (a UserError naming
// `what` and both sizes, before anything is decoded), then all of its entropy-coded data is
// decoded (jpeg_read_coefficients: Huffman only, no IDCT), a libjpeg warning an error as in
// decode_jpeg_planes — so every JPEG either reader mode would refuse is named here.
void check_jpeg(const uint8_t* data, size_t len, const std::string& what, int width, int height);

// torchvision.transforms.CenterCrop(size): zero-pads a smaller image to size (left/top
// get the floor half), then crops at top = round((h − size) / 2), left likewise, with
// Python's round (half to even).
RgbImage center_crop(const RgbImage& in, int size);

}  // namespace cnnscale
