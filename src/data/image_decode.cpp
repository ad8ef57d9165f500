// image_decode.cpp — see image_decode.hpp. libjpeg and libpng report errors by longjmp:
// every C++ object those decoders touch is created before the setjmp, and the jump
// lands in the same function, which then throws the UserError.
#include "data/image_decode.hpp"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "data/resample.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// ---- JPEG -----------------------------------------------------------------------
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (msg_level -1: corrupt data, premature end of file) are errors here: a file
// that decodes only partly is named, not silently used.
void jpeg_emit(j_common_ptr c, int msg_level) {
  if (msg_level < 0) jpeg_error_exit(c);
}

// Points cinfo's error manager at err: errors and warnings longjmp to err.jump (which the
// caller sets with setjmp in its own frame) with err.message filled.
jpeg_error_mgr* jpeg_errors_to(JpegError& err) {
  jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_emit;
  return &err.mgr;
}

// PIL's MULDIV255: a·b/255 rounded as Pillow does it.
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// A decoded image of w×h RGB pixels must fit in memory: checked from the header, before
// the decoder allocates (with --max-image-pixels 0 a decompression bomb otherwise ended
// in an out-of-memory line naming no file: issue 26 item 12). Only for images over 256
// MiB decoded: reading the limits costs a few /proc reads.
std::string decode_memory_error(const std::string& path, int64_t w, int64_t h) {
  const uint64_t bytes = static_cast<uint64_t>(w) * static_cast<uint64_t>(h) * 3;
  if (bytes <= (uint64_t{256} << 20) || bytes <= memory_limit().bytes) return {};
  return out_of_memory_message(
      "decoding " + path + " (" + std::to_string(w) + "x" + std::to_string(h) + " pixels by its header)", bytes,
      "if the image is genuine, run with more memory; else remove the file (--max-image-pixels "
      "N refuses such images by their header, PIL's decompression-bomb limit by default)");
}

[[noreturn]] void too_many_pixels(const std::string& path, int64_t w, int64_t h, int64_t max_pixels) {
  fail(path, " claims ", w, "x", h, " = ", w * h, " pixels in its header, more than --max-image-pixels ", max_pixels,
       " (a decompression-bomb guard, PIL's limit by default); if the image is genuine, raise --max-image-pixels ",
       "(0: no limit), else remove the file");
}

