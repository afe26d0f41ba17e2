#!/usr/bin/env python3
"""Reads TensorBoard event files without TensorFlow, TensorBoard or the
protobuf package, so that memunet's writer is checked by a reader that
shares no code with it: TFRecord framing with CRC32C computed here, and the
Event/Summary/SessionLog messages decoded from the protobuf wire format by
hand, with TensorBoard's field numbers.

    python3 read_events.py DIR    (every events.out.tfevents.* file in DIR)

Prints JSON: {"files": [{"name", "events": [{"wall_time", "step",
"file_version" | "session_log": {"status", "msg"} | "values": [{"tag",
"simple_value" | "image": {"height", "width", "colorspace", "png_bytes"}}]}]}]}
in name order. Exits 1 naming the file and record whose checksum fails or
that is cut short.
"""
import json
import os
import struct
import sys


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        b = f.read()
    off, n = 0, 0
    while off < len(b):
        if len(b) - off < 12:
            raise ValueError(f"{path}: record {n} is cut short at byte {off}")
        (length,) = struct.unpack_from("<Q", b, off)
        (length_crc,) = struct.unpack_from("<I", b, off + 8)
        if masked(b[off:off + 8]) != length_crc:
            raise ValueError(f"{path}: record {n}: the length's CRC does not match")
        if len(b) - off - 12 < length + 4:
            raise ValueError(f"{path}: record {n} is cut short")
        data = b[off + 12:off + 12 + length]
        (data_crc,) = struct.unpack_from("<I", b, off + 12 + length)
        if masked(data) != data_crc:
            raise ValueError(f"{path}: record {n}: the data's CRC does not match")
        yield data
        off += 12 + length + 4
        n += 1


def varint(b, off):
    shift, v = 0, 0
    while True:
        byte = b[off]
        off += 1
        v |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return v, off
        shift += 7


def fields(b):
    """Yields (field number, wire type, value) of a message's fields."""
    off = 0
    while off < len(b):
        key, off = varint(b, off)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, off = varint(b, off)
        elif wt == 1:
            v, off = b[off:off + 8], off + 8
        elif wt == 2:
            n, off = varint(b, off)
            v, off = b[off:off + n], off + n
        elif wt == 5:
            v, off = b[off:off + 4], off + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def image(b):
    out = {}
    for num, _, v in fields(b):
        if num == 1:
            out["height"] = v
        elif num == 2:
            out["width"] = v
        elif num == 3:
            out["colorspace"] = v
        elif num == 4:
            if not v.startswith(b"\x89PNG\r\n\x1a\n"):
                raise ValueError("an image that is not a PNG")
            out["png_bytes"] = len(v)
    return out


def value(b):
    out = {}
    for num, _, v in fields(b):
        if num == 1:
            out["tag"] = v.decode()
        elif num == 2:
            (out["simple_value"],) = struct.unpack("<f", v)
        elif num == 4:
            out["image"] = image(v)
    return out


def event(b):
    out = {"wall_time": 0.0, "step": 0}
    for num, _, v in fields(b):
        if num == 1:
            (out["wall_time"],) = struct.unpack("<d", v)
        elif num == 2:
            out["step"] = signed64(v)
        elif num == 3:
            out["file_version"] = v.decode()
        elif num == 5:
            out["values"] = [value(x) for n, _, x in fields(v) if n == 1]
        elif num == 7:
            log = {"status": 0, "msg": ""}
            for n, _, x in fields(v):
                if n == 1:
                    log["status"] = x
                elif n == 3:
                    log["msg"] = x.decode()
            out["session_log"] = log
    return out


def main():
    folder = sys.argv[1]
    files = []
    for name in sorted(os.listdir(folder)):
        if "tfevents" not in name:
            continue
        try:
            events = [event(r) for r in records(os.path.join(folder, name))]
        except ValueError as e:
            print(e, file=sys.stderr)
            sys.exit(1)
        files.append({"name": name, "events": events})
    json.dump({"files": files}, sys.stdout)


if __name__ == "__main__":
    main()
