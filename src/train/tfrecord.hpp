// tfrecord.hpp — TFRecord framing, the container of TensorBoard's event files:
// each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of data          | uint32 masked CRC-32C of the data
// with CRC-32C the Castagnoli CRC (reflected polynomial 0x82F63B78, init and final
// xor 0xFFFFFFFF: crc32c("123456789") = 0xE3069283) and
//   masked(c) = ((c >> 15) | (c << 17)) + 0xA282EAD8   (mod 2^32),
// as TensorFlow's lib/io/record_writer and TensorBoard's readers define it. Readers
// check both CRCs: a record that fails either is dropped (TensorBoard stops reading the
// file there), which is why a writer must never leave a torn record behind.
// The CRC comes from Boost.CRC (crc_optimal with those parameters), not our own code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnnscale::tfrecord {

uint32_t crc32c(const void* data, size_t n);
uint32_t mask(uint32_t crc);  // masked(c) above
uint32_t masked_crc32c(const void* data, size_t n);

// The bytes of one record holding `data`.
std::string frame(const std::string& data);

// Every record's data in the file, in order, with both CRCs checked. Throws UserError
// naming the file, the record and the byte offset on a CRC mismatch or a record cut
// short (for tests and tools; TensorBoard has its own reader).
std::vector<std::string> read_file(const std::string& path);

}  // namespace cnnscale::tfrecord
