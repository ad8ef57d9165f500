// open_source.cpp — see open_source.hpp.
#include "data/open_source.hpp"

#include <mpi.h>

#include "data/augment.hpp"
#include "data/hdf5_source.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale {

CacheMode parse_cache_mode(const std::string& s) {
  if (s == "none") return CacheMode::none;
  if (s == "memory") return CacheMode::memory;
  fail("--cache ", s, " is not supported; use none or memory");
}

namespace {

DataSources open_local(const DataOptions& o, int rank, int world) {
  DataSources d;
  if (o.synthetic) {
    if (!parse_augment(o.augment).empty())
      fail("--augment ", o.augment, " transforms the pixels of an image data set; --synthetic samples are not ",
           "images — drop --augment or train on --data DIR");
    SyntheticOptions so;
    so.samples = o.synthetic_samples;
    so.test_samples = o.synthetic_test_samples;
    so.shape = o.synthetic_shape;
    so.classes = o.synthetic_classes;
    so.batch_per_rank = o.batch_per_rank;
    so.seed = o.seed;
    so.drop_last = o.drop_last;
    so.prefetch = o.prefetch;
    so.threads = o.data_threads;
    d.train = make_synthetic_train_source(so, rank, world);
    d.eval = make_synthetic_eval_source(so, rank, world);
    return d;
  }
  auto info = std::make_shared<const DatasetInfo>(load_dataset(o.dir));
  if (const std::string w = unbound_warning(*info); !w.empty()) log_warn(w);
  ReaderOptions ro;
  ro.batch_per_rank = o.batch_per_rank;
  ro.seed = o.seed;
  ro.drop_last = o.drop_last;
  ro.prefetch = o.prefetch;
  ro.cache_memory = parse_cache_mode(o.cache) == CacheMode::memory;
  ro.augment = o.augment;
  ro.threads = o.data_threads;
  if (o.jpeg_decode != "fast" && o.jpeg_decode != "exact")
    fail("--jpeg-decode takes fast (DCT-scaled, as FFCV) or exact (full decode: PIL's pixels), not '", o.jpeg_decode,
         "'");
  ro.jpeg_exact = o.jpeg_decode == "exact";
  ro.label_fill = o.label_fill;
  d.train = make_hdf5_train_source(info, ro, rank, world);
  const SplitInfo& es = o.eval_split == "train" ? info->train : info->test;
  if (es.samples > 0) d.eval = make_hdf5_eval_source(info, o.eval_split, rank, world, o.augment, o.data_threads);
  d.dataset = info;
  return d;
}

}  // namespace

DataSources open_data(const DataOptions& o, int rank, int world) {
  DataSources d;
  std::string err;
  try {
    d = open_local(o, rank, world);
  } catch (const UserError& e) {
    err = e.what();
  }
  int on = 0, fin = 0, size = 1;
  MPI_Initialized(&on);
  if (on) MPI_Finalized(&fin);
  if (on && !fin) MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (on && !fin && world > 1 && size == world) {
    int bad = err.empty() ? 0 : 1, nbad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (nbad == world) throw CollectiveError(err, rank);
  }
  if (!err.empty()) throw UserError(err);
  return d;
}

std::unique_ptr<BatchSource> open_train_source(const DataOptions& o, int rank, int world) {
  return open_data(o, rank, world).train;
}

std::unique_ptr<EvalSource> open_eval_source(const DataOptions& o, int rank, int world) {
  return open_data(o, rank, world).eval;
}

}  // namespace cnnscale
