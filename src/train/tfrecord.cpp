// tfrecord.cpp — see tfrecord.hpp.
#include "train/tfrecord.hpp"

#include <boost/crc.hpp>
#include <fstream>
#include <iterator>

#include "util/error.hpp"

namespace cnnscale::tfrecord {
namespace {

// CRC-32C (Castagnoli): polynomial 0x1EDC6F41, reflected in and out, init/xor 0xFFFFFFFF.
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t get_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  Crc32c c;
  c.process_bytes(data, n);
  return c.checksum();
}

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

uint32_t masked_crc32c(const void* data, size_t n) { return mask(crc32c(data, n)); }

std::string frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::vector<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '", path, "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    const auto where = [&] {
      return "record " + std::to_string(records.size() + 1) + " at byte " + std::to_string(at);
    };
    if (bytes.size() - at < 12) fail("'", path, "': ", where(), " is cut short (", bytes.size() - at, " bytes)");
    const uint64_t len = get_le(bytes, at, 8);
    if (get_le(bytes, at + 8, 4) != masked_crc32c(bytes.data() + at, 8))
      fail("'", path, "': ", where(), ": the length's CRC does not match");
    if (bytes.size() - at - 12 < len + 4) fail("'", path, "': ", where(), " is cut short (length ", len, ")");
    if (get_le(bytes, at + 12 + len, 4) != masked_crc32c(bytes.data() + at + 12, len))
      fail("'", path, "': ", where(), ": the data's CRC does not match");
    records.push_back(bytes.substr(at + 12, len));
    at += 16 + len;
  }
  return records;
}

}  // namespace cnnscale::tfrecord
