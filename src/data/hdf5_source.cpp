// hdf5_source.cpp — ShardedHdf5Source and Hdf5EvalSource (see hdf5_source.hpp), and
// ShardReader, the HDF5 hyperslab reads (and the optional chunk cache) they share.
#include "data/hdf5_source.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <utility>

#include "data/augment.hpp"
#include "data/chunk_reader.hpp"
#include "data/contiguous_eval.hpp"
#include "data/h5util.hpp"
#include "data/image_decode.hpp"
#include "data/normalize.hpp"
#include "data/prefetcher.hpp"
#include "data/sampler.hpp"
#include "data/worker_pool.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"
#include "util/log.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
// The calling thread's CPU time: the compute stages are timed in it, so that a busy node's
// preemptions do not count (reads are timed on the wall clock: waiting for storage counts).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Thread-seconds per reader stage (ReaderStageTimes), one row per thread so that the
// threads never share a cache line's writes; read and reset by the consumer.
class StageClocks {
 public:
  enum Stage { read, checksum, lock_wait, decode, augment, normalize, count };
  explicit StageClocks(int threads) : rows_(static_cast<size_t>(threads)) {}
  void add(int t, Stage st, double s) {
    rows_[static_cast<size_t>(t)].ns[st].fetch_add(static_cast<int64_t>(s * 1e9), std::memory_order_relaxed);
  }
  ReaderStageTimes take() {
    double v[count] = {0};
    for (auto& r : rows_)
      for (int i = 0; i < count; ++i)
        v[i] += 1e-9 * static_cast<double>(r.ns[i].exchange(0, std::memory_order_relaxed));
    return {v[read], v[checksum], v[lock_wait], v[decode], v[augment], v[normalize]};
  }

 private:
  struct alignas(64) Row {
    std::atomic<int64_t> ns[count] = {};
  };
  std::vector<Row> rows_;
};

// Where ShardReader's HDF5 reads put their lock wait and read time (nullptr: nowhere).
struct ReadTimes {
  double lock_wait = 0, read = 0;
};

// The HDF5 lock, timed: the wait for it and the time it was held go to `times`.
class TimedHdf5Lock {
 public:
  explicit TimedHdf5Lock(ReadTimes* times) : times_(times), t0_(Clock::now()), lock_(hdf5_mutex()), t1_(Clock::now()) {}
  ~TimedHdf5Lock() {
    if (!times_) return;
    times_->lock_wait += std::chrono::duration<double>(t1_ - t0_).count();
    times_->read += seconds_since(t1_);
  }
  TimedHdf5Lock(const TimedHdf5Lock&) = delete;
  TimedHdf5Lock& operator=(const TimedHdf5Lock&) = delete;

 private:
  ReadTimes* times_;
  Clock::time_point t0_;
  Hdf5Lock lock_;
  Clock::time_point t1_;
};

const char* kDamaged =
    "; the shard is truncated or damaged — copy it again or re-create the data set with `cnnscale prep`";

// A shard whose /chunk_addresses the direct reader ignores (one that cannot be read, or an
// older prep's out of file order): its chunks are looked up when it is opened, correct but
// slower for shards of many chunks. Said once per process (rank 0), for the first such shard.
// The targets of samples ids[0..n) into b: their labels (classification) or their K floats
// each (regression), the other vector emptied. Segmentation: b.labels sized for their label
// maps (H·W each), which the caller reads from the shards (ShardReader::read_label_maps).
void fill_targets(const DatasetInfo& info, const SplitInfo& split, const int64_t* ids, int64_t n, Batch& b) {
  if (info.task == TaskKind::segmentation) {
    b.targets.clear();
    b.labels.resize(static_cast<size_t>(n * info.label_pixels()));
    return;
  }
  if (info.task == TaskKind::classification) {
    b.targets.clear();
    b.labels.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) b.labels[static_cast<size_t>(k)] = split.labels[static_cast<size_t>(ids[k])];
    return;
  }
  const size_t K = static_cast<size_t>(info.targets);
  b.labels.clear();
  b.targets.resize(static_cast<size_t>(n) * K);
  for (int64_t k = 0; k < n; ++k)
    std::copy_n(split.targets.data() + static_cast<size_t>(ids[k]) * K, K, b.targets.data() + static_cast<size_t>(k) * K);
}

void warn_ignored_list(const std::string& path, const DirectChunkReader* r) {
  if (!r || r->chunk_list() != DirectChunkReader::ChunkList::unusable) return;
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  log_warn("shard " + path + " has a /chunk_addresses list that " + r->chunk_list_problem() +
           ": it is ignored and each chunk looked up when a shard is opened (slower for shards of many chunks); "
           "re-run `cnnscale prep` to rewrite it (`cnnscale prep --verify` checks every shard)");
}

