// h5util.cpp — see h5util.hpp.
#include "data/h5util.hpp"

#include <vector>

#include "util/error.hpp"

namespace cnnscale {

void h5_quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
herr_t collect(unsigned, const H5E_error2_t* e, void* data) {
  auto* v = static_cast<std::vector<std::string>*>(data);
  if (e->desc && *e->desc) v->push_back(e->desc);
  return 0;
}
}  // namespace

std::string h5_error_cause() {
  std::vector<std::string> descs;
  // H5E_WALK_UPWARD starts at the innermost (most specific) error.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &descs);
  H5Eclear2(H5E_DEFAULT);
  // A failed read/write of HDF5's file driver carries the OS's reason inside a long
  // line of internals ("..., errno = 28, error message = 'No space left on device',
  // ..., bytes actually written = 18446744073709551615, ..."): that reason is the cause.
  for (const auto& d : descs) {
    const std::string key = "error message = '";
    const size_t at = d.find(key);
    if (at == std::string::npos) continue;
    const size_t end = d.find('\'', at + key.size());
    if (end != std::string::npos && end > at + key.size()) return d.substr(at + key.size(), end - at - key.size());
  }
  std::string out;
  // The innermost one or two lines carry the cause ("truncated file: ...",
  // "Fletcher32 checksum error", "data pipeline read failed").
  for (size_t i = 0; i < descs.size() && i < 2; ++i) {
    if (!out.empty()) out += "; ";
    out += descs[i];
  }
  return out.empty() ? "unknown HDF5 error" : out;
}

hsize_t h5_stored_chunk_bytes(hid_t ds, unsigned mask) {
  H5Id dcpl = h5_plist(H5Dget_create_plist(ds));
  H5Id space = h5_space(H5Dget_space(ds));
  H5Id type = h5_type(H5Dget_type(ds));
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space) : -1;
  hsize_t chunk[H5S_MAX_RANK] = {0};
  if (!dcpl.valid() || !type.valid() || rank < 1 || rank > H5S_MAX_RANK || H5Pget_layout(dcpl) != H5D_CHUNKED ||
      H5Pget_chunk(dcpl, rank, chunk) != rank)
    return 0;
  const int nfilters = H5Pget_nfilters(dcpl);
  unsigned flags = 0, config = 0;
  size_t nelmts = 0;
  char name[64];
  const bool fletcher = nfilters == 1 && H5Pget_filter2(dcpl, 0, &flags, &nelmts, nullptr, sizeof name, name,
                                                        &config) == H5Z_FILTER_FLETCHER32;
  if (nfilters != 0 && !fletcher) return 0;
  hsize_t bytes = H5Tget_size(type);
  for (int i = 0; i < rank; ++i)
    if (__builtin_mul_overflow(bytes, chunk[i], &bytes)) return 0;
  return bytes + (fletcher && !(mask & 1u) ? 4 : 0);
}