// The JPEG decoder shared by files (prep) and stored bytes (the reader of `--store jpeg`):
// `src` sets the libjpeg source; the image is decoded at scale scale_num/8 (libjpeg's DCT
// scaling; 8: full size) and each output row is handed to row(y, rgb) as RGB (greyscale
// replicated, CMYK converted as PIL does) after `start(width, height)`.
// With `win` (fast mode, JpegWindow in image_decode.hpp): libjpeg-turbo's fast integer DCT
// and plain chroma upsampling, and only the window's rows (jpeg_skip_scanlines above it,
// jpeg_abort_decompress below) and columns (jpeg_crop_scanline, which widens them to whole
// iMCUs: start() gets the first column kept) decoded.
// With `recorded` (stored JPEGs: the sample's /shapes entry), a header whose size differs
// is a UserError naming both sizes, raised before anything is allocated or decoded.
template <typename Src, typename Start, typename Row>
void decode_jpeg_core(Src src, const std::string& path, const char* fix, int64_t max_pixels, int scale_num,
                      const JpegWindow* win, const SampleShape* recorded, std::vector<uint8_t>& row,
                      std::vector<uint8_t>& rgb, Start start, Row on_row) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_errors_to(err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    fail(path, " is not a readable JPEG (", err.message, "); ", fix);
  }
  jpeg_create_decompress(&cinfo);
  src(&cinfo);
  jpeg_read_header(&cinfo, TRUE);
  const int64_t jw = cinfo.image_width, jh = cinfo.image_height;
  if (recorded && (jw != recorded->width || jh != recorded->height)) {
    jpeg_destroy_decompress(&cinfo);
    fail(path, " is a ", jw, "x", jh, " JPEG by its header but its /shapes entry says ", recorded->width, "x",
         recorded->height, "; ", fix);
  }
  if (max_pixels > 0 && jw * jh > max_pixels) {  // before any pixel is decoded or allocated
    jpeg_destroy_decompress(&cinfo);
    too_many_pixels(path, jw, jh, max_pixels);
  }
  if (const std::string e = decode_memory_error(path, jw, jh); !e.empty()) {
    jpeg_destroy_decompress(&cinfo);
    throw UserError(e);
  }
  const bool cmyk = cinfo.num_components == 4;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // greyscale → RGB replicates Y
  cinfo.scale_num = static_cast<unsigned>(scale_num);
  cinfo.scale_denom = 8;
  if (win) {
    cinfo.dct_method = JDCT_IFAST;
    cinfo.do_fancy_upsampling = FALSE;
  }
  jpeg_start_decompress(&cinfo);
  JDIMENSION first_row = 0, end_row = cinfo.output_height, xoff = 0;
  if (win) {
    const auto clampd = [](int v, JDIMENSION hi) { return static_cast<JDIMENSION>(std::clamp<int64_t>(v, 0, hi)); };
    xoff = clampd(win->left, cinfo.output_width - 1);
    JDIMENSION cw = std::max<JDIMENSION>(1, clampd(win->width, cinfo.output_width - xoff));
    jpeg_crop_scanline(&cinfo, &xoff, &cw);
    first_row = clampd(win->top, cinfo.output_height - 1);
    end_row = std::max(first_row + 1, clampd(win->top + win->height, cinfo.output_height));
    if (first_row > 0) jpeg_skip_scanlines(&cinfo, first_row);
  }
  const int width = static_cast<int>(cinfo.output_width), height = static_cast<int>(end_row - first_row);
  start(width, height, static_cast<int>(xoff), static_cast<int>(first_row));
  const int comps = cinfo.output_components;
  row.resize(static_cast<size_t>(width) * comps);
  rgb.resize(static_cast<size_t>(width) * 3);
  while (cinfo.output_scanline < end_row) {
    const int y = static_cast<int>(cinfo.output_scanline - first_row);
    JSAMPROW r = row.data();
    jpeg_read_scanlines(&cinfo, &r, 1);
    if (!cmyk) {
      on_row(y, row.data());
      continue;
    }
    // PIL reads CMYK JPEGs as Adobe-inverted ("CMYK;I"), then convert("RGB"):
    // nk = 255 − K', R = nk − nk·C'/255 with C' = 255 − C, K' = 255 − K.
    for (int x = 0; x < width; ++x) {
      const uint8_t* s = row.data() + 4 * x;
      const int nk = s[3];
      for (int c = 0; c < 3; ++c)
        rgb[static_cast<size_t>(3 * x + c)] = static_cast<uint8_t>(std::clamp(nk - muldiv255(255 - s[c], nk), 0, 255));
    }
    on_row(y, rgb.data());
  }
  if (end_row < cinfo.output_height) {
    // The rows below the window are still entropy-decoded (jpeg_skip_scanlines: Huffman
    // decoding only, no IDCT, for whole iMCU rows), then the last row decoded and the data
    // read to its end: libjpeg reports damage to the entropy-coded data only where it
    // loses step, often at the end marker ("N extraneous bytes before marker 0xd9"), and a
    // window above that point was delivered with wrong pixels and no error (issue 39;
    // test_jpeg_decode). A skip to the very end decodes nothing, hence the last row. The
    // skip starts on a row group (max_v_samp_factor rows): libjpeg-turbo 2.1's skip from
    // inside one, with the merged upsampler of the fast mode's 4:2:0, decodes one row
    // group too many and reports an intact file as "premature end of data segment"
    // (libjpeg-turbo issue 915).
    JSAMPROW r = row.data();
    while (cinfo.output_scanline % static_cast<JDIMENSION>(cinfo.max_v_samp_factor) != 0 &&
           cinfo.output_scanline + 1 < cinfo.output_height)
      jpeg_read_scanlines(&cinfo, &r, 1);
    jpeg_skip_scanlines(&cinfo, cinfo.output_height - 1 - cinfo.output_scanline);
    jpeg_read_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_decompress(&cinfo);  // to the end marker, so that a warning there is the error above
  jpeg_destroy_decompress(&cinfo);
}

