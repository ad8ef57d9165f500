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
