// shard_digest.hpp — a shard's digest: what binds a shard file to the dataset.json that lists it
// (issue 48 item 6).
//
// Without it, a byte copy of shard 0 put in place of shard 1, another data set's shard 1, or
// one file listed twice passed `prep --verify` ("all checksums match": each chunk carries its
// own Fletcher32, which a copy carries along) and trained. prep records each shard's digest
// in dataset.json ("digest": "sha256:…"), load_dataset() recomputes it at every open (train,
// data-bench, --verify) and refuses a shard whose digest differs.
//
// The digest is SHA-256 (OpenSSL's libcrypto, already the rendezvous token's) over the
// shard's identity, all of it read cheaply at open: its sample count, its labels (int32; a
// regression shard: its float targets; a segmentation shard: its label maps' chunk checksums),
// a ragged shard's /offsets and /shapes, and per /images chunk in chunk order its stored
// size, its filter mask and its last 4 stored bytes — the chunk's Fletcher32, the last
// filter of every shard prep writes, so it covers the stored bytes (compressed or not).
// The chunks are found with HDF5's index (H5Dget_chunk_info_by_coord) and 4 bytes of each
// are read with pread(): 940 chunks for Fashion-MNIST's train split, no pixel read. The
// readers then hold every chunk to its stored Fletcher32 (HDF5's filter, or the direct
// reader against the shard's /chunk_addresses list, whose rows are anchored to HDF5's
// index), so the pixels trained on are the ones the digest names.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>

namespace cnnscale {

// "sha256:" + 64 hex digits. `images`: the shard's open /images (chunked along its first
// dimension only, as prep writes it). `offsets` (samples + 1) and `shapes` (samples × 3):
// a ragged shard's, else null. Caller holds hdf5_mutex(). Throws UserError naming `path`
// when the chunks cannot be found or read.
// A regression shard's targets (samples × k floats) stand in for the labels (labels null);
// a segmentation shard's open /labels (label_maps; labels null) is covered as /images is, by
// its chunks' checksums (the maps are not read: they may be larger than memory).
std::string shard_digest(const std::string& path, hid_t images, int64_t samples, const int32_t* labels,
                         const int64_t* offsets, const int32_t* shapes, const float* targets = nullptr, int k = 0,
                         hid_t label_maps = -1);

}  // namespace cnnscale