// Reads samples of one split's shards by shard-local index; opens shards lazily.
// direct: also open each shard's DirectChunkReader (training without --cache reads through
// it; evaluation and the cache read through HDF5).
class ShardReader {
 public:
  ShardReader(std::shared_ptr<const DatasetInfo> info, const SplitInfo& split, bool cache_memory, bool direct = false)
      : info_(std::move(info)),
        split_(split),
        cache_(cache_memory),
        direct_(direct && !cache_memory),
        open_(split.shards.size()) {}
  ~ShardReader() {
    Hdf5Lock lock(hdf5_mutex());
    open_.clear();
  }
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // Reads shard s's samples local[0..n) (ascending, distinct) into dst, n × sample_bytes().
  void read(int s, const int64_t* local, int64_t n, uint8_t* dst, ReadTimes* times = nullptr) {
    TimedHdf5Lock lock(times);
    h5_quiet();
    Open& o = ensure_open(s);
    const int64_t numel = info_->sample_bytes();
    if (cache_) {
      for (int64_t k = 0; k < n; ++k) {
        const int64_t c = local[k] / o.chunk;
        auto& buf = o.cache[static_cast<size_t>(c)];
        if (buf.empty()) {
          const int64_t first = c * o.chunk, cnt = std::min(o.chunk, split_.shards[s].samples - first);
          buf.resize(static_cast<size_t>(cnt * numel));
          read_runs(s, o, &first, &cnt, 1, cnt, buf.data());
        }
        std::memcpy(dst + k * numel, buf.data() + (local[k] - c * o.chunk) * numel, static_cast<size_t>(numel));
      }
      return;
    }
    // Merge consecutive indices into runs: one hyperslab block per run.
    runs_start_.clear();
    runs_len_.clear();
    for (int64_t k = 0; k < n; ++k) {
      if (!runs_start_.empty() && runs_start_.back() + runs_len_.back() == local[k]) ++runs_len_.back();
      else {
        runs_start_.push_back(local[k]);
        runs_len_.push_back(1);
      }
    }
    read_runs(s, o, runs_start_.data(), runs_len_.data(), runs_start_.size(), n, dst);
  }

