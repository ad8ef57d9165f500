// open_source.hpp — what the trainer calls to get its input: DataOptions (from the
// train command line) → the training BatchSource and the evaluation EvalSource,
// reading a `cnnscale prep` directory or generating synthetic samples.
//
// Collective: when MPI is initialised and MPI_COMM_WORLD has `world` ranks, every
// rank must call open_data() (it agrees on success with one MPI_Allreduce). A mistake
// every rank finds (missing directory, bad dataset.json, batch too large) is thrown
// as CollectiveError, so `cnnscale: error:` is printed once by rank 0; a mistake only
// some ranks find (e.g. a shard missing on one node) is a plain UserError (→ abort).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/batch_source.hpp"
#include "data/dataset.hpp"
#include "data/synthetic_source.hpp"

namespace cnnscale {

enum class CacheMode { none, memory };
// "none" | "memory"; throws UserError naming --cache otherwise.
CacheMode parse_cache_mode(const std::string& s);

struct DataOptions {
  std::string dir;         // --data DIR (a prep output); ignored when synthetic
  bool synthetic = false;  // --synthetic
  int64_t synthetic_samples = 60000, synthetic_test_samples = 10000;
  SampleShape synthetic_shape{1, 28, 28};
  int synthetic_classes = 10;
  int64_t batch_per_rank = 64;  // --batch-size
  uint64_t seed = 0;            // --seed
  bool drop_last = true;        // --drop-last (default) / --no-drop-last
  int prefetch = 2;             // --prefetch N (0: read inline in next())
  std::string cache = "none";   // --cache none|memory (parse_cache_mode checks it)
  std::string eval_split = "test";
  std::string augment;               // --augment LIST (data/augment.hpp): training split only
  int data_threads = 1;              // --data-threads N: per rank, augment + normalise workers
  std::string jpeg_decode = "fast";  // --jpeg-decode fast|exact (hdf5_source.hpp ReaderOptions::jpeg_exact)
  int label_fill = -1;               // --ignore-index (ReaderOptions::label_fill)
};

struct DataSources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<EvalSource> eval;            // null when the data set has no test split
  std::shared_ptr<const DatasetInfo> dataset;  // null for synthetic data
};

DataSources open_data(const DataOptions& opts, int rank, int world);

// Conveniences over open_data() (each loads dataset.json once more).
std::unique_ptr<BatchSource> open_train_source(const DataOptions& opts, int rank, int world);
std::unique_ptr<EvalSource> open_eval_source(const DataOptions& opts, int rank, int world);

}  // namespace cnnscale
