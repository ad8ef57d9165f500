// dataset.hpp — a `cnnscale prep` output directory: what dataset.json says, checked
// against the shard files (see docs/data.md for the fields and the layout).
//
// load_dataset() reads dataset.json and opens every shard: counts, sample shape and
// dtype must agree, labels (read whole: 4 bytes per sample) must lie in
// [0, classes) (label maps are not read here: their shape and type are checked, and the
// readers check each batch's labels), no file may be listed twice (by name, link or hard link), and each shard's
// digest (shard_digest.hpp: count, labels, chunk checksums) must be the one dataset.json
// records — a copy of another shard or another data set's shard is refused by name. Images are not read here (verify_dataset() does that, chunk by
// chunk, so every fletcher32 checksum is checked). Every failure is a UserError
// naming the file, the cause and the fix.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "data/sample_type.hpp"

namespace cnnscale {

constexpr const char* kDatasetFormat = "cnnscale-dataset";

constexpr int kDatasetVersion = 1;

struct ShardInfo {
  std::string file;  // name inside the directory, e.g. train-00000-of-00008.h5
  std::string path;  // dir + "/" + file
  int64_t samples = 0;
  int64_t first_index = 0;  // global index (within the split) of the shard's sample 0
  // Its digest (shard_digest.hpp): as dataset.json records it and load_dataset() found it
  // in the file; computed only, where dataset.json records none (an older prep's).
  std::string digest;
};

struct SplitInfo {
  std::string name;  // "train" or "test"
  int64_t samples = 0;
  std::vector<ShardInfo> shards;  // in global-index order
  std::vector<int32_t> labels;    // classification: all labels of the split (filled by load_dataset;
                                  // empty for segmentation: the readers read label maps per batch)
  std::vector<float> targets;     // regression: all targets of the split, samples × DatasetInfo::targets
  // Ragged data sets only (filled by load_dataset): per sample, its byte offset in its
  // shard's 1-D /images and its C×H×W shape.
  std::vector<int64_t> offsets;
  std::vector<SampleShape> shapes;
  std::vector<int64_t> lengths;  // its stored bytes: shapes' numel(), or the JPEG's size (jpeg layout)
  // The shard holding global sample `index` (binary search).
  int shard_of(int64_t index) const;
};

struct DatasetInfo {
  std::string dir;
  SampleShape shape;  // fixed: every sample's; ragged: C × max_side × max_side
  // `prep --store original-max S` (dataset.json "sample_layout": "ragged", "max_side": S):
  // samples keep their own H×W (longer side at most S), stored back to back in a 1-D
  // /images with /offsets (int64, N+1) and /shapes (int32, N×3) beside it.
  bool ragged = false;
  // `prep --store jpeg S` ("sample_layout": "jpeg"): ragged too, but each sample's bytes
  // are a JPEG (shapes: its decoded size), decoded by the reader threads.
  bool jpeg = false;
  int max_side = 0;
  SampleType dtype = SampleType::u8;
  int64_t sample_bytes() const { return shape.numel() * sample_type_bytes(dtype); }
  // What the targets are (dataset.json "task"): class labels (/labels int32 N, `classes`),
  // label maps (segmentation: /labels int32 N×H×W or N×D×H×W, `classes`; read per batch from the
  // shards, not held in memory), or `targets` floats per sample (/targets float32 N×K: regression; multilabel: each 0 or 1).
  TaskKind task = TaskKind::classification;
  int targets = 0;                       // regression, multilabel: K
  int outputs() const {
    return task == TaskKind::classification || task == TaskKind::segmentation ? classes : targets;
  }
  // Labels per sample: H·W for segmentation (/labels N×H×W, a class per pixel; volumes D·H·W,
  // /labels N×D×H×W, a class per voxel), else 1.
  int64_t label_pixels() const { return task == TaskKind::segmentation ? shape.plane() : 1; }
  // "log1p": the reader feeds log(1 + x) (CosmoFlow's counts; prep --transform); "none".
  std::string transform = "none";
  int classes = 0;
  std::vector<std::string> class_names;  // label order; empty when dataset.json names none
  std::vector<double> mean, std;         // per channel: uint8 in [0,1] pixel units; others in the values' units (after the transform)
  int64_t chunk_samples = 0;
  std::string compression = "none";
  SplitInfo train, test;  // test.samples == 0: the data set has no test split
  // Shards whose digest dataset.json does not record (an older prep's data set): not bound
  // to it, so a file swapped in goes unseen; callers warn (unbound_warning()).
  int unbound_shards = 0;
};

// "" when every shard is bound, else the warning that says how many are not and the fix.
std::string unbound_warning(const DatasetInfo& info);

// Reads and checks `dir`. Throws UserError (see above).
DatasetInfo load_dataset(const std::string& dir);

// Reads every image chunk of every shard of both splits (checking fletcher32), through
// the shard's /chunk_addresses list too (the bytes must be HDF5's), checks the declared
// sample_layout against the bytes (jpeg: every sample a readable JPEG of its /shapes size)
// and calls progress(done, total) now and then. Throws UserError naming a damaged shard, a
// list that does not match its chunks or cannot be read, or a sample of the wrong layout.
void verify_dataset(const DatasetInfo& info, const std::function<void(int64_t, int64_t)>& progress = {});

// Shard file name, e.g. shard_file_name("train", 0, 8) == "train-00000-of-00008.h5".
std::string shard_file_name(const std::string& split, int index, int count);

}  // namespace cnnscale
