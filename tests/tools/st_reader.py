"""A small safetensors reader for tests, written from the format's specification and independent
of the checkpoint generator: 8-byte little-endian header length N, N bytes of JSON header
({name: {dtype, shape, data_offsets: [begin, end]}}, optional "__metadata__"), then the data,
offsets counted from the end of the header. Decoding uses only the formats' definitions."""
import json
import math
import struct

import numpy as np

ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


class SafetensorsFile:
    """The parsed header of one file (`raw_header`, `header`, `metadata`, `data_start`) and
    access to each tensor's bytes and decoded float values."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.blob = f.read()
        (n,) = struct.unpack("<Q", self.blob[:8])
        self.raw_header = self.blob[8:8 + n]
        self.data_start = 8 + n
        header = json.loads(self.raw_header.decode("utf-8"))
        self.metadata = header.pop("__metadata__", None)
        self.header = header

    def names(self):
        return list(self.header)

    def entry(self, name):
        return self.header[name]

    def raw(self, name):
        begin, end = self.header[name]["data_offsets"]
        return self.blob[self.data_start + begin:self.data_start + end]

    def values(self, name):
        """float32 values of a BF16/F32 tensor, or the uint8 codes of an F8_E4M3 one."""
        e = self.header[name]
        raw = self.raw(name)
        if e["dtype"] == "BF16":
            x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F32":
            x = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif e["dtype"] == "F8_E4M3":
            x = np.frombuffer(raw, dtype=np.uint8)
        else:
            raise ValueError(e["dtype"])
        return x.reshape(e["shape"])


def numel(shape):
    return math.prod(shape)


def e4m3_value(code):
    """The value of an E4M3 (e4m3fn) code from the definition: sign, 4 exponent bits with bias 7,
    3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 is NaN; no infinities."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8.0 * 2.0 ** -6
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3_VALUES = np.array([e4m3_value(c) for c in range(256)], dtype=np.float64)
