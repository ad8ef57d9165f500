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
