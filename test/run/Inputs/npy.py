#!/usr/bin/env python3
"""Writes and reads small .npy files for the run tests without numpy (python3-numpy is not
installed here). Write: npy.py write OUT.npy DTYPE SHAPE VALUE...   (SHAPE like 4,2 or "" for a
scalar; DTYPE f32 f64 i32 i64 u8 bool). Read: npy.py read IN.npy prints "DTYPE[SHAPE] v v ...".
Also: npy.py arange OUT.npy DTYPE SHAPE START STEP fills the shape with START, START+STEP, ...
"""
import ast
import struct
import sys

CODES = {"f32": ("<f4", "f"), "f64": ("<f8", "d"), "i32": ("<i4", "i"), "i64": ("<i8", "q"),
         "u8": ("|u1", "B"), "bool": ("|b1", "?")}


def parse_shape(text):
    return tuple(int(d) for d in text.split(",") if d != "")


def convert(dtype, value):
    if dtype in ("f32", "f64"):
        return float(value)
    if dtype == "bool":
        return value in ("1", "true", "True")
    return int(value)


def write(path, dtype, shape, values):
    count = 1
    for d in shape:
        count *= d
    if len(values) != count:
        sys.exit(f"npy.py: shape {shape} needs {count} values, got {len(values)}")
    descr, code = CODES[dtype]
    shape_text = "(" + "".join(f"{d}, " for d in shape)[:-2] + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<" + code * count, *[convert(dtype, v) for v in values]))


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    major = data[6]
    length_size = 2 if major == 1 else 4
    (header_len,) = struct.unpack("<H" if major == 1 else "<I", data[8:8 + length_size])
    start = 8 + length_size
    header = ast.literal_eval(data[start:start + header_len].decode("latin1"))
    dtype = next(k for k, (descr, _) in CODES.items() if descr == header["descr"])
    shape = header["shape"]
    count = 1
    for d in shape:
        count *= d
    code = CODES[dtype][1]
    values = struct.unpack("<" + code * count, data[start + header_len:start + header_len + struct.calcsize(code) * count])
    text = " ".join(("true" if v else "false") if dtype == "bool" else repr(v) for v in values)
    print(f"{dtype}[{', '.join(str(d) for d in shape)}] {text}".rstrip())


def main(argv):
    if len(argv) >= 4 and argv[1] == "write":
        write(argv[2], argv[3], parse_shape(argv[4]) if len(argv) > 4 else (), argv[5:])
    elif len(argv) == 7 and argv[1] == "arange":
        shape = parse_shape(argv[4])
        count = 1
        for d in shape:
            count *= d
        start, step = float(argv[5]), float(argv[6])
        write(argv[2], argv[3], shape, [repr(start + i * step) if argv[3] in ("f32", "f64") else str(int(start + i * step)) for i in range(count)])
    elif len(argv) == 3 and argv[1] == "read":
        read(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
