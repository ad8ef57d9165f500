// fixture_tool.cpp — makes and damages HDF5 files for tests/data/prep_errors.sh:
//   fixture_tool write FILE N N_TEST CLASSES [BAD_LABEL_AT]   (samples 1×8×8)
//   fixture_tool chunk-offset FILE DATASET CHUNK              (prints the file offset)
//   fixture_tool set-label SHARD INDEX VALUE
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/fixture.hpp"

using namespace cnnscale::test;

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "write" && (argc == 6 || argc == 7)) {
    write_fixture(argv[2], std::atoll(argv[3]), std::atoll(argv[4]), {1, 8, 8}, std::atoi(argv[5]),
                  argc == 7 ? std::atoll(argv[6]) : -1);
    return 0;
  }
  if (cmd == "chunk-offset" && argc == 5) {
    std::printf("%lld\n", static_cast<long long>(chunk_file_offset(argv[2], argv[3], std::atoi(argv[4]))));
    return 0;
  }
  if (cmd == "set-label" && argc == 5) {
    set_shard_label(argv[2], std::atoll(argv[3]), std::atoi(argv[4]));
    return 0;
  }
  std::fprintf(stderr, "usage: fixture_tool write|chunk-offset|set-label ...\n");
  return 2;
}