std::string h5_layout_problem(hid_t ds, bool each_chunk) {
  H5Id dcpl = h5_plist(H5Dget_create_plist(ds));
  H5Id space = h5_space(H5Dget_space(ds));
  H5Id type = h5_type(H5Dget_type(ds));
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space) : -1;
  if (!dcpl.valid() || !type.valid() || rank < 0 || rank > H5S_MAX_RANK) {
    const std::string cause = h5_error_cause();
    return "its layout cannot be read (" + cause + ")";
  }
  hsize_t dims[H5S_MAX_RANK] = {0}, maxdims[H5S_MAX_RANK] = {0}, chunk[H5S_MAX_RANK] = {0};
  H5Sget_simple_extent_dims(space, dims, maxdims);
  const auto text = [rank](const hsize_t* d) {
    std::string t;
    for (int i = 0; i < rank; ++i)
      t += (i ? "x" : "") + (d[i] == H5S_UNLIMITED ? std::string("unlimited") : std::to_string(d[i]));
    return t.empty() ? std::string("a scalar") : t;
  };
  switch (H5Pget_layout(dcpl)) {
    case H5D_COMPACT: {
      const size_t elem = H5Tget_size(type);
      hsize_t bytes = elem;
      for (int i = 0; i < rank; ++i)
        if (__builtin_mul_overflow(bytes, dims[i], &bytes)) return "it is compact and larger than 2^64 bytes";
      const hsize_t stored = H5Dget_storage_size(ds);
      if (stored != bytes)
        return "it is compact with " + std::to_string(stored) + " bytes stored for " + text(dims) + " values of " +
               std::to_string(elem) + " bytes";
      return "";
    }
    case H5D_CHUNKED: break;
    case H5D_CONTIGUOUS: return "";
    default: return "its layout is not one HDF5 writes";
  }
  if (rank < 1 || H5Pget_chunk(dcpl, rank, chunk) != rank) return "it is chunked, but its chunk shape cannot be read";
  constexpr hsize_t kMaxChunks = hsize_t{1} << 20;
  hsize_t grid[H5S_MAX_RANK] = {0}, chunks = 1;
  for (int i = 0; i < rank; ++i) {
    if (chunk[i] == 0 || (maxdims[i] != H5S_UNLIMITED && chunk[i] > maxdims[i]))
      return "its chunks are " + text(chunk) + " but it is at most " + text(maxdims) + " (HDF5 never writes that)";
    grid[i] = dims[i] / chunk[i] + (dims[i] % chunk[i] != 0);
    if (__builtin_mul_overflow(chunks, grid[i], &chunks))
      return "its chunks of " + text(chunk) + " make more than 2^64 of them for " + text(dims) + " values";
  }
  // Sized one by one below (small datasets: /labels, /targets, /offsets, /shapes, a
  // checkpoint's): more chunks than that is no file prep or the checkpoint writer makes. Not
  // applied to /images and label maps (a user's --chunk 1 on a large shard is legitimate).
  if (each_chunk && chunks > kMaxChunks)
    return "its chunks of " + text(chunk) + " make more than 2^20 of them for " + text(dims) + " values";
  const hsize_t want = h5_stored_chunk_bytes(ds, 0), want_unfiltered = h5_stored_chunk_bytes(ds, 1);
  if (!each_chunk || want == 0) return "";  // gzip: sized only when inflated
  hsize_t at[H5S_MAX_RANK] = {0};
  for (hsize_t c = 0; c < chunks; ++c) {
    hsize_t rest = c;  // chunk c's first element, the last dimension fastest
    for (int i = rank - 1; i >= 0; --i) {
      at[i] = rest % grid[i] * chunk[i];
      rest /= grid[i];
    }
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(ds, at, &mask, &addr, &size) < 0) {
      const std::string cause = h5_error_cause();
      return "HDF5 cannot find its chunk " + std::to_string(c) + " (" + cause + ")";
    }
    const hsize_t w = mask & 1u ? want_unfiltered : want;
    if (addr != HADDR_UNDEF && size != w)
      return "its chunk " + std::to_string(c) + " of " + text(chunk) + " values stores " + std::to_string(size) +
             " bytes, not " + std::to_string(w);
  }
  return "";
}

H5Id h5_open_readonly(const std::string& path, std::string& cause) {
  h5_quiet();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    cause = h5_error_cause();
    return {};
  }
  return h5_file(f);
}

H5Id h5_sample_type(SampleType t) {
  switch (t) {
    case SampleType::u8: return h5_type(H5Tcopy(H5T_STD_U8LE));
    case SampleType::i16: return h5_type(H5Tcopy(H5T_STD_I16LE));
    case SampleType::f32: return h5_type(H5Tcopy(H5T_IEEE_F32LE));
    case SampleType::f16: {
      H5Id h = h5_type(H5Tcopy(H5T_IEEE_F32LE));
      if (H5Tset_fields(h, 15, 10, 5, 0, 10) < 0 || H5Tset_size(h, 2) < 0 || H5Tset_ebias(h, 15) < 0)
        internal_error("cannot make HDF5's float16 type");
      return h;
    }
  }
  internal_error("h5_sample_type: unknown type");
}

}  // namespace cnnscale
