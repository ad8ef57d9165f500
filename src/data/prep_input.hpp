// prep_input.hpp — the inputs `cnnscale prep` converts, as sequential streams of
// samples: MNIST-style IDX files (gzip or raw) and datasets of an existing HDF5 file.
// Labels are read whole up front (small); images are streamed block by block so the
// input is never held in memory at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "data/sample_type.hpp"

namespace cnnscale {

class SampleStream {
 public:
  virtual ~SampleStream() = default;
  virtual std::string describe() const = 0;  // for messages, e.g. the file names
  virtual int64_t samples() const = 0;
  virtual SampleShape shape() const = 0;
  virtual const std::vector<int32_t>& labels() const = 0;  // classification; empty with targets
  // Labels per sample: 1, or H·W for label maps (segmentation: labels() is N×H×W, one class
  // per pixel of the sample's H×W).
  virtual int64_t label_pixels() const { return 1; }
  // What the samples' values are (uint8 pixels unless an HDF5 input holds others).
  virtual SampleType dtype() const { return SampleType::u8; }
  // Regression inputs (prep --targets): K floats per sample, N × K; 0 and empty otherwise.
  virtual int target_count() const { return 0; }
  virtual const std::vector<float>& targets() const {
    static const std::vector<float> none;
    return none;
  }
  // Reads the next n samples' values (n × shape().numel() of dtype(), as bytes) in order.
  virtual void read_images(uint8_t* dst, int64_t n) = 0;
  // The number of classes the input format defines (0: prep counts them from the labels)
  // and their names in label order (empty: unnamed).
  virtual int format_classes() const { return 0; }
  virtual std::vector<std::string> class_names() const { return {}; }
  // Ragged streams (prep --store original-max): samples keep their own H×W; shape() is
  // C × max × max. read_ragged() replaces read_images(): the next n samples' C×H×W bytes
  // back to back into `bytes` (resized) and their shapes into `shapes` (resized).
  virtual bool ragged() const { return false; }
  virtual void read_ragged(int64_t n, std::vector<uint8_t>& bytes, std::vector<SampleShape>& shapes);
  // Encoded streams (prep --store jpeg; ragged() too): read_ragged() gives each sample's
  // stored bytes (a JPEG) back to back, `lengths` their sizes, `shapes` their decoded
  // shapes and `pixels` their decoded C×H×W bytes (for the normalisation statistics).
  virtual bool encoded() const { return false; }
  virtual void read_encoded(int64_t n, std::vector<uint8_t>& bytes, std::vector<int64_t>& lengths,
                            std::vector<SampleShape>& shapes, std::vector<uint8_t>& pixels);
};

// The IDX file for `split` ("train" or "t10k") and `kind` ("images" or "labels") in
// dir, accepting the usual spellings: train-images-idx3-ubyte[.gz] and
// train-images.idx3-ubyte[.gz]. Throws UserError naming what was looked for.
std::string find_idx_file(const std::string& dir, const std::string& split, const std::string& kind);

// IDX images (ubyte, N×H×W → C=1, or N×C×H×W) with their IDX labels (ubyte, N).
std::unique_ptr<SampleStream> open_idx_input(const std::string& images_path, const std::string& labels_path);

// Datasets of one HDF5 file: samples uint8/int16/float16/float32 N×C×H×W or N×H×W, and
// either labels integer N, or label maps N×H×W of the images' H×W (segmentation), or
// (targets true) float targets N or N×K in `labels`.
std::unique_ptr<SampleStream> open_hdf5_input(const std::string& file, const std::string& images,
                                              const std::string& labels, bool targets = false);

}  // namespace cnnscale
