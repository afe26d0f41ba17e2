#!/usr/bin/env python3
"""Writes toy datasets in the formats of large images, with Python's
struct and zlib modules alone (no imaging library: an independent writer):

    python3 tools/bench/make_large_sets.py tiff  DIR [N] [SIZE]   # DIR/images/*.tif, DIR/masks/*.tif
    python3 tools/bench/make_large_sets.py nifti DIR [N] [SIZE] [DEPTH]  # DIR/{images,masks}/*.nii.gz
    python3 tools/bench/make_large_sets.py png   DIR [N] [SIZE]   # 8-bit RGB PNG images, gray masks

Every image shows a bright disc (class 1) and a dark square (class 2) on
a noisy background. TIFF images are 16-bit gray (values in 0..4095, as a
12-bit camera stores them), tiled 64x64, Deflate with the horizontal
predictor; masks are 8-bit palette TIFFs, striped, PackBits. NIfTI
volumes are int16 (CT-like, -1000..1000) with uint8 label volumes, 1 mm x
1 mm x 2.5 mm voxels, qform and sform set.
"""
import gzip
import os
import random
import struct
import sys
import zlib


def scene(i, h, w, z=0):
    rnd = random.Random(i * 1000 + z)
    cx, cy = w * (0.3 + 0.4 * rnd.random()), h * (0.3 + 0.4 * rnd.random())
    r = min(h, w) * (0.1 + 0.08 * rnd.random())
    sx, sy = int(w * 0.1 * (1 + rnd.random())), int(h * 0.1 * (1 + rnd.random()))
    side = int(min(h, w) * 0.2)
    inten, cls = [], []
    for y in range(h):
        for x in range(w):
            n = rnd.random()
            if (x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2 <= r * r:
                inten.append(0.75 + 0.2 * n)
                cls.append(1)
            elif sx <= x < sx + side and sy <= y < sy + side:
                inten.append(0.05 + 0.2 * n)
                cls.append(2)
            else:
                inten.append(0.35 + 0.25 * n)
                cls.append(0)
    return inten, cls


def tiff(entries, blocks):
    """A little-endian TIFF: the blocks (strips or tiles), then one IFD."""
    out = bytearray(b"II*\0\0\0\0\0")
    offsets, counts = [], []
    for b in blocks:
        offsets.append(len(out))
        counts.append(len(b))
        out += b
        if len(out) % 2:
            out += b"\0"
    entries = dict(entries)
    tiled = 322 in entries
    entries[324 if tiled else 273] = (4, offsets)
    entries[325 if tiled else 279] = (4, counts)
    ifd = len(out)
    struct.pack_into("<I", out, 4, ifd)
    tags = sorted(entries)
    extra = ifd + 2 + 12 * len(tags) + 4
    tail = bytearray()
    out += struct.pack("<H", len(tags))
    for tag in tags:
        typ, vals = entries[tag]
        fmt = "<" + ("H" if typ == 3 else "I") * len(vals)
        data = struct.pack(fmt, *vals)
        out += struct.pack("<HHI", tag, typ, len(vals))
        if len(data) <= 4:
            out += data.ljust(4, b"\0")
        else:
            out += struct.pack("<I", extra + len(tail))
            tail += data
    out += struct.pack("<I", 0) + tail
    return bytes(out)


def packbits(row):
    out = bytearray()
    i = 0
    while i < len(row):
        n = min(128, len(row) - i)
        out.append(n - 1)
        out += row[i:i + n]
        i += n
    return bytes(out)


def tiff16_tiled(vals, h, w, tile=64):
    blocks = []
    for ty in range(0, h, tile):
        for tx in range(0, w, tile):
            raw = bytearray()
            for y in range(ty, ty + tile):
                prev = 0
                for x in range(tx, tx + tile):
                    v = vals[y * w + x] if y < h and x < w else 0
                    raw += struct.pack("<H", (v - prev) & 0xFFFF)  # horizontal predictor
                    prev = v
            blocks.append(zlib.compress(bytes(raw)))
    return tiff({256: (4, [w]), 257: (4, [h]), 258: (3, [16]), 259: (3, [8]), 262: (3, [1]), 277: (3, [1]),
                 317: (3, [2]), 322: (4, [tile]), 323: (4, [tile])}, blocks)


def tiff8_palette(cls, h, w):
    colors = [(0, 0, 0), (255, 64, 64), (64, 64, 255)] + [(0, 0, 0)] * 253
    cmap = [c[0] * 257 for c in colors] + [c[1] * 257 for c in colors] + [c[2] * 257 for c in colors]
    rows = 16
    blocks = []
    for y0 in range(0, h, rows):
        b = bytearray()
        for y in range(y0, min(h, y0 + rows)):
            b += packbits(bytes(cls[y * w:(y + 1) * w]))
        blocks.append(bytes(b))
    return tiff({256: (4, [w]), 257: (4, [h]), 258: (3, [8]), 259: (3, [32773]), 262: (3, [3]), 277: (3, [1]),
                 278: (4, [rows]), 320: (3, cmap)}, blocks)


def nifti(dims, code, bits, letter, vals):
    e = "<"
    h = struct.pack(e + "i", 348) + b"\0" * 28 + struct.pack(e + "ihcc", 0, 0, b"r", b"\0")
    h += struct.pack(e + "8h", 3, dims[0], dims[1], dims[2], 1, 1, 1, 1)
    h += struct.pack(e + "3fhhhh", 0, 0, 0, 0, code, bits, 0)
    h += struct.pack(e + "8f", 1, 1.0, 1.0, 2.5, 1, 1, 1, 1)
    h += struct.pack(e + "fffhcc", 352, 1, 0, 0, b"\0", bytes([10]))
    h += struct.pack(e + "4fii", 0, 0, 0, 0, 0, 0) + b"toy volume".ljust(80, b"\0") + b"\0" * 24
    h += struct.pack(e + "hh6f", 1, 1, 0, 0, 0, -dims[0] / 2, -dims[1] / 2, 0)
    h += struct.pack(e + "12f", 1, 0, 0, -dims[0] / 2, 0, 1, 0, -dims[1] / 2, 0, 0, 2.5, 0)
    h += b"\0" * 16 + b"n+1\0"
    assert len(h) == 348
    return gzip.compress(h + b"\0" * 4 + struct.pack(e + letter * len(vals), *vals), mtime=0)


def png(rows, w, h, color):
    raw = b"".join(b"\0" + r for r in rows)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if color else 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def main():
    kind, root = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    os.makedirs(os.path.join(root, "masks"), exist_ok=True)
    for i in range(n):
        if kind == "tiff":
            inten, cls = scene(i, size, size)
            vals = [min(4095, int(v * 4095)) for v in inten]
            open(os.path.join(root, "images", "s%02d.tif" % i), "wb").write(tiff16_tiled(vals, size, size))
            open(os.path.join(root, "masks", "s%02d.tif" % i), "wb").write(tiff8_palette(cls, size, size))
        elif kind == "nifti":
            depth = int(sys.argv[5]) if len(sys.argv) > 5 else 8
            img, lab = [], []
            for z in range(depth):
                inten, cls = scene(i, size, size, z // 3)
                if z % 4 == 0:
                    cls = [0] * len(cls)  # some slices without foreground
                img += [int(v * 2000 - 1000) for v in inten]
                lab += cls
            open(os.path.join(root, "images", "vol%02d.nii.gz" % i), "wb").write(nifti((size, size, depth), 4, 16, "h", img))
            open(os.path.join(root, "masks", "vol%02d.nii.gz" % i), "wb").write(nifti((size, size, depth), 2, 8, "B", lab))
        elif kind == "png":
            inten, cls = scene(i, size, size)
            rows = [bytes(b for v in inten[y * size:(y + 1) * size] for b in (int(v * 255), int(v * 200) + 20, 255 - int(v * 255)))
                    for y in range(size)]
            open(os.path.join(root, "images", "s%02d.png" % i), "wb").write(png(rows, size, size, True))
            mrows = [bytes(cls[y * size:(y + 1) * size]) for y in range(size)]
            open(os.path.join(root, "masks", "s%02d.png" % i), "wb").write(png(mrows, size, size, False))
        else:
            sys.exit("kind must be tiff, nifti or png")


if __name__ == "__main__":
    main()