  // Ragged data sets: shard s's samples local[0..n) (ascending, distinct), their bytes
  // back to back into dst (sum of their numel()).
  void read_ragged(int s, const int64_t* local, int64_t n, uint8_t* dst, ReadTimes* times = nullptr) {
    TimedHdf5Lock lock(times);
    h5_quiet();
    Open& o = ensure_open(s);
    const int64_t base = split_.shards[s].first_index;
    auto begin = [&](int64_t l) { return split_.offsets[static_cast<size_t>(base + l)]; };
    auto end = [&](int64_t l) { return begin(l) + split_.lengths[static_cast<size_t>(base + l)]; };
    if (cache_) {  // the whole shard's bytes, on first touch
      if (o.cache.empty()) {
        o.cache.resize(1);
        const int64_t first = 0, bytes = split_.shards[s].samples ? end(split_.shards[s].samples - 1) : 0;
        o.cache[0].resize(static_cast<size_t>(bytes));
        if (bytes > 0) read_byte_runs(s, o, &first, &bytes, 1, bytes, o.cache[0].data());
      }
      for (int64_t k = 0; k < n; ++k) {
        std::memcpy(dst, o.cache[0].data() + begin(local[k]), static_cast<size_t>(end(local[k]) - begin(local[k])));
        dst += end(local[k]) - begin(local[k]);
      }
      return;
    }
    runs_start_.clear();
    runs_len_.clear();
    int64_t total = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t b = begin(local[k]), len = end(local[k]) - b;
      total += len;
      if (!runs_start_.empty() && runs_start_.back() + runs_len_.back() == b) runs_len_.back() += len;
      else {
        runs_start_.push_back(b);
        runs_len_.push_back(len);
      }
    }
    read_byte_runs(s, o, runs_start_.data(), runs_len_.data(), runs_start_.size(), total, dst);
  }

  // Segmentation: shard s's label maps of samples local[0..n) (ascending, distinct) into dst
  // (n × H·W int32; volumes n × D·H·W), through HDF5 (its Fletcher32 checked per chunk, an 8 MiB chunk cache per
  // shard), each label checked to be a class: a UserError names the shard, sample and pixel.
  void read_label_maps(int s, const int64_t* local, int64_t n, int32_t* dst, ReadTimes* times = nullptr) {
    TimedHdf5Lock lock(times);
    h5_quiet();
    Open& o = ensure_open(s);
    const ShardInfo& si = split_.shards[s];
    if (!o.labels.valid()) {
      H5Id dapl = h5_plist(H5Pcreate(H5P_DATASET_ACCESS));
      H5Pset_chunk_cache(dapl, 521, size_t{8} << 20, 1.0);
      o.labels = h5_dataset(H5Dopen2(o.file, "/labels", dapl));
      if (!o.labels.valid()) fail("shard ", si.path, " has no /labels (", h5_error_cause(), ")", kDamaged);
    }
    hsize_t md[4] = {0, 0, 0, 0};  // N×H×W or N×D×H×W
    const int rank = h5_label_map_dims(info_->shape, static_cast<hsize_t>(n), md);
    H5Id fspace = h5_space(H5Dget_space(o.labels));
    int64_t k = 0;
    bool first = true;
    while (k < n) {  // runs of consecutive samples: one hyperslab block each
      int64_t e = k + 1;
      while (e < n && local[e] == local[e - 1] + 1) ++e;
      hsize_t st[4] = {static_cast<hsize_t>(local[k]), 0, 0, 0}, ct[4] = {static_cast<hsize_t>(e - k), md[1], md[2], md[3]};
      H5Sselect_hyperslab(fspace, first ? H5S_SELECT_SET : H5S_SELECT_OR, st, nullptr, ct, nullptr);
      first = false;
      k = e;
    }
    H5Id mspace = h5_space(H5Screate_simple(rank, md, nullptr));
    if (n > 0 && H5Dread(o.labels, H5T_NATIVE_INT32, mspace, fspace, H5P_DEFAULT, dst) < 0)
      fail("shard ", si.path, " is damaged: reading the label maps of ", n, " sample(s) from index ", local[0],
           " failed (", h5_error_cause(), ")", kDamaged);
    const int64_t P = info_->label_pixels();
    for (int64_t i = 0; i < n * P; ++i)
      if (dst[i] < 0 || dst[i] >= info_->classes)
        fail("shard ", si.path, ": label ", dst[i], " of sample ", local[i / P], " (pixel ", i % P, ") is outside [0, ",
             info_->classes, ") declared by ", info_->dir, "/dataset.json; fix the label maps of the source data (or ",
             "its classes) and re-create the data set with `cnnscale prep`");
  }

  // Opens shard s (under the HDF5 lock) and says whether read_direct() serves it: a
  // direct reader without --cache and the plain layout (DirectChunkReader). Called by the reader thread for
  // every shard of a batch before the workers read.
  bool prepare_direct(int s) {
    Hdf5Lock lock(hdf5_mutex());
    h5_quiet();
    return ensure_open(s).direct != nullptr;
  }
  // Shard s's sample `local` into dst (its numel() bytes), without the HDF5 lock: any
  // thread, after prepare_direct(s) returned true.
  void read_direct(int s, int64_t local, uint8_t* dst, std::vector<uint8_t>& buf, double* io_s = nullptr,
                   double* checksum_s = nullptr) const {
    const int64_t base = split_.shards[s].first_index;
    const int64_t begin =
        info_->ragged ? split_.offsets[static_cast<size_t>(base + local)] : local * info_->sample_bytes();
    const int64_t len = info_->ragged ? split_.lengths[static_cast<size_t>(base + local)] : info_->sample_bytes();
    open_[s].direct->read(begin, begin + len, dst, buf, io_s, checksum_s);
  }

  int64_t cached_bytes() const {
    int64_t b = 0;
    for (const auto& o : open_)
      for (const auto& c : o.cache) b += static_cast<int64_t>(c.size());
    return b;
  }

 private:
  struct Open {
    H5Id file, images, labels;  // labels: segmentation's /labels, opened by read_label_maps
    int64_t chunk = 1;
    std::vector<std::vector<uint8_t>> cache;    // per chunk, empty until read
    std::unique_ptr<DirectChunkReader> direct;  // the plain layout: reads without HDF5 (chunk_reader.hpp)
  };

  Open& ensure_open(int s) {
    Open& o = open_[s];
    if (o.images.valid()) return o;
    const ShardInfo& si = split_.shards[s];
    std::string cause;
    o.file = h5_open_readonly(si.path, cause);
    if (!o.file.valid()) fail("shard ", si.path, " cannot be opened (", cause, ")", kDamaged);
    o.images = h5_dataset(H5Dopen2(o.file, "/images", H5P_DEFAULT));
    if (!o.images.valid()) fail("shard ", si.path, " has no /images (", h5_error_cause(), ")", kDamaged);
    if (direct_) {
      o.direct = DirectChunkReader::open(si.path, o.images);
      warn_ignored_list(si.path, o.direct.get());
    }
    H5Id dcpl = h5_plist(H5Dget_create_plist(o.images));
    hsize_t cd[5] = {0};
    o.chunk = 256;
    if (info_->ragged) return o;  // read_ragged caches whole shards
    const int rank = h5_image_dims(info_->shape, 0, cd);
    if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, cd) == rank) o.chunk = static_cast<int64_t>(cd[0]);
    if (cache_) o.cache.resize(static_cast<size_t>((si.samples + o.chunk - 1) / o.chunk));
    return o;
  }

  void read_runs(int s, Open& o, const int64_t* start, const int64_t* len, size_t runs, int64_t total, uint8_t* dst) {
    const SampleShape sh = info_->shape;
    H5Id fspace = h5_space(H5Dget_space(o.images));
    for (size_t r = 0; r < runs; ++r) {
      hsize_t st[5] = {static_cast<hsize_t>(start[r]), 0, 0, 0, 0};
      hsize_t ct[5] = {0};
      h5_image_dims(sh, static_cast<hsize_t>(len[r]), ct);
      H5Sselect_hyperslab(fspace, r == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, st, nullptr, ct, nullptr);
    }
    hsize_t md[5] = {0};
    const int rank = h5_image_dims(sh, static_cast<hsize_t>(total), md);
    H5Id mspace = h5_space(H5Screate_simple(rank, md, nullptr));
    H5Id mtype = h5_sample_type(info_->dtype);  // the stored type: bytes as they are
    if (H5Dread(o.images, mtype, mspace, fspace, H5P_DEFAULT, dst) < 0)
      fail("shard ", split_.shards[s].path, " is damaged: reading ", total, " image(s) from index ", start[0],
           " failed (", h5_error_cause(), ")", kDamaged);
  }

  void read_byte_runs(int s, Open& o, const int64_t* start, const int64_t* len, size_t runs, int64_t total,
                      uint8_t* dst) {
    H5Id fspace = h5_space(H5Dget_space(o.images));
    for (size_t r = 0; r < runs; ++r) {
      const hsize_t st = static_cast<hsize_t>(start[r]), ct = static_cast<hsize_t>(len[r]);
      H5Sselect_hyperslab(fspace, r == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, &st, nullptr, &ct, nullptr);
    }
    const hsize_t md = static_cast<hsize_t>(total);
    H5Id mspace = h5_space(H5Screate_simple(1, &md, nullptr));
    if (H5Dread(o.images, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, dst) < 0)
      fail("shard ", split_.shards[s].path, " is damaged: reading ", total, " image bytes from byte ", start[0],
           " failed (", h5_error_cause(), ")", kDamaged);
  }

  std::shared_ptr<const DatasetInfo> info_;
  const SplitInfo& split_;
  bool cache_, direct_;
  std::vector<Open> open_;
  std::vector<int64_t> runs_start_, runs_len_;
};

