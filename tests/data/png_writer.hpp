// png_writer.hpp — writes an 8-bit grey (1 channel) or RGB (3 channels, interleaved)
// PNG with libpng, for the image-folder tests (imagefolder_tool.cpp, test_ragged.cpp);
// no Python or PIL needed.
#pragma once
#include <png.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace cnnscale::test {

inline void write_png(const std::string& path, const uint8_t* pixels, int w, int h, int channels) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) throw std::runtime_error("cannot create " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    throw std::runtime_error("libpng failed writing " + path);
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8,
               channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, const_cast<png_bytep>(pixels + static_cast<size_t>(y) * w * channels));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(fp);
}

}  // namespace cnnscale::test
