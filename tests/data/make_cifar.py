# make_cifar.py — writes a small CIFAR-10 *binary* folder (data_batch_{1..5}.bin,
# test_batch.bin, batches.meta.txt; 3073-byte records: label byte, then the 32×32 R, G
# and B planes) from the real Fashion-MNIST IDX files, for the end-to-end tests.
# Each 28×28 image is padded by 2 black pixels on every side to 32×32 and becomes
# R = v, G = 3v/4, B = v/2 (three different channels, so per-channel statistics differ).
# Usage: make_cifar.py SRC_DIR OUT_DIR TRAIN_PER_BATCH TEST_COUNT
import gzip
import os
import sys

NAMES = ["t-shirt_top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle_boot"]


def idx(path, header):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return data[header:]


def main():
    src, out, per_batch, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    sets = {
        "train": (idx(f"{src}/train-images-idx3-ubyte.gz", 16), idx(f"{src}/train-labels-idx1-ubyte.gz", 8)),
        "test": (idx(f"{src}/t10k-images-idx3-ubyte.gz", 16), idx(f"{src}/t10k-labels-idx1-ubyte.gz", 8)),
    }

    def record(images, labels, i):
        img = images[i * 784:(i + 1) * 784]
        plane = bytearray(1024)
        for y in range(28):
            plane[(y + 2) * 32 + 2:(y + 2) * 32 + 30] = img[y * 28:(y + 1) * 28]
        r = bytes(plane)
        g = bytes(v * 3 // 4 for v in plane)
        b = bytes(v // 2 for v in plane)
        return bytes([labels[i]]) + r + g + b

    images, labels = sets["train"]
    for k in range(5):
        with open(f"{out}/data_batch_{k + 1}.bin", "wb") as f:
            for i in range(k * per_batch, (k + 1) * per_batch):
                f.write(record(images, labels, i))
    images, labels = sets["test"]
    with open(f"{out}/test_batch.bin", "wb") as f:
        for i in range(n_test):
            f.write(record(images, labels, i))
    with open(f"{out}/batches.meta.txt", "w") as f:
        f.write("\n".join(NAMES) + "\n\n")


main()