class ShardedHdf5Source : public BatchSource {
 public:
  ShardedHdf5Source(std::shared_ptr<const DatasetInfo> info, const ReaderOptions& o, int rank, int world)
      : info_(info),
        rank_(rank),
        per_rank_(o.batch_per_rank),
        sampler_(info->train.samples, o.batch_per_rank * world, o.drop_last, o.seed),
        reader_(info, info->train, o.cache_memory, /*direct=*/true),
        augment_(o.augment, info->shape, o.seed, info->ragged),
        label_fill_(o.label_fill),
        label_scratch_(static_cast<size_t>(o.threads)),
        norm_(augment_.output_shape(), info->mean, info->std, info->dtype, info->transform == "log1p"),
        pool_(o.threads),
        augmented_(static_cast<size_t>(o.threads)),
        scratch_(static_cast<size_t>(o.threads)),
        volume_scratch_(static_cast<size_t>(o.threads)),
        samples_(static_cast<size_t>(o.threads)),
        chunks_(static_cast<size_t>(o.threads)),
        decoded_(static_cast<size_t>(o.threads)),
        windows_(static_cast<size_t>(o.threads)),
        exact_jpeg_(o.jpeg_exact),
        jpeg_what_("a stored JPEG of " + info->dir),
        clocks_(o.threads),
        prefetch_([this](int e, int64_t s, Batch& b) { produce(e, s, b); }, sampler_.steps_per_epoch(), o.prefetch) {}

