// hdf5_source.hpp — the readers of a `cnnscale prep` dataset.
//
// ShardedHdf5Source (training): each batch is this rank's slice of the sampler's
// global batch; the reader thread sorts the slice's sample indices, groups them by
// shard, reads each shard's samples with one HDF5 hyperslab selection (runs of
// consecutive indices merged, chunk order respected), scatters them back to batch
// order, augments them (--augment, keyed by (seed, epoch, global sample id); see
// augment.hpp) and normalises them. Only the samples of this rank are read. With
// cache_memory, every chunk the rank touches is kept (decoded) after its first read,
// and later reads come from memory (ragged data sets: every shard it touches, whole).
// Ragged data sets (prep --store original-max): each sample is read at its own size
// (consecutive samples of a shard merged into one byte range) and the --augment list,
// which must reach a fixed size (rrc<S> or center<S> first), makes the batch shape.
// Hdf5EvalSource (evaluation): rank r reads the contiguous global range
// [N*r/W, N*(r+1)/W) of the split in order, in batches of at most max_batch, never
// augmented (only center-cropped to the training shape after rrc<S>/center<S>).
#pragma once
#include <memory>
#include <string>

#include "data/batch_source.hpp"
#include "data/dataset.hpp"

namespace cnnscale {

struct ReaderOptions {
  int64_t batch_per_rank = 64;
  uint64_t seed = 0;
  bool drop_last = true;
  int prefetch = 2;
  bool cache_memory = false;
  std::string augment;  // --augment LIST (augment.hpp); training only, "" = none
  int threads = 1;      // --data-threads: workers augmenting/normalising a batch (worker_pool.hpp)
  // --jpeg-decode fast|exact (prep --store jpeg data): fast decodes each JPEG at the
  // smallest DCT scale that keeps rrc<S>'s window at least S×S pixels; exact decodes it
  // whole, so the pixels are PIL's and the crop torchvision's, bit for bit.
  bool jpeg_exact = false;
  // Segmentation: the label that crop<S>pad<P> gives a label map's padded pixels (the
  // --ignore-index, as torchvision's segmentation reference pads its targets with 255, the
  // ignored label); -1: none, and a padded crop of label maps is refused.
  int label_fill = -1;
};

// `info` is shared so that callers may open several sources on one load_dataset().
std::unique_ptr<BatchSource> make_hdf5_train_source(std::shared_ptr<const DatasetInfo> info, const ReaderOptions& opts,
                                                    int rank, int world);
// split: "test" or "train". augment: the training --augment list; evaluation applies
// its deterministic counterpart (Augmenter::for_evaluation: center<S> for rrc<S>), on
// `threads` workers (--data-threads; the same result for any count).
std::unique_ptr<EvalSource> make_hdf5_eval_source(std::shared_ptr<const DatasetInfo> info, const std::string& split,
                                                  int rank, int world, const std::string& augment = "",
                                                  int threads = 1);

}  // namespace cnnscale