void decode_jpeg(std::FILE* f, const std::string& path, RgbImage& img, std::vector<uint8_t>& row, int64_t max_pixels) {
  std::vector<uint8_t> rgb;
  decode_jpeg_core([f](j_decompress_ptr c) { jpeg_stdio_src(c, f); }, path, "replace or remove the file", max_pixels, 8,
                   nullptr, nullptr, row, rgb,
                   [&](int w, int h, int, int) {
                     img.width = w;
                     img.height = h;
                     img.pixels.resize(static_cast<size_t>(w) * h * 3);
                   },
                   [&](int y, const uint8_t* p) {
                     std::memcpy(img.pixels.data() + static_cast<size_t>(y) * img.width * 3, p,
                                 static_cast<size_t>(img.width) * 3);
                   });
}

// ---- PNG ------------------------------------------------------------------------
struct PngError {
  char message[256] = "";
};

[[noreturn]] void png_error_fn(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

void decode_png(std::FILE* f, const std::string& path, RgbImage& img, std::vector<uint8_t>& data,
                std::vector<png_bytep>& rows, int64_t max_pixels) {
  PngError err;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_error_fn, png_warning_fn);
  if (!png) fail("out of memory reading ", path);
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    fail("out of memory reading ", path);
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail(path, " is not a readable PNG (", err.message, "); replace or remove the file");
  }
  png_init_io(png, f);
  png_read_info(png, info);
  const int64_t pw = png_get_image_width(png, info), ph = png_get_image_height(png, info);
  if (max_pixels > 0 && pw * ph > max_pixels) {  // from IHDR, before any row is inflated
    png_destroy_read_struct(&png, &info, nullptr);
    too_many_pixels(path, pw, ph, max_pixels);
  }
  if (const std::string e = decode_memory_error(path, pw, ph); !e.empty()) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw UserError(e);
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  img.width = static_cast<int>(png_get_image_width(png, info));
  img.height = static_cast<int>(png_get_image_height(png, info));
  const int ch = png_get_channels(png, info);  // 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
  const size_t stride = png_get_rowbytes(png, info);
  data.resize(stride * static_cast<size_t>(img.height));
  rows.resize(static_cast<size_t>(img.height));
  for (int y = 0; y < img.height; ++y) rows[y] = data.data() + static_cast<size_t>(y) * stride;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* s = rows[y];
    uint8_t* d = img.pixels.data() + static_cast<size_t>(y) * img.width * 3;
    for (int x = 0; x < img.width; ++x) {
      if (ch >= 3) {
        d[3 * x] = s[ch * x];
        d[3 * x + 1] = s[ch * x + 1];
        d[3 * x + 2] = s[ch * x + 2];
      } else {
        d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = s[ch * x];
      }
    }
  }
}

}  // namespace

RgbImage decode_image(const std::string& path, int64_t max_pixels) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail("cannot open ", path, ": ", std::strerror(errno));
  unsigned char magic[8] = {0};
  const size_t got = std::fread(magic, 1, sizeof magic, f.get());
  std::rewind(f.get());
  RgbImage img;
  if (got >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF) {
    std::vector<uint8_t> row;
    decode_jpeg(f.get(), path, img, row, max_pixels);
  } else if (got == 8 && png_sig_cmp(magic, 0, 8) == 0) {
    std::vector<uint8_t> data;
    std::vector<png_bytep> rows;
    decode_png(f.get(), path, img, data, rows, max_pixels);
  } else {
    fail(path, " is neither a JPEG nor a PNG file (by its first bytes); convert it to JPEG or PNG, or remove it");
  }
  if (img.width < 1 || img.height < 1) fail(path, " holds an empty image");
  return img;
}

RgbImage resize_bilinear(const RgbImage& in, int width, int height) {
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * height * 3);
  resample_bilinear(in.pixels.data(), in.width, in.height, 3, out.pixels.data(), width, height);
  return out;
}

RgbImage resize_shorter(const RgbImage& in, int size) {
  if (size < 1) fail("--resize must be at least 1");
  const bool w_short = in.width <= in.height;
  const int s = w_short ? in.width : in.height, l = w_short ? in.height : in.width;
  const int new_long = static_cast<int>(static_cast<double>(int64_t{size} * l) / s);
  const int w = w_short ? size : new_long, h = w_short ? new_long : size;
  if (w == in.width && h == in.height) return in;
  return resize_bilinear(in, w, h);
}