  SampleShape shape() const override { return augment_.output_shape(); }
  int classes() const override { return info_->outputs(); }
  TaskKind task() const override { return info_->task; }
  int64_t samples() const override { return info_->train.samples; }
  int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }
  void seek(int epoch, int64_t step) override {
    if (epoch < 0 || step < 0 || step >= sampler_.steps_per_epoch())
      fail("cannot resume at epoch ", epoch, " step ", step, ": an epoch of ", info_->dir, " has ",
           sampler_.steps_per_epoch(), " steps with this global batch");
    prefetch_.seek(epoch, step);
  }
  void next(Batch& out) override { prefetch_.next(out); }
  double take_wait_seconds() override { return prefetch_.take_wait_seconds(); }
  void set_batch_hook(BatchHook hook) override { prefetch_.set_hook(std::move(hook)); }
  ReaderStageTimes take_stage_times() override { return clocks_.take(); }

 private:
  // Runs in the reader thread.
  void produce(int epoch, int64_t step, Batch& b) {
    sampler_.rank_slice(epoch, step, rank_, per_rank_, ids_);
    const SplitInfo& split = info_->train;
    const int64_t n = per_rank_, numel = info_->sample_bytes();
    b.epoch = epoch;
    b.step_in_epoch = step;
    b.count = n;
    b.rank_offset = int64_t{rank_} * per_rank_;
    b.sample_ids = ids_;
    fill_targets(*info_, split, ids_.data(), n, b);
    // Sort by global index (= shard order, then chunk order within a shard).
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    std::sort(order_.begin(), order_.end(), [&](int64_t a, int64_t c) { return ids_[a] < ids_[c]; });
    if (info_->task == TaskKind::segmentation) read_label_maps(epoch, n, b);
    // at_[k]: where the sample at sorted position k starts in staging_ (ragged: its own size).
    at_.resize(static_cast<size_t>(n + 1));
    at_[0] = 0;
    for (int64_t k = 0; k < n; ++k)
      at_[k + 1] = at_[k] + (info_->ragged ? split.lengths[static_cast<size_t>(ids_[order_[k]])] : numel);
    // The plain layout without --cache: each worker reads its own samples straight from
    // the file (chunk_reader.hpp), in parallel, then augments them.
    bool direct = true;
    for (int64_t j = 0; j < n && direct; ++j)
      if (j == 0 || split.shard_of(ids_[order_[j]]) != split.shard_of(ids_[order_[j - 1]]))
        direct = reader_.prepare_direct(split.shard_of(ids_[order_[j]]));
    if (direct) {
      const int64_t out = augment_.output_shape().numel();
      b.images.resize(static_cast<size_t>(n * out));
      float* images = b.images.data();
      pool_.run(n, [&](int64_t j, int t) {
        const int64_t g = ids_[order_[j]];
        const int s = split.shard_of(g);
        std::vector<uint8_t>& sample = samples_[static_cast<size_t>(t)];
        const SampleShape in = info_->ragged ? split.shapes[static_cast<size_t>(g)] : info_->shape;
        const int64_t len = info_->ragged ? split.lengths[static_cast<size_t>(g)] : numel;
        sample.resize(static_cast<size_t>(len));
        double io = 0, sum = 0;
        reader_.read_direct(s, g - split.shards[s].first_index, sample.data(), chunks_[static_cast<size_t>(t)], &io,
                            &sum);
        clocks_.add(t, StageClocks::read, io);
        clocks_.add(t, StageClocks::checksum, sum);
        transform(sample.data(), len, in, images + order_[j] * out, epoch, g, t);
      });
      return;
    }
    staging_.resize(static_cast<size_t>(at_[n]));
    int64_t k = 0;
    ReadTimes rt;
    while (k < n) {
      const int s = split.shard_of(ids_[order_[k]]);
      const int64_t base = split.shards[s].first_index, end = base + split.shards[s].samples;
      local_.clear();
      int64_t k2 = k;
      while (k2 < n && ids_[order_[k2]] < end) local_.push_back(ids_[order_[k2++]] - base);
      if (info_->ragged)
        reader_.read_ragged(s, local_.data(), static_cast<int64_t>(local_.size()), staging_.data() + at_[k], &rt);
      else reader_.read(s, local_.data(), static_cast<int64_t>(local_.size()), staging_.data() + k * numel, &rt);
      k = k2;
    }
    clocks_.add(0, StageClocks::lock_wait, rt.lock_wait);  // the reader thread runs as worker 0's row
    clocks_.add(0, StageClocks::read, rt.read);
    // Augment (the Augmenter's constructor made sure a ragged list ends fixed-size) and
    // normalise, sample j on worker j mod --data-threads; each draw is keyed by the
    // sample id, so the batch is the same for any thread count.
    const int64_t out = augment_.output_shape().numel();
    b.images.resize(static_cast<size_t>(n * out));
    float* images = b.images.data();
    pool_.run(n, [&](int64_t j, int t) {
      const int64_t g = ids_[order_[j]];
      transform(staging_.data() + at_[j], at_[j + 1] - at_[j],
                info_->ragged ? split.shapes[static_cast<size_t>(g)] : info_->shape, images + order_[j] * out, epoch, g,
                t);
    });
  }

  // Segmentation: the batch's label maps from the shards (in sorted order, then to each
  // sample's place in the batch), moved with their images: the same draws (seed, epoch, id).
  void read_label_maps(int epoch, int64_t n, Batch& b) {
    const SplitInfo& split = info_->train;
    const int64_t P = info_->label_pixels();
    maps_.resize(static_cast<size_t>(n * P));
    ReadTimes rt;
    for (int64_t k = 0; k < n;) {
      const int s = split.shard_of(ids_[order_[k]]);
      const int64_t base = split.shards[s].first_index, end = base + split.shards[s].samples;
      map_local_.clear();
      int64_t k2 = k;
      while (k2 < n && ids_[order_[k2]] < end) map_local_.push_back(ids_[order_[k2++]] - base);
      reader_.read_label_maps(s, map_local_.data(), k2 - k, maps_.data() + k * P, &rt);
      k = k2;
    }
    clocks_.add(0, StageClocks::lock_wait, rt.lock_wait);
    clocks_.add(0, StageClocks::read, rt.read);
    // Each map to its sample's place, moved there by its draws: on the workers (a 128³ map's
    // transpose takes milliseconds), timed as augmentation (thread CPU).
    pool_.run(n, [&](int64_t k, int t) {
      int32_t* map = b.labels.data() + order_[k] * P;
      std::copy_n(maps_.data() + k * P, P, map);
      if (!augment_.active()) return;
      const double t0 = thread_cpu_seconds();
      augment_label_map(augment_, map, epoch, ids_[order_[k]], label_fill_, label_scratch_[static_cast<size_t>(t)]);
      clocks_.add(t, StageClocks::augment, thread_cpu_seconds() - t0);
    });
  }

  // Augment and normalise sample g (shape `in`; `len` stored bytes: a JPEG to decode
  // first in a jpeg data set) into dst, on worker t, timed (thread CPU).
  void transform(const uint8_t* src, int64_t len, SampleShape in, float* dst, int epoch, int64_t g, int t) {
    if (info_->jpeg) {
      transform_jpeg(src, len, in, dst, epoch, g, t);
      return;
    }
    double t0 = thread_cpu_seconds();
    if (augment_.volume()) {  // volumes: normalised, then their voxels moved (augment.hpp)
      norm_.apply(src, dst);
      const double t1 = thread_cpu_seconds();
      clocks_.add(t, StageClocks::normalize, t1 - t0);
      augment_.apply_volume(dst, epoch, g, volume_scratch_[static_cast<size_t>(t)]);
      clocks_.add(t, StageClocks::augment, thread_cpu_seconds() - t1);
      return;
    }
    if (augment_.active() || info_->ragged) {
      std::vector<uint8_t>& a = augmented_[static_cast<size_t>(t)];
      a.resize(static_cast<size_t>(augment_.output_shape().numel()));
      augment_.apply(src, in, a.data(), epoch, g, scratch_[static_cast<size_t>(t)]);
      const double t1 = thread_cpu_seconds();
      clocks_.add(t, StageClocks::augment, t1 - t0);
      t0 = t1;
      src = a.data();
    }
    norm_.apply(src, dst);
    clocks_.add(t, StageClocks::normalize, thread_cpu_seconds() - t0);
  }

  // A JPEG sample. Fast (default, as FFCV): when the list starts with rrc<S>, its window is
  // drawn on the stored size (as for decoded data), the JPEG decoded at the smallest scale
  // m/8 (libjpeg's DCT scaling, m = 1…8) at which the window still measures at least S×S
  // pixels, with the fast integer DCT and plain chroma upsampling, and only the window
  // (scaled by m/8, outward to whole pixels) decoded; it is resampled to S×S (hflip right
  // after it folded in, as ever); the other steps follow unchanged. --jpeg-decode exact, or
  // a list not starting with rrc<S>: a full decode, PIL's pixels — the bytes of the decoded
  // data set.
  void transform_jpeg(const uint8_t* src, int64_t len, SampleShape stored, float* dst, int epoch, int64_t g, int t) {
    double t0 = thread_cpu_seconds();
    std::vector<uint8_t>& planes = decoded_[static_cast<size_t>(t)];
    std::vector<uint8_t>& a = augmented_[static_cast<size_t>(t)];
    std::vector<uint8_t>& scratch = scratch_[static_cast<size_t>(t)];
    const auto& steps = augment_.steps();
    SampleShape dec;
    a.resize(static_cast<size_t>(augment_.output_shape().numel()));
    if (!exact_jpeg_ && !steps.empty() && steps[0].kind == AugmentStep::Kind::rrc) {
      const AugmentDraw d = augment_.draw(0, epoch, g, stored);
      const int S = steps[0].size;
      int m = 8;
      for (int c = 1; c < 8; ++c)
        if (int64_t{d.w} * c >= int64_t{S} * 8 && int64_t{d.h} * c >= int64_t{S} * 8) {
          m = c;
          break;
        }
      // The window scaled by m/8 (outward to whole pixels) inside the scaled image, which
      // libjpeg makes ceil(W·m/8) × ceil(H·m/8); only it is decoded.
      auto lo = [m](int v) { return static_cast<int>(int64_t{v} * m / 8); };
      auto hi = [m](int v) { return static_cast<int>((int64_t{v} * m + 7) / 8); };
      const int sh = hi(stored.height), sw = hi(stored.width);
      JpegWindow win;
      win.top = std::min(lo(d.top), sh - 1);
      win.left = std::min(lo(d.left), sw - 1);
      win.height = std::max(1, std::min(hi(d.top + d.h), sh) - win.top);
      win.width = std::max(1, std::min(hi(d.left + d.w), sw) - win.left);
      const int h = win.height, w = win.width;
      decode_stored_jpeg(src, len, m, g, stored, planes, &dec, &win);
      const int top = win.top, left = win.left;
      if (top < 0 || left < 0 || top + h > dec.height || left + w > dec.width)
        internal_error("JPEG window ", w, "x", h, "+", left, "+", top, " outside its decoded part ", dec.width, "x",
                       dec.height);
      const double t1 = thread_cpu_seconds();
      clocks_.add(t, StageClocks::decode, t1 - t0);
      t0 = t1;
      const SampleShape cropped{stored.channels, S, S};
      const bool fuse = steps.size() > 1 && steps[1].kind == AugmentStep::Kind::hflip;
      const bool flip = fuse && augment_.draw(1, epoch, g, cropped).flip;
      const size_t next = fuse ? 2 : 1;
      if (next >= steps.size()) {
        resized_crop(planes.data(), a.data(), dec, top, left, h, w, S, flip);
      } else {
        std::vector<uint8_t>& crop = windows_[static_cast<size_t>(t)];
        crop.resize(static_cast<size_t>(cropped.numel()));
        resized_crop(planes.data(), crop.data(), dec, top, left, h, w, S, flip);
        augment_.apply_from(next, crop.data(), cropped, a.data(), epoch, g, scratch);
      }
    } else {
      decode_stored_jpeg(src, len, 8, g, stored, planes, &dec);
      const double t1 = thread_cpu_seconds();
      clocks_.add(t, StageClocks::decode, t1 - t0);
      t0 = t1;
      augment_.apply(planes.data(), dec, a.data(), epoch, g, scratch);
    }
    const double t1 = thread_cpu_seconds();
    clocks_.add(t, StageClocks::augment, t1 - t0);
    norm_.apply(a.data(), dst);
    clocks_.add(t, StageClocks::normalize, thread_cpu_seconds() - t1);
  }

  // decode_jpeg_planes of train sample g, whose /shapes entry is `recorded` (a JPEG of
  // another size is refused from its header); the shard and the sample's index are added to
  // the message only when it fails (no string is built per sample).
  void decode_stored_jpeg(const uint8_t* src, int64_t len, int m, int64_t g, SampleShape recorded,
                          std::vector<uint8_t>& planes, SampleShape* dec, JpegWindow* win = nullptr) const {
    try {
      decode_jpeg_planes(src, static_cast<size_t>(len), m, jpeg_what_, planes, dec, win, &recorded);
    } catch (const UserError& e) {
      const ShardInfo& sh = info_->train.shards[info_->train.shard_of(g)];
      fail("shard ", sh.path, ": sample ", g - sh.first_index, " (train sample ", g, "): ", e.what());
    }
  }

  std::shared_ptr<const DatasetInfo> info_;
  int rank_;
  int64_t per_rank_;
  Sampler sampler_;
  ShardReader reader_;
  Augmenter augment_;  // on the workers: to the uint8 sample before norm_ (a volume's steps: after it)
  int32_t label_fill_;  // segmentation: a padded crop's label (ReaderOptions::label_fill)
  std::vector<std::vector<int32_t>> label_scratch_;  // segmentation, per worker: augment_label_map's
  std::vector<int32_t> maps_;                        // segmentation: the maps read
  std::vector<int64_t> map_local_;
  Normalizer norm_;    // on augment_'s output shape
  std::vector<int64_t> ids_, order_, local_, at_;
  std::vector<uint8_t> staging_;
  WorkerPool pool_;                                        // --data-threads
  std::vector<std::vector<uint8_t>> augmented_, scratch_;  // per worker
  std::vector<std::vector<float>> volume_scratch_;         // per worker: apply_volume's
  std::vector<std::vector<uint8_t>> samples_, chunks_;     // per worker: a sample, the chunks read for it
  std::vector<std::vector<uint8_t>> decoded_, windows_;    // per worker: a decoded JPEG, its resized window
  bool exact_jpeg_ = false;                                // --jpeg-decode exact
  std::string jpeg_what_;                                  // "a stored JPEG of DIR", for decode errors
  StageClocks clocks_;                                     // per worker
  Prefetcher prefetch_;                                    // last: its thread stops before the members above go
};

