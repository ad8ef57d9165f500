// imagefolder_tool.cpp — writes image files for the image-folder tests without Python or
// PIL (libpng, zlib):
//   imagefolder_tool fashion SRC_DIR ROOT N_TRAIN N_TEST
//       ROOT/train/<class>/<index>.png and ROOT/val/<class>/<index>.png from the first
//       N_TRAIN / N_TEST real Fashion-MNIST images of SRC_DIR's gzip IDX files, written as
//       8-bit greyscale PNGs (so prep takes the grey → RGB path); class folders are
//       "0_t-shirt_top" … "9_ankle_boot" (sorted = label order).
//   imagefolder_tool png FILE W H CHANNELS [SEED]
//       one PNG of W×H (CHANNELS 1 grey or 3 RGB) of seeded noise — any size, for the
//       ragged (--store original-max) tests.
//   imagefolder_tool bomb-png FILE W H
//       a PNG whose IHDR claims W×H pixels but whose image data is one empty row's worth:
//       prep must refuse it from the header, before decoding (decompression-bomb guard).
//   imagefolder_tool bomb-jpeg FILE W H
//       a real 16×16 baseline JPEG (libjpeg) whose SOF0 marker is patched to claim W×H
//       (at most 65500 each); likewise.
//   imagefolder_tool photos ROOT N CLASSES W H [SEED]
//       N photo-like RGB JPEGs (quality 90) of about W×H (each side varied by up to -20 %,
//       some portrait) in ROOT/<class>/<index>.jpg, classes round robin: smooth colour
//       fields (a few random waves and a gradient per image) with a little grain, so that
//       they compress and decode as photos do (~1.7 bits per pixel: ~20 KB at 360×270),
//       not as noise.
//       For the GPU first run's JPEG input benchmark (bench/gpu-first-run.sh), which has no
//       Python imaging library on the GPU node to count on.
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <jpeglib.h>

#include "data/png_writer.hpp"

using cnnscale::test::write_png;

namespace {

const char* kNames[10] = {"t-shirt_top", "trouser", "pullover", "dress", "coat",
                          "sandal",      "shirt",   "sneaker",  "bag",   "ankle_boot"};

std::vector<uint8_t> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

void png_chunk(std::vector<uint8_t>& v, const char* type, const std::vector<uint8_t>& data) {
  put32(v, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> td(type, type + 4);
  td.insert(td.end(), data.begin(), data.end());
  v.insert(v.end(), td.begin(), td.end());
  put32(v, static_cast<uint32_t>(crc32(0, td.data(), static_cast<uInt>(td.size()))));
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& v) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp || std::fwrite(v.data(), 1, v.size(), fp) != v.size()) throw std::runtime_error("cannot write " + path);
  std::fclose(fp);
}

int fashion(const std::string& src, const std::string& root, long n_train, long n_test) {
  for (const auto& [split, idx, n] : {std::tuple{"train", "train", n_train}, std::tuple{"val", "t10k", n_test}}) {
    const std::vector<uint8_t> images = gunzip(src + "/" + idx + "-images-idx3-ubyte.gz");
    const std::vector<uint8_t> labels = gunzip(src + "/" + idx + "-labels-idx1-ubyte.gz");
    if (static_cast<long>(labels.size()) < 8 + n) throw std::runtime_error("too few images in " + src);
    for (int c = 0; c < 10; ++c)
      std::filesystem::create_directories(root + "/" + split + "/" + std::to_string(c) + "_" + kNames[c]);
    char name[32];
    for (long i = 0; i < n; ++i) {
      const int c = labels[8 + i];
      std::snprintf(name, sizeof name, "/%05ld.png", i);
      write_png(root + "/" + split + "/" + std::to_string(c) + "_" + kNames[c] + name, images.data() + 16 + i * 784, 28,
                28, 1);
    }
  }
  return 0;
}

}  // namespace

// w×h RGB pixels (row-major, 3 bytes each) as a baseline JPEG (libjpeg, in memory).
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int w, int h, int quality) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < h; ++y) {
    JSAMPROW r = const_cast<uint8_t*>(rgb) + static_cast<size_t>(y) * w * 3;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> bytes(mem, mem + size);
  std::free(mem);
  jpeg_destroy_compress(&c);
  return bytes;
}

