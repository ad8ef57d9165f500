// data_bench.hpp — what `cnnscale data-bench` measures (issue 27 item 1): the real training
// reader (open_data: the same sampler, cache, --augment, --data-threads and prefetch as
// `cnnscale train`) driven as fast as it delivers batches, with no model, on this rank.
//
//   images/s           images delivered per wall second (after --warmup batches)
//   images per CPU-s   images per second of CPU time of the whole process (getrusage: the
//                      reader threads included): steady on a shared node, where wall-clock
//                      rates swing with the neighbours
//   bytes read         what the process read from files meanwhile (/proc/self/io rchar: the
//                      HDF5 reads, page cache hits included), per image and per second
//   stages             where the reader threads' time went (BatchSource::take_stage_times:
//                      read, checksum, HDF5 lock wait, augment, normalise), per image
//   read per byte      bytes read per byte of the uint8 image it delivered (C·H·W): 1 when
//                      each stored sample is read once; more with chunk amplification or
//                      larger stored images (--store original-max before a crop); 0 with a
//                      memory cache that holds the data set
// Why a command of its own: "is my file system and my core count enough for N GPUs?" is a
// question about the input alone, as `cnnscale allreduce` is one about the network.
#pragma once
#include <cstdint>

#include "data/open_source.hpp"

namespace cnnscale {

struct DataBenchOptions {
  DataOptions data;
  int64_t batches = 50;  // timed
  int64_t warmup = 5;    // untimed, first (threads start, caches fill)
};

struct DataBenchResult {
  int64_t images = 0;            // delivered in the timed batches
  double wall_s = 0, cpu_s = 0;  // of the timed batches
  uint64_t bytes_read = 0;       // rchar delta over the timed batches (0 where /proc/self/io is not readable)
  bool bytes_known = false;
  int64_t image_bytes = 0;   // C·H·W of a delivered image (C·D·H·W of a volume)
  bool volumes = false;      // the samples are volumes (the printed lines say "volumes", not "images")
  int64_t epoch_images = 0;  // this rank's images per epoch (steps_per_epoch × batch)
  ReaderStageTimes stages;   // where the reader's threads spent the timed batches
};

// This rank's measurement. Collective over MPI_COMM_WORLD through open_data (which agrees on
// input errors); UserError for bad options or data.
DataBenchResult run_data_bench(const DataBenchOptions& o, int rank, int world);

}  // namespace cnnscale
