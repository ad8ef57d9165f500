// ckpt_diff — compares the /model datasets of two cnnscale checkpoints.
// Prints one line: "params N identical B max_abs X max_rel_norm Y" where max_rel_norm
// is the largest ||a-b|| / ||b|| over parameters. Exit 0 when both files read, 1 when
// they cannot be compared (different names or shapes, unreadable file).
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Collected {
  std::vector<std::string> names;
};

herr_t collect(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<Collected*>(data)->names.push_back(name);
  return 0;
}

bool read_all(hid_t f, const std::string& name, std::vector<float>& out) {
  hid_t d = H5Dopen2(f, ("model/" + name).c_str(), H5P_DEFAULT);
  if (d < 0) return false;
  hid_t s = H5Dget_space(d);
  out.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(s)));
  bool ok = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0;
  H5Sclose(s);
  H5Dclose(d);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ckpt_diff A.h5 B.h5\n");
    return 1;
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t a = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (a < 0 || b < 0) {
    std::fprintf(stderr, "ckpt_diff: cannot open %s\n", a < 0 ? argv[1] : argv[2]);
    return 1;
  }
  Collected ca, cb;
  hid_t ga = H5Gopen2(a, "model", H5P_DEFAULT), gb = H5Gopen2(b, "model", H5P_DEFAULT);
  H5Literate(ga, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &ca);
  H5Literate(gb, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &cb);
  if (ca.names != cb.names || ca.names.empty()) {
    std::fprintf(stderr, "ckpt_diff: parameter names differ\n");
    return 1;
  }
  bool identical = true;
  double max_abs = 0, max_rel = 0;
  for (const auto& n : ca.names) {
    std::vector<float> x, y;
    if (!read_all(a, n, x) || !read_all(b, n, y) || x.size() != y.size()) {
      std::fprintf(stderr, "ckpt_diff: cannot compare %s\n", n.c_str());
      return 1;
    }
    double diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) identical = false;
      const double d = static_cast<double>(x[i]) - y[i];
      diff2 += d * d;
      norm2 += static_cast<double>(y[i]) * y[i];
      max_abs = std::fmax(max_abs, std::fabs(d));
    }
    if (norm2 > 0) max_rel = std::fmax(max_rel, std::sqrt(diff2 / norm2));
  }
  std::printf("params %zu identical %d max_abs %.3e max_rel_norm %.3e\n", ca.names.size(), identical ? 1 : 0,
              max_abs, max_rel);
  H5Gclose(ga);
  H5Gclose(gb);
  H5Fclose(a);
  H5Fclose(b);
  return 0;
}