RgbImage center_crop(const RgbImage& in_img, int size) {
  if (size < 1) fail("--center-crop must be at least 1");
  RgbImage img = in_img;
  if (size > img.width || size > img.height) {
    const int pl = size > img.width ? (size - img.width) / 2 : 0, pt = size > img.height ? (size - img.height) / 2 : 0;
    const int pr = size > img.width ? (size - img.width + 1) / 2 : 0,
              pb = size > img.height ? (size - img.height + 1) / 2 : 0;
    RgbImage p;
    p.width = img.width + pl + pr;
    p.height = img.height + pt + pb;
    p.pixels.assign(static_cast<size_t>(p.width) * p.height * 3, 0);
    for (int y = 0; y < img.height; ++y)
      std::memcpy(p.pixels.data() + (static_cast<size_t>(y + pt) * p.width + pl) * 3,
                  img.pixels.data() + static_cast<size_t>(y) * img.width * 3, static_cast<size_t>(img.width) * 3);
    img = std::move(p);
    if (img.width == size && img.height == size) return img;
  }
  const int top = static_cast<int>(std::nearbyint((img.height - size) / 2.0));
  const int left = static_cast<int>(std::nearbyint((img.width - size) / 2.0));
  RgbImage out;
  out.width = out.height = size;
  out.pixels.resize(static_cast<size_t>(size) * size * 3);
  for (int y = 0; y < size; ++y)
    std::memcpy(out.pixels.data() + static_cast<size_t>(y) * size * 3,
                img.pixels.data() + (static_cast<size_t>(y + top) * img.width + left) * 3,
                static_cast<size_t>(size) * 3);
  return out;
}

bool is_jpeg(const uint8_t* data, size_t n) { return n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF; }

void decode_jpeg_planes(const uint8_t* data, size_t len, int scale_num, const std::string& what,
                        std::vector<uint8_t>& planes, SampleShape* shape, JpegWindow* win,
                        const SampleShape* recorded) {
  if (scale_num < 1 || scale_num > 8) internal_error("JPEG scale ", scale_num, "/8");
  thread_local std::vector<uint8_t> row, rgb;
  int64_t plane = 0;
  int width = 0;
  decode_jpeg_core([&](j_decompress_ptr c) { jpeg_mem_src(c, data, static_cast<unsigned long>(len)); }, what,
                   "the shard is damaged — copy it again or re-create the data set with `cnnscale prep`", 0, scale_num,
                   win, recorded, row, rgb,
                   [&](int w, int h, int x0, int y0) {
                     if (win) {  // where the decoded part starts in the scaled image
                       win->left -= x0;
                       win->top -= y0;
                     }
                     width = w;
                     plane = int64_t{w} * h;
                     *shape = {3, h, w};
                     planes.resize(static_cast<size_t>(3 * plane));
                   },
                   [&](int y, const uint8_t* p) {
                     uint8_t* r = planes.data() + int64_t{y} * width;
                     uint8_t* g = r + plane;
                     uint8_t* b = g + plane;
                     for (int x = 0; x < width; ++x) {
                       r[x] = p[3 * x];
                       g[x] = p[3 * x + 1];
                       b[x] = p[3 * x + 2];
                     }
                   });
}

void check_jpeg(const uint8_t* data, size_t len, const std::string& what, int width, int height) {
  const char* fix = "the shard is damaged — copy it again or re-create the data set with `cnnscale prep`";
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_errors_to(err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    fail(what, " is not a readable JPEG (", err.message, "); ", fix);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(len));
  jpeg_read_header(&cinfo, TRUE);
  const int w = static_cast<int>(cinfo.image_width), h = static_cast<int>(cinfo.image_height);
  if (w != width || h != height) {  // before the coefficients of a header's size are allocated
    jpeg_destroy_decompress(&cinfo);
    fail(what, " is a ", w, "x", h, " JPEG but its /shapes entry says ", width, "x", height, "; ", fix);
  }
  jpeg_read_coefficients(&cinfo);
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
}

std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality) {
  jpeg_compress_struct cinfo;
  JpegError err;  // the compressor reports errors by longjmp too
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
    fail("encoding a ", img.width, "x", img.height, " image as JPEG failed (", err.message, ")");
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(img.width);
  cinfo.image_height = static_cast<JDIMENSION>(img.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = const_cast<uint8_t*>(img.pixels.data()) + static_cast<size_t>(cinfo.next_scanline) * img.width * 3;
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + size);
  std::free(out);
  return bytes;
}

}  // namespace cnnscale