class Hdf5EvalSource : public ContiguousEvalSource {
 public:
  Hdf5EvalSource(std::shared_ptr<const DatasetInfo> info, const SplitInfo& split, Augmenter eval_transform, int rank,
                 int world, int threads)
      : ContiguousEvalSource(split.samples, eval_transform.output_shape().numel(), rank, world),
        info_(info),
        split_(split),
        reader_(info, split, false),
        transform_(std::move(eval_transform)),
        norm_(transform_.output_shape(), info->mean, info->std, info->dtype, info->transform == "log1p"),
        pool_(threads),
        transformed_(static_cast<size_t>(threads)),
        scratch_(static_cast<size_t>(threads)),
        decoded_(static_cast<size_t>(threads)),
        jpeg_what_("a stored JPEG of " + info->dir) {}

 protected:
  void fill(Batch& out, int64_t first, int64_t n) override {
    const int64_t numel = info_->sample_bytes(), values = info_->shape.numel();
    ids_.resize(static_cast<size_t>(n));
    std::iota(ids_.begin(), ids_.end(), first);
    fill_targets(*info_, split_, ids_.data(), n, out);
    if (info_->task == TaskKind::segmentation)  // the label maps (no eval transform moves them)
      for_each_shard_run(first, n, [&](int s, int64_t k, int64_t count) {
        reader_.read_label_maps(s, local_.data(), count, out.labels.data() + k * info_->label_pixels());
      });
    if (info_->ragged) {
      fill_ragged(out, first, n);
      return;
    }
    staging_.resize(static_cast<size_t>(n * numel));
    for_each_shard_run(first, n, [&](int s, int64_t k, int64_t count) {
      reader_.read(s, local_.data(), count, staging_.data() + k * numel);
    });
    if (transform_.active()) {
      const int64_t o = transform_.output_shape().numel();
      pool_.run(n, [&](int64_t j, int t) {
        std::vector<uint8_t>& a = transformed_[static_cast<size_t>(t)];
        a.resize(static_cast<size_t>(o));
        transform_.apply(staging_.data() + j * numel, a.data(), 0, first + j, scratch_[static_cast<size_t>(t)]);
        norm_.apply(a.data(), out.images.data() + j * o);
      });
      return;
    }
    for (int64_t j = 0; j < n; ++j) norm_.apply(staging_.data() + j * numel, out.images.data() + j * values);
  }

