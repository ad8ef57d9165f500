// fuzz_image_decode.cpp — libFuzzer target: the image decoders (data/image_decode.cpp) through
// the product's own wrappers of libjpeg-turbo and libpng: decode_image() on a file (prep's
// image folders: JPEG and PNG, PIL's colour conversions, the pixel limit from the header),
// decode_jpeg_planes() on bytes (the reader of a JPEG store: whole at a DCT scale, or the fast
// mode's window with the recorded size checked first, the end-of-data check) and check_jpeg()
// (prep --verify).
// Input: 8 bytes then the file's bytes: [0] mode (0 decode_image, 1 planes whole, 2 planes
// windowed with a recorded size, 3 check_jpeg), [1] the DCT scale (1..8 from its low 3 bits),
// [2..5] the window's top, left, height, width, [6..7] the recorded width and height (the
// reader's /shapes entry, given to modes 1 to 3).
// A UserError is the expected answer to bytes that are not an image it takes; anything else
// escaping, a crash, a hang or a sanitizer report is a defect. What decodes must hold what
// it says: width × height × 3 bytes (decode_image), C × H × W planes of the window or the
// scaled image, the recorded size where one was given.
// CNNSCALE_FUZZ_PRINT=1: say whether each input decoded (and why not), to check seeds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "data/image_decode.hpp"
#include "util/error.hpp"

namespace {

const std::string& image_path() {
  // Never destroyed: RemoveAtExit (a global, made before it) uses it at exit.
  static const std::string& path = *new std::string("/dev/shm/cnnscale-fuzz-image-" + std::to_string(getpid()));
  return path;
}

struct RemoveAtExit {
  ~RemoveAtExit() { unlink(image_path().c_str()); }
} remove_at_exit;

// 4 Mpixels: the header check is the same code at any limit; a larger one only makes the
// fuzzer slow on headers that claim big images (the default, PIL's 179 Mpixels, is tested
// in tests/data).
constexpr int64_t kMaxPixels = int64_t{1} << 22;

void decode_file(const uint8_t* data, size_t size) {
  {
    std::ofstream f(image_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) std::abort();
  }
  const cnnscale::RgbImage im = cnnscale::decode_image(image_path(), kMaxPixels);
  if (im.width <= 0 || im.height <= 0 || int64_t{im.width} * im.height > kMaxPixels ||
      im.pixels.size() != size_t(im.width) * size_t(im.height) * 3)
    std::abort();
  // What prep does next with it (torchvision's Resize and CenterCrop).
  const cnnscale::RgbImage r = cnnscale::resize_shorter(im, 5);
  if (std::min(r.width, r.height) != 5 || r.pixels.size() != size_t(r.width) * size_t(r.height) * 3) std::abort();
  const cnnscale::RgbImage c = cnnscale::center_crop(r, 4);
  if (c.width != 4 || c.height != 4 || c.pixels.size() != 48) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8 || size > (1 << 20)) return -1;
  const int mode = data[0] & 3;
  const int scale = (data[1] & 7) + 1;
  const uint8_t* bytes = data + 8;
  const size_t n = size - 8;
  try {
    if (mode == 0) {
      decode_file(bytes, n);
    } else if (mode == 3) {
      cnnscale::check_jpeg(bytes, n, "fuzz input", data[6], data[7]);
    } else {
      if (!cnnscale::is_jpeg(bytes, n)) return 0;  // the reader only hands JPEG bytes over
      // The reader passes the sample's /shapes entry: the JPEG's header must agree.
      const cnnscale::SampleShape recorded{3, data[7], data[6], 0};
      std::vector<uint8_t> planes;
      cnnscale::SampleShape shape;
      if (mode == 1) {  // evaluation (scale 8) and the data-bench's whole decodes
        cnnscale::decode_jpeg_planes(bytes, n, scale, "fuzz input", planes, &shape, nullptr, &recorded);
        if (shape.channels != 3 || shape.height != (recorded.height * scale + 7) / 8 ||
            shape.width != (recorded.width * scale + 7) / 8 || planes.size() < size_t(shape.numel()))
          std::abort();
      } else {
        // The reader draws its window inside the recorded size scaled (scale/8), as the
        // random-resized-crop does; a window outside it is not what it passes.
        const int sh = (recorded.height * scale + 7) / 8, sw = (recorded.width * scale + 7) / 8;
        if (sh <= 0 || sw <= 0) return 0;
        cnnscale::JpegWindow win{data[2] % sh, data[3] % sw, 0, 0};
        win.height = 1 + data[4] % (sh - win.top);
        win.width = 1 + data[5] % (sw - win.left);
        const cnnscale::JpegWindow asked = win;
        cnnscale::decode_jpeg_planes(bytes, n, scale, "fuzz input", planes, &shape, &win, &recorded);
        // The decoded part holds the window: it starts at (win.top, win.left) in it.
        if (shape.channels != 3 || win.top < 0 || win.left < 0 || win.top + asked.height > shape.height ||
            win.left + asked.width > shape.width || planes.size() < size_t(shape.numel()))
          std::abort();
      }
    }
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "decoded (mode %d)\n", mode);
  return 0;
}
