// fuzz_prep_input.cpp — libFuzzer target: the downloaded files `cnnscale prep` reads, through
// the product's own readers (data/prep_input.cpp, data/prep_cifar.cpp): IDX images with their
// IDX labels (plain, or gzip as the downloads come) and the CIFAR-10 / CIFAR-100 binary
// distributions with their class-name files.
// Input: [0] the format (low 2 bits: 0 IDX, 1 IDX gzip-compressed by this target, 2 CIFAR-10,
// 3 CIFAR-100; bit 2: CIFAR-100's coarse labels; bit 3: a gzip stream cut before its end),
// [1..2] the length L of the first part (big-endian), then two parts: IDX: the labels file
// (L bytes) and the images file; CIFAR: the class-name file (L bytes; none when L = 0) and the
// records, written as every batch file of the distribution.
// A UserError is the expected answer to a damaged or wrong file; anything else escaping, a
// crash, a hang or a sanitizer report is a defect. What opens must keep its word: the header's
// sample count and shape, every sample readable to the end (then no more), labels below the
// format's classes (CIFAR), class names trimmed and non-empty.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/prep_cifar.hpp"
#include "data/prep_input.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace {

const std::string& dir() {
  // Never destroyed: RemoveAtExit (a global, made before it) uses it at exit.
  static const std::string& d = *new std::string([] {
    const std::string p = "/dev/shm/cnnscale-fuzz-prep-" + std::to_string(getpid());
    fs::create_directories(p);
    return p;
  }());
  return d;
}

struct RemoveAtExit {
  ~RemoveAtExit() {
    std::error_code ec;
    fs::remove_all(dir(), ec);
  }
} remove_at_exit;

void write(const std::string& path, const uint8_t* p, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  if (!f) std::abort();
}

// gzip of p (zlib's gz writer, as `gzip` makes them), optionally cut before its end.
void write_gz(const std::string& path, const uint8_t* p, size_t n, bool cut) {
  gzFile g = gzopen(path.c_str(), "wb1");
  if (!g) std::abort();
  if (n > 0 && gzwrite(g, p, static_cast<unsigned>(n)) != static_cast<int>(n)) std::abort();
  gzclose(g);
  if (cut) {
    const auto size = fs::file_size(path);
    fs::resize_file(path, size - std::min<uintmax_t>(size, 1 + n % 9));
  }
}

// Reads every sample as prep does (blocks of ~8 MiB, at least one sample).
void drain(cnnscale::SampleStream& s) {
  const cnnscale::SampleShape shape = s.shape();
  const int64_t px = shape.numel();
  if (px <= 0 || s.samples() < 0) std::abort();
  if (px > (int64_t{64} << 20)) return;  // a header claiming huge images: prep's one-sample read, not bounded here
  const int64_t block = std::max<int64_t>(1, (8 << 20) / px);
  std::vector<uint8_t> buf;
  for (int64_t at = 0; at < s.samples(); at += block) {
    const int64_t m = std::min(block, s.samples() - at);
    buf.resize(static_cast<size_t>(m * px));
    s.read_images(buf.data(), m);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || size > (4 << 20)) return -1;
  const int format = data[0] & 3;
  const bool coarse = data[0] & 4, cut = data[0] & 8;
  const size_t first = std::min<size_t>((size_t{data[1]} << 8) | data[2], size - 3);
  const uint8_t* a = data + 3;
  const uint8_t* b = a + first;
  const size_t nb = size - 3 - first;
  const std::string d = dir();
  try {
    if (format <= 1) {
      const std::string labels = d + (format ? "/labels.gz" : "/labels"), images = d + (format ? "/images.gz" : "/images");
      if (format) {
        write_gz(labels, a, first, false);
        write_gz(images, b, nb, cut);
      } else {
        write(labels, a, first);
        write(images, b, nb);
      }
      const auto s = cnnscale::open_idx_input(images, labels);
      if (static_cast<int64_t>(s->labels().size()) != s->samples()) std::abort();
      for (int32_t l : s->labels())
        if (l < 0 || l > 255) std::abort();
      drain(*s);
    } else {
      const bool c100 = format == 3;
      const std::string sub = d + (c100 ? "/cifar-100-binary" : "/cifar-10-batches-bin");
      std::error_code ec;
      fs::remove_all(d + "/cifar-100-binary", ec);
      fs::remove_all(d + "/cifar-10-batches-bin", ec);
      fs::create_directories(sub);
      const std::vector<std::string> files =
          c100 ? std::vector<std::string>{"train.bin", "test.bin"}
               : std::vector<std::string>{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                          "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
      for (const auto& f : files) write(sub + "/" + f, b, nb);
      if (first > 0)
        write(sub + (c100 ? (coarse ? "/coarse_label_names.txt" : "/fine_label_names.txt") : "/batches.meta.txt"), a,
              first);
      const int classes = c100 ? (coarse ? 20 : 100) : 10;
      cnnscale::CifarInput in =
          cnnscale::open_cifar_input(d, c100 ? "cifar100" : "cifar10", c100 ? (coarse ? "coarse" : "fine") : "");
      for (auto* s : {in.train.get(), in.test.get()}) {
        const cnnscale::SampleShape sh = s->shape();
        if (sh.channels != 3 || sh.height != 32 || sh.width != 32) std::abort();
        if (static_cast<int64_t>(s->labels().size()) != s->samples()) std::abort();
        for (int32_t l : s->labels())
          if (l < 0 || l >= classes) std::abort();
        const auto names = s->class_names();
        if (!names.empty() && static_cast<int>(names.size()) != classes) std::abort();
        for (const auto& n : names)
          if (n.empty() || n.front() == ' ' || n.back() == ' ' || n.back() == '\r') std::abort();
        drain(*s);
      }
    }
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "read (format %d)\n", format);
  return 0;
}