  void fill_ragged(Batch& out, int64_t first, int64_t n) {
    const auto& shapes = split_.shapes;
    std::vector<int64_t>& at = ragged_at_;  // reused: no allocation per batch
    at.assign(static_cast<size_t>(n + 1), 0);
    for (int64_t k = 0; k < n; ++k) at[k + 1] = at[k] + split_.lengths[static_cast<size_t>(first + k)];
    staging_.resize(static_cast<size_t>(at[n]));
    for_each_shard_run(first, n, [&](int s, int64_t k, int64_t count) {
      reader_.read_ragged(s, local_.data(), count, staging_.data() + at[k]);
    });
    const int64_t o = transform_.output_shape().numel();
    pool_.run(n, [&](int64_t j, int t) {
      std::vector<uint8_t>& a = transformed_[static_cast<size_t>(t)];
      a.resize(static_cast<size_t>(o));
      const uint8_t* src = staging_.data() + at[j];
      SampleShape in = shapes[static_cast<size_t>(first + j)];
      if (info_->jpeg) {  // evaluation decodes whole: PIL's pixels, torchvision's Resize and CenterCrop
        std::vector<uint8_t>& planes = decoded_[static_cast<size_t>(t)];
        const SampleShape recorded = in;
        try {
          decode_jpeg_planes(src, static_cast<size_t>(at[j + 1] - at[j]), 8, jpeg_what_, planes, &in, nullptr,
                             &recorded);
        } catch (const UserError& e) {
          const ShardInfo& sh = split_.shards[split_.shard_of(first + j)];
          fail("shard ", sh.path, ": sample ", first + j - sh.first_index, " (", split_.name, " sample ", first + j,
               "): ", e.what());
        }
        src = planes.data();
      }
      transform_.apply(src, in, a.data(), 0, first + j, scratch_[static_cast<size_t>(t)]);
      norm_.apply(a.data(), out.images.data() + j * o);
    });
  }

