// data_bench.cpp — see data_bench.hpp.
#include "data/data_bench.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <string>

#include "util/error.hpp"

namespace cnnscale {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// /proc/self/io rchar: bytes this process read through read()/pread() (files and page cache).
bool bytes_read(uint64_t* out) {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value)
    if (key == "rchar:") {
      *out = value;
      return true;
    }
  return false;
}

}  // namespace

DataBenchResult run_data_bench(const DataBenchOptions& o, int rank, int world) {
  if (o.batches < 1) fail("--batches must be at least 1, got ", o.batches);
  if (o.warmup < 0) fail("--warmup must not be negative, got ", o.warmup);
  DataSources d = open_data(o.data, rank, world);
  Batch b;
  for (int64_t i = 0; i < o.warmup; ++i) d.train->next(b);
  DataBenchResult r;
  // A sample's stored bytes: uint8 pixels, or a science data set's int16/float16/float32 values.
  r.image_bytes = d.train->shape().numel() * (d.dataset ? sample_type_bytes(d.dataset->dtype) : 1);
  r.epoch_images = d.train->steps_per_epoch() * o.data.batch_per_rank;
  r.volumes = d.train->shape().volume();
  uint64_t read0 = 0, read1 = 0;
  const bool have0 = bytes_read(&read0);
  d.train->take_stage_times();  // the warm-up's are not timed
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.batches; ++i) {
    d.train->next(b);
    r.images += b.count;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_s = cpu_seconds() - cpu0;
  r.stages = d.train->take_stage_times();  // includes batches made ahead during the timed ones
  r.bytes_known = have0 && bytes_read(&read1) && read1 >= read0;
  if (r.bytes_known) r.bytes_read = read1 - read0;
  return r;
}

}  // namespace cnnscale
