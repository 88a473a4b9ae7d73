#!/usr/bin/env python3
"""Writes an IDX image set (MNIST, Fashion-MNIST) as an image folder: one PNG per image in a
folder per class, as Keras's image_dataset_from_directory reads them and distrain's
data.dataset = "image_folder" does. Standard library only (zlib for PNG).

  scripts/idx-to-image-folder.py IDX_FOLDER OUT_FOLDER [--limit N] [--names a,b,...] [--npy N]

IDX_FOLDER holds train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz) and the t10k
files; OUT_FOLDER/train/<class>/<index>.png and OUT_FOLDER/test/<class>/<index>.png are
written (at most N images of each split with --limit). --names names the class folders
(default: the class numbers); --npy N also writes OUT_FOLDER/test.npy, the first N test
images as a uint8 array (N, 28, 28), for `distrain predict`.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib


def read_idx(folder, stem):
    for name in (stem, stem + ".gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                return f.read()
    sys.exit(f"idx-to-image-folder: {os.path.join(folder, stem)}(.gz) not found")


def images_and_labels(folder, prefix):
    images = read_idx(folder, f"{prefix}-images-idx3-ubyte")
    labels = read_idx(folder, f"{prefix}-labels-idx1-ubyte")
    magic, count, rows, cols = struct.unpack(">IIII", images[:16])
    if magic != 2051 or struct.unpack(">II", labels[:8]) != (2049, count):
        sys.exit(f"idx-to-image-folder: {folder}: {prefix} files are not matching IDX image and label files")
    size = rows * cols
    return [(images[16 + i * size:16 + (i + 1) * size], labels[8 + i]) for i in range(count)], rows, cols


def png(pixels, rows, cols):
    raw = b"".join(b"\x00" + pixels[r * cols:(r + 1) * cols] for r in range(rows))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", cols, rows, 8, 0, 0, 0, 0)  # 8-bit grey
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("idx_folder")
    p.add_argument("out_folder")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--names", default="")
    p.add_argument("--npy", type=int, default=0)
    a = p.parse_args()
    names = a.names.split(",") if a.names else None
    for prefix, split in (("train", "train"), ("t10k", "test")):
        examples, rows, cols = images_and_labels(a.idx_folder, prefix)
        if a.limit:
            examples = examples[:a.limit]
        for i, (pixels, label) in enumerate(examples):
            folder = os.path.join(a.out_folder, split, names[label] if names else str(label))
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
                f.write(png(pixels, rows, cols))
        if split == "test" and a.npy:
            chosen = examples[:a.npy]
            header = f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({len(chosen)}, {rows}, {cols}), }}"
            header += " " * (63 - (10 + len(header)) % 64) + "\n"
            with open(os.path.join(a.out_folder, "test.npy"), "wb") as f:
                f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"".join(x for x, _ in chosen))
        print(f"{split}: {len(examples)} images of {rows} x {cols} in {os.path.join(a.out_folder, split)}")


if __name__ == "__main__":
    main()