 private:
  // Splits the consecutive samples [first, first+n) into runs inside one shard each: for
  // each, local_ holds the in-shard indices and f(shard, offset in the batch, count) reads them.
  template <typename F>
  void for_each_shard_run(int64_t first, int64_t n, F&& f) {
    int64_t k = 0;
    while (k < n) {
      const int s = split_.shard_of(first + k);
      const int64_t base = split_.shards[s].first_index, end = base + split_.shards[s].samples;
      local_.clear();
      for (int64_t g = first + k; g < first + n && g < end; ++g) local_.push_back(g - base);
      const auto count = static_cast<int64_t>(local_.size());
      f(s, k, count);
      k += count;
    }
  }

  std::shared_ptr<const DatasetInfo> info_;
  const SplitInfo& split_;
  ShardReader reader_;
  Augmenter transform_;  // deterministic (Augmenter::for_evaluation); none without --augment
  Normalizer norm_;
  std::vector<int64_t> local_;
  std::vector<int64_t> ragged_at_;  // fill_ragged: each sample's offset in staging_
  std::vector<int64_t> ids_;        // fill: the batch's sample indices (fill_targets)
  std::vector<uint8_t> staging_;
  WorkerPool pool_;                                                    // --data-threads
  std::vector<std::vector<uint8_t>> transformed_, scratch_, decoded_;  // per worker (decoded_: jpeg data sets)
  std::string jpeg_what_;                                              // "a stored JPEG of DIR", for decode errors
};

}  // namespace

std::unique_ptr<BatchSource> make_hdf5_train_source(std::shared_ptr<const DatasetInfo> info, const ReaderOptions& o,
                                                    int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) internal_error("HDF5 train source asked for rank ", rank, " of ", world);
  if (o.batch_per_rank < 1) fail("--batch-size must be at least 1");
  if (o.prefetch < 0) fail("--prefetch must be 0 or more");
  if (o.threads < 1 || o.threads > 256)
    fail("--data-threads ", o.threads, " is not a sensible worker count: give 1 to 256 per rank");
  const int64_t g = o.batch_per_rank * world, n = info->train.samples;
  if (g > n)
    fail("--batch-size ", o.batch_per_rank, " on ", world, " rank(s) needs ", g,
         " samples per step but the train split of ", info->dir, " has only ", n, "; use --batch-size ",
         std::max<int64_t>(1, n / world), " or less");
  const auto steps = parse_augment(o.augment);
  if (!info->shape.volume() && info->dtype != SampleType::u8 &&
      std::any_of(steps.begin(), steps.end(), [](const AugmentStep& s) { return !s.volume(); }))
    fail("--augment ", o.augment, " works on uint8 images; ", info->dir, " holds ", sample_type_name(info->dtype),
         " samples, which cnnscale does not augment yet; leave out --augment");
  if (info->task == TaskKind::segmentation) Augmenter(o.augment, info->shape, o.seed).check_label_maps(o.label_fill);
  return std::make_unique<ShardedHdf5Source>(std::move(info), o, rank, world);
}

std::unique_ptr<EvalSource> make_hdf5_eval_source(std::shared_ptr<const DatasetInfo> info, const std::string& split,
                                                  int rank, int world, const std::string& augment, int threads) {
  if (world < 1 || rank < 0 || rank >= world) internal_error("HDF5 eval source asked for rank ", rank, " of ", world);
  const SplitInfo* s = split == "train" ? &info->train : split == "test" ? &info->test : nullptr;
  if (!s) internal_error("HDF5 eval source asked for unknown split '", split, "'");
  if (s->samples == 0)
    fail("the ", split, " split of ", info->dir, " is empty; evaluation needs a data set prepared with a test split");
  Augmenter eval_transform = Augmenter(augment, info->shape, 0, info->ragged).for_evaluation();
  if (threads < 1 || threads > 256)
    fail("--data-threads ", threads, " is not a sensible worker count: give 1 to 256 per rank");
  return std::make_unique<Hdf5EvalSource>(info, *s, std::move(eval_transform), rank, world, threads);
}

}  // namespace cnnscale
