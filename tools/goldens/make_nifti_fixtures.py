#!/usr/bin/env python3
"""Writes the NIfTI-1 fixtures of data/testdata/nifti with Python's struct
and gzip modules alone, from nifti1.h's field list: a writer that shares
nothing with memunet's reader, which TestNIfTIFixtures holds to them.

    python3 tools/goldens/make_nifti_fixtures.py data/testdata/nifti

Every volume's voxel (x, y, z) holds value(kind, x, y, z) below, stored
as its datatype (scl_slope/scl_inter given where noted); TestNIfTIFixtures
computes the same values.
"""
import gzip
import os
import struct
import sys

DT = {  # datatype code, struct letter, bits
    "uint8": (2, "B", 8),
    "int16": (4, "h", 16),
    "int32": (8, "i", 32),
    "float32": (16, "f", 32),
    "uint16": (512, "H", 16),
}


def value(kind, x, y, z):
    v = (x * 7 + y * 13 + z * 29) % 97
    if kind == "uint8":
        return v
    if kind == "int16":
        return v * 300 - 14000
    if kind == "uint16":
        return v * 600 + 7
    if kind == "int32":
        return v * 100000 - 4000000
    if kind == "float32":
        return v / 4.0 - 10.25
    if kind == "label":
        return (x // 3 + y // 4 + z) % 3
    raise ValueError(kind)


def header(endian, dims, dtype, pixdim, slope=0.0, inter=0.0, vox_offset=352.0):
    code, _, bits = DT[dtype]
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    h = b""
    h += struct.pack(endian + "i", 348)          # sizeof_hdr
    h += b"\0" * 10 + b"\0" * 18                 # data_type, db_name
    h += struct.pack(endian + "ihcc", 0, 0, b"r", b"\0")  # extents, session_error, regular, dim_info
    h += struct.pack(endian + "8h", *dim)        # dim
    h += struct.pack(endian + "3f", 0, 0, 0)     # intent_p1..3
    h += struct.pack(endian + "hhhh", 0, code, bits, 0)  # intent_code, datatype, bitpix, slice_start
    h += struct.pack(endian + "8f", 1.0, *pixdim, *([1.0] * (7 - len(pixdim))))  # pixdim (qfac 1)
    h += struct.pack(endian + "fff", vox_offset, slope, inter)
    h += struct.pack(endian + "hcc", 0, b"\0", bytes([2 | 8]))  # slice_end, slice_code, xyzt_units mm, s
    h += struct.pack(endian + "4f", 0, 0, 0, 0)  # cal_max, cal_min, slice_duration, toffset
    h += struct.pack(endian + "ii", 0, 0)        # glmax, glmin
    h += b"fixture".ljust(80, b"\0") + b"\0" * 24  # descrip, aux_file
    h += struct.pack(endian + "hh", 1, 2)        # qform_code scanner, sform_code aligned
    h += struct.pack(endian + "6f", 0.0, 0.0, 0.70710677, -12.5, 30.25, 4.0)  # quatern_b,c,d, qoffset_x,y,z
    h += struct.pack(endian + "4f", pixdim[0], 0, 0, -12.5)  # srow_x
    h += struct.pack(endian + "4f", 0, pixdim[1], 0, 30.25)  # srow_y
    h += struct.pack(endian + "4f", 0, 0, pixdim[2] if len(pixdim) > 2 else 1, 4.0)  # srow_z
    h += b"\0" * 16 + b"n+1\0"                   # intent_name, magic
    assert len(h) == 348, len(h)
    return h


def volume(endian, dims, dtype, kind, pixdim, slope=0.0, inter=0.0, extension=b""):
    vox_offset = 352 + len(extension)
    out = header(endian, dims, dtype, pixdim, slope, inter, vox_offset)
    out += (b"\1\0\0\0" if extension else b"\0\0\0\0") + extension
    _, letter, _ = DT[dtype]
    nx, ny = dims[0], dims[1]
    nz = dims[2] if len(dims) > 2 else 1
    vals = []
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                v = value(kind, x, y, z)
                if slope:
                    v = round((v - inter) / slope)
                vals.append(v)
    out += struct.pack(endian + letter * len(vals), *vals)
    return out


def main(dirname):
    os.makedirs(dirname, exist_ok=True)
    dims = (7, 6, 5)
    pix = (0.75, 0.8, 2.5)
    ext = struct.pack("<ii", 16, 0) + b"8 bytes!"  # esize 16, ecode 0, data
    files = {
        "uint8.nii": volume("<", dims, "uint8", "uint8", pix),
        "int16.nii.gz": volume("<", dims, "int16", "int16", pix),
        "uint16_be.nii": volume(">", dims, "uint16", "uint16", pix),
        "int32.nii.gz": volume("<", dims, "int32", "int32", pix),
        "float32_ext.nii.gz": volume("<", dims, "float32", "float32", pix, extension=ext),
        "int16_scaled.nii": volume("<", dims, "int16", "int16", pix, slope=2.0, inter=-6.0),
        "label.nii.gz": volume("<", dims, "uint8", "label", pix),
    }
    for name, data in files.items():
        path = os.path.join(dirname, name)
        if name.endswith(".gz"):
            # mtime 0: the same bytes on every run
            with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as z:
                z.write(data)
        else:
            with open(path, "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/testdata/nifti")
