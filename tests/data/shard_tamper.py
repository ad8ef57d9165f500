"""shard_tamper.py — what the data tests that edit a shard as an attacker would (with h5py)
share: after bytes of /images were rewritten (HDF5 recomputes each chunk's Fletcher32),
the shard's own list of chunk checksums, /chunk_addresses column 1, is made to agree, so
that only cnnscale's other checks can catch the edit."""


def refresh_chunk_checksums(f, path):
    """f: the shard open r+ with h5py (flushed); path: its file name."""
    im, t = f["images"], f["chunk_addresses"]
    rows = t[...]
    with open(path, "rb") as raw:  # the list's copy of each chunk's checksum, from the file
        for c in range(rows.shape[0]):
            info = im.id.get_chunk_info(c)
            raw.seek(info.byte_offset + info.size - 4)
            rows[c, 1] = int.from_bytes(raw.read(4), "little")
    t[...] = rows


def shard_digest(path):
    """The shard's digest as src/data/shard_digest.hpp defines it, computed here on its own
    (hashlib, h5py): SHA-256 of the tag, the sample count, the labels (int32), a ragged
    shard's /offsets (int64) and /shapes (int32), and per /images chunk its stored size
    (uint64), filter mask (uint32) and last 4 stored bytes (its Fletcher32)."""
    import hashlib
    import struct
    import h5py
    h = hashlib.sha256(b"cnnscale shard digest 1\0")
    with h5py.File(path, "r") as f, open(path, "rb") as raw:
        labels = f["labels"][...].astype("<i4")
        h.update(struct.pack("<q", len(labels)) + labels.tobytes())
        ragged = "offsets" in f
        h.update(bytes([ragged]))
        if ragged:
            h.update(f["offsets"][...].astype("<i8").tobytes() + f["shapes"][...].astype("<i4").tobytes())
        im = f["images"]
        rows = im.chunks[0]
        for c in range((im.shape[0] + rows - 1) // rows):
            info = im.id.get_chunk_info_by_coord((c * rows,) + (0,) * (im.ndim - 1))
            raw.seek(info.byte_offset + info.size - 4)
            h.update(struct.pack("<QI", info.size, info.filter_mask) + raw.read(4))
    return "sha256:" + h.hexdigest()


def rebind(directory):
    """Records every shard's present digest in DIRECTORY/dataset.json, as an attacker who
    rewrote shards and the data set's own record would: only the readers' checks beyond
    the digest (the chunk list's anchors, each sample's bytes) can then tell."""
    import json
    import os
    p = os.path.join(directory, "dataset.json")
    with open(p) as fh:
        j = json.load(fh)
    for split in j["splits"].values():
        for sh in split["shards"]:
            sh["digest"] = shard_digest(os.path.join(directory, sh["file"]))
    with open(p, "w") as fh:
        json.dump(j, fh, indent=2)
