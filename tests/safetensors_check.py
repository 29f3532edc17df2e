#!/usr/bin/env python3
"""Independent reader of a safetensors file, for tests/test_safetensors.

Usage: safetensors_check.py FILE

Reads FILE with json + struct only (numpy is not needed), checks the layout
rules of the format, and prints one JSON object on stdout:
  {"header_len": N, "metadata": {...},
   "tensors": [{"name", "dtype", "shape", "nbytes", "sum"}, ...]}
with the tensors in data order and "sum" the exact sum of the elements
(math.fsum for floats, an integer for I64). Any violation prints a reason on
stderr and exits with status 1.
"""
import json
import math
import struct
import sys

FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8)}


def fail(msg):
    print("safetensors_check: " + msg, file=sys.stderr)
    sys.exit(1)


def no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            fail("duplicate key %r in the header" % key)
        obj[key] = value
    return obj


def main(argv):
    if len(argv) != 2:
        fail("usage: safetensors_check.py FILE")
    with open(argv[1], "rb") as fh:
        raw = fh.read()
    if len(raw) < 8:
        fail("%d bytes: no header length" % len(raw))
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        fail("header length %d beyond the end of the file" % hlen)
    try:
        text = raw[8:8 + hlen].decode("utf-8")
        header = json.loads(text, object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as err:
        fail("header is not UTF-8 JSON: %s" % err)
    if not isinstance(header, dict):
        fail("header is not a JSON object")
    data = raw[8 + hlen:]

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        fail("__metadata__ is not an object of strings")

    entries = []
    for name, info in header.items():
        if not isinstance(info, dict):
            fail("tensor %r is not an object" % name)
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in FORMATS:
            fail("tensor %r: dtype %r not handled here" % (name, dtype))
        if (not isinstance(shape, list) or len(shape) > 8
                or not all(type(d) is int and d >= 0 for d in shape)):
            fail("tensor %r: bad shape %r" % (name, shape))
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= len(data)):
            fail("tensor %r: bad data_offsets %r" % (name, offsets))
        numel = 1
        for d in shape:
            numel *= d
        code, size = FORMATS[dtype]
        if offsets[1] - offsets[0] != numel * size:
            fail("tensor %r: data_offsets %r do not hold shape %r of %s" % (name, offsets, shape, dtype))
        entries.append((offsets[0], offsets[1], name, dtype, shape, numel))

    entries.sort()
    pos = 0
    for begin, end, name, _, _, _ in entries:
        if begin != pos:
            fail("tensor %r starts at %d, expected %d (hole or overlap)" % (name, begin, pos))
        pos = end
    if pos != len(data):
        fail("%d bytes after the last tensor" % (len(data) - pos))

    tensors = []
    for begin, end, name, dtype, shape, numel in entries:
        code, _ = FORMATS[dtype]
        values = struct.unpack("<%d%s" % (numel, code), data[begin:end])
        total = math.fsum(values) if code in "fd" else sum(values)
        tensors.append({"name": name, "dtype": dtype, "shape": shape, "nbytes": end - begin, "sum": total})

    json.dump({"header_len": hlen, "metadata": metadata, "tensors": tensors}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
