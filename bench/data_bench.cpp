// data_bench.cpp — the image input path's throughput (docs/performance.md, "Image data
// path"; bench/data_compare.sh runs it beside PyTorch):
//   data_bench make-jpegs DIR COUNT [SEED]
//       writes COUNT photo-like JPEGs (libjpeg, quality 90, sides 256–500 px, smooth
//       gradients + texture) as an ImageFolder tree DIR/train/c<k>/<i>.jpg, 4 classes.
//   data_bench decode DIR THREADS
//       decodes every JPEG of DIR/train (decode_image: libjpeg-turbo → RGB) on THREADS
//       threads; prints images/s and images/s per thread.
//   data_bench train DATA AUGMENT THREADS [BATCH] [STEPS]
//       the training reader of a prep output (--augment AUGMENT, --data-threads THREADS,
//       prefetch 2, --cache memory, one rank): samples/s the consumer receives, after one
//       warm-up epoch that fills the cache (so the number is the augment + normalise path,
//       not the disk).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <jpeglib.h>  // after <cstdio>, <cstddef>: it needs FILE and size_t

#include "data/image_decode.hpp"
#include "data/open_source.hpp"
#include "data/prep_imagefolder.hpp"
#include "util/error.hpp"

using namespace cnnscale;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void write_jpeg(const std::string& path, int w, int h, uint32_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      seed = seed * 1664525u + 1013904223u;
      uint8_t* p = &px[(static_cast<size_t>(y) * w + x) * 3];
      const int t = static_cast<int>(seed >> 28);  // texture: 0..15
      p[0] = static_cast<uint8_t>((x * 255) / w / 2 + 64 + t);
      p[1] = static_cast<uint8_t>((y * 255) / h / 2 + 32 + t);
      p[2] = static_cast<uint8_t>(((x + y) * 255) / (w + h) / 2 + 96 - t);
    }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot create ", path);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < h; ++y) {
    JSAMPROW row = &px[static_cast<size_t>(y) * w * 3];
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

int make_jpegs(const std::string& dir, int count, uint32_t seed) {
  for (int i = 0; i < count; ++i) {
    const std::string cls = dir + "/train/c" + std::to_string(i % 4);
    fs::create_directories(cls);
    seed = seed * 747796405u + 2891336453u;
    const int w = 256 + static_cast<int>((seed >> 8) % 245), h = 256 + static_cast<int>((seed >> 20) % 245);
    char name[32];
    std::snprintf(name, sizeof name, "/%06d.jpg", i);
    write_jpeg(cls + name, w, h, seed);
  }
  std::printf("make-jpegs: %d JPEGs (256-500 px sides, quality 90) in %s/train\n", count, dir.c_str());
  return 0;
}

int decode(const std::string& dir, int threads) {
  const ImageFolderListing l = list_image_folder(dir + "/train");
  const int64_t n = static_cast<int64_t>(l.files.size());
  std::atomic<int64_t> next{0}, pixels{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int64_t i; (i = next++) < n;) {
        const RgbImage im = decode_image(l.files[static_cast<size_t>(i)]);
        pixels += int64_t{im.width} * im.height;
      }
    });
  for (auto& th : pool) th.join();
  const double s = since(t0);
  std::printf("decode: %lld JPEGs (%.0f kpixel mean) on %d thread(s) in %.2f s: %.0f images/s, %.0f images/s per "
              "thread\n",
              static_cast<long long>(n), static_cast<double>(pixels) / 1000.0 / static_cast<double>(n), threads, s,
              static_cast<double>(n) / s, static_cast<double>(n) / s / threads);
  return 0;
}

int train(const std::string& data, const std::string& augment, int threads, int64_t batch, int64_t steps) {
  DataOptions o;
  o.dir = data;
  o.augment = augment;
  o.data_threads = threads;
  o.batch_per_rank = batch;
  o.cache = "memory";
  o.prefetch = 2;
  DataSources d = open_data(o, 0, 1);
  Batch b;
  const int64_t per_epoch = d.train->steps_per_epoch();
  for (int64_t i = 0; i < per_epoch; ++i) d.train->next(b);  // warm-up: fills the cache
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < steps; ++i) d.train->next(b);
  const double s = since(t0);
  std::printf("train: --augment %s --data-threads %d, batch %lld: %lld batches in %.2f s: %.0f samples/s\n",
              augment.c_str(), threads, static_cast<long long>(batch), static_cast<long long>(steps), s,
              static_cast<double>(steps * batch) / s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string cmd = argc > 1 ? argv[1] : "";
  int rc = 2;
  try {
    if (cmd == "make-jpegs" && argc >= 4)
      rc = make_jpegs(argv[2], std::atoi(argv[3]), argc > 4 ? static_cast<uint32_t>(std::atol(argv[4])) : 1u);
    else if (cmd == "decode" && argc == 4) rc = decode(argv[2], std::atoi(argv[3]));
    else if (cmd == "train" && argc >= 5)
      rc = train(argv[2], argv[3], std::atoi(argv[4]), argc > 5 ? std::atoll(argv[5]) : 64,
                 argc > 6 ? std::atoll(argv[6]) : 50);
    else
      std::fprintf(stderr, "usage: data_bench make-jpegs DIR COUNT [SEED] | decode DIR THREADS | "
                           "train DATA AUGMENT THREADS [BATCH] [STEPS]\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_bench: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