// The photos: see the header.
int photos(const std::string& root, long n, int classes, int w0, int h0, uint32_t seed) {
  if (n < 1 || classes < 1 || w0 < 16 || h0 < 16) throw std::runtime_error("photos: N, CLASSES >= 1, W, H >= 16");
  uint32_t s = seed * 2654435761u + 12345u;
  auto next = [&s]() {
    s = s * 1664525u + 1013904223u;
    return s;
  };
  auto uni = [&]() { return static_cast<float>(next() >> 8) / 16777216.f; };  // [0, 1)
  for (int c = 0; c < classes; ++c) std::filesystem::create_directories(root + "/" + std::to_string(c));
  std::vector<uint8_t> px;
  for (long i = 0; i < n; ++i) {
    int w = static_cast<int>(w0 * (0.8f + 0.2f * uni())), h = static_cast<int>(h0 * (0.8f + 0.2f * uni()));
    if (next() % 4 == 0) std::swap(w, h);  // portrait
    px.assign(static_cast<size_t>(w) * h * 3, 0);
    float fx[3][3], fy[3][3], ph[3][3], amp[3][3], base[3], gx[3], gy[3];
    for (int ch = 0; ch < 3; ++ch) {
      base[ch] = 60 + 130 * uni(), gx[ch] = 60 * (uni() - 0.5f), gy[ch] = 60 * (uni() - 0.5f);
      for (int k = 0; k < 3; ++k)
        fx[ch][k] = 12 * uni() / w, fy[ch][k] = 12 * uni() / h, ph[ch][k] = 6.283f * uni(), amp[ch][k] = 40 * uni();
    }
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int ch = 0; ch < 3; ++ch) {
          float v = base[ch] + gx[ch] * x / w + gy[ch] * y / h;
          for (int k = 0; k < 3; ++k) v += amp[ch][k] * std::sin(6.283f * (fx[ch][k] * x + fy[ch][k] * y) + ph[ch][k]);
          v += 6 * (uni() - 0.5f);  // grain
          px[(static_cast<size_t>(y) * w + x) * 3 + ch] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
        }
    const std::vector<uint8_t> bytes = encode_jpeg(px.data(), w, h, 90);
    char name[32];
    std::snprintf(name, sizeof name, "/%06ld.jpg", i);
    write_bytes(root + "/" + std::to_string(i % classes) + name, bytes);
  }
  return 0;
}

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "fashion" && argc == 6) return fashion(argv[2], argv[3], std::atol(argv[4]), std::atol(argv[5]));
    if (cmd == "photos" && (argc == 7 || argc == 8))
      return photos(argv[2], std::atol(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]),
                    argc == 8 ? static_cast<uint32_t>(std::atol(argv[7])) : 1u);
    if (cmd == "png" && (argc == 6 || argc == 7)) {
      const int w = std::atoi(argv[3]), h = std::atoi(argv[4]), ch = std::atoi(argv[5]);
      uint32_t s = argc == 7 ? static_cast<uint32_t>(std::atol(argv[6])) : 1u;
      std::vector<uint8_t> px(static_cast<size_t>(w) * h * ch);
      for (size_t i = 0; i < px.size(); ++i) {
        s = s * 1664525u + 1013904223u;
        px[i] = static_cast<uint8_t>(s >> 24);
      }
      write_png(argv[2], px.data(), w, h, ch);
      return 0;
    }
    if (cmd == "bomb-png" && argc == 5) {
      const uint32_t w = static_cast<uint32_t>(std::atol(argv[3])), h = static_cast<uint32_t>(std::atol(argv[4]));
      std::vector<uint8_t> v = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
      std::vector<uint8_t> ihdr;
      put32(ihdr, w);
      put32(ihdr, h);
      ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter, no interlace
      png_chunk(v, "IHDR", ihdr);
      std::vector<uint8_t> row(1 + 3 * static_cast<size_t>(std::min<uint32_t>(w, 1u << 20)), 0);
      std::vector<uint8_t> z(compressBound(static_cast<uLong>(row.size())));
      uLongf zn = static_cast<uLongf>(z.size());
      compress(z.data(), &zn, row.data(), static_cast<uLong>(row.size()));
      z.resize(zn);
      png_chunk(v, "IDAT", z);
      png_chunk(v, "IEND", {});
      write_bytes(argv[2], v);
      return 0;
    }
    if (cmd == "bomb-jpeg" && argc == 5) {
      const int w = std::atoi(argv[3]), h = std::atoi(argv[4]);
      const std::vector<uint8_t> grey(16 * 16 * 3, 128);
      std::vector<uint8_t> v = encode_jpeg(grey.data(), 16, 16, 75);  // libjpeg's default quality
      for (size_t i = 0; i + 9 < v.size(); ++i)
        if (v[i] == 0xFF && v[i + 1] == 0xC0) {  // SOF0: FF C0, length (2), precision, height (2), width (2)
          v[i + 5] = static_cast<uint8_t>(h >> 8);
          v[i + 6] = static_cast<uint8_t>(h);
          v[i + 7] = static_cast<uint8_t>(w >> 8);
          v[i + 8] = static_cast<uint8_t>(w);
          write_bytes(argv[2], v);
          return 0;
        }
      throw std::runtime_error("libjpeg wrote no SOF0 marker");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "imagefolder_tool: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: imagefolder_tool fashion SRC ROOT N_TRAIN N_TEST | png FILE W H C [SEED] | "
                       "bomb-png FILE W H | bomb-jpeg FILE W H | photos ROOT N CLASSES W H [SEED]\n");
  return 2;
}
