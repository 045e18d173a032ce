"""Numeric storage formats of checkpoint weights, in vectorized numpy: bfloat16 rounding, FP8
E4M3 ("e4m3fn": bias 7, no infinities, 0x7F/0xFF NaN, largest finite 448) encoding and decoding,
and DeepSeek's block FP8 quantization (one float32 `scale_inv` per block, value = e4m3 *
scale_inv).

Contracts:
- `bf16_bits` rounds float32 to the nearest bfloat16, ties to even; returns the uint16 bits.
- `e4m3_encode` rounds to the nearest E4M3 value, ties to even mantissa, saturating: finite
  values (and infinities) beyond +-448 become +-448; NaN becomes 0x7F with its sign bit.
- `quantize_blocks` scales each block so that its largest magnitude maps to 448 exactly
  (scale_inv = amax / 448; an all-zero block gets scale_inv 1), blocks at the right and bottom
  edges may be partial.
"""
import numpy as np

E4M3_MAX = 448.0
_MIN_NORMAL = np.float32(2.0 ** -6)   # smallest normal E4M3 magnitude
_SUBNORMAL_STEP_INV = np.float32(512.0)  # E4M3 subnormals are k * 2^-9, k = 0..7


def bf16_bits(x):
    """float32 array -> uint16 array of bfloat16 bits (round to nearest, ties to even).
    NaN inputs are not expected (random weights); they would round to some NaN or infinity."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_to_f32(bits):
    """uint16 bfloat16 bits -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def e4m3_encode(x):
    """float32 array -> uint8 E4M3 codes, round to nearest even, saturating to +-448."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    sign = ((x.view(np.uint32) >> np.uint32(24)) & np.uint32(0x80)).astype(np.uint8)
    nan = np.isnan(x)
    mag = np.minimum(np.abs(x), np.float32(E4M3_MAX))  # saturate (inf too); NaN stays NaN
    mag[nan] = 0.0
    bits = mag.view(np.uint32)
    # Normal range: keep 3 of float32's 23 mantissa bits, rounding half to even on the bits,
    # then move the exponent bias from 127 to 7 (a carry out of the mantissa bumps the exponent).
    rounded = bits + (np.uint32(0x7FFFF) + ((bits >> np.uint32(20)) & np.uint32(1)))
    normal = (rounded >> np.uint32(20)) - np.uint32((127 - 7) << 3)
    # Subnormal range: the code is the number of 2^-9 steps; rint rounds half to even, and
    # k = 8 is exactly the code of the smallest normal.
    subnormal = np.rint(mag * _SUBNORMAL_STEP_INV).astype(np.uint32)
    code = np.where(mag < _MIN_NORMAL, subnormal, normal).astype(np.uint8)
    code[nan] = 0x7F
    return code | sign


def e4m3_decode(codes):
    """uint8 E4M3 codes -> float32 values (0x7F and 0xFF decode to NaN)."""
    return e4m3_table()[np.asarray(codes, dtype=np.uint8)]


_TABLE = None


def e4m3_table():
    """float32[256]: the value of every E4M3 code, from the format's definition."""
    global _TABLE
    if _TABLE is None:
        values = np.empty(256, dtype=np.float32)
        for code in range(256):
            negative, exponent, mantissa = code >> 7, (code >> 3) & 0xF, code & 0x7
            if exponent == 0xF and mantissa == 0x7:
                value = float("nan")
            elif exponent == 0:
                value = mantissa / 8.0 * 2.0 ** -6
            else:
                value = (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)
            values[code] = -value if negative else value
        _TABLE = values
    return _TABLE


def n_blocks(n, block):
    """Number of blocks of size `block` covering `n` elements (the last may be partial)."""
    return (n + block - 1) // block


def block_amax(w, block_rows, block_cols):
    """Largest magnitude in each block of a 2-D array -> float32 [ceil(R/br), ceil(C/bc)]."""
    mag = np.abs(w)
    rows, cols = mag.shape
    per_col_block = np.maximum.reduceat(mag, np.arange(0, cols, block_cols), axis=1)
    return np.maximum.reduceat(per_col_block, np.arange(0, rows, block_rows), axis=0)


def quantize_blocks(w, block_rows=128, block_cols=128):
    """float32 [R, C] -> (uint8 E4M3 codes [R, C], float32 scale_inv [ceil(R/br), ceil(C/bc)])
    with w ~= e4m3_decode(codes) * scale_inv broadcast over each block."""
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    scale_inv = block_amax(w, block_rows, block_cols) / np.float32(E4M3_MAX)
    scale_inv[scale_inv == 0] = 1.0
    codes = np.empty((rows, cols), dtype=np.uint8)
    for i, start in enumerate(range(0, rows, block_rows)):
        row_scale = np.repeat(scale_inv[i], block_cols)[:cols]
        codes[start:start + block_rows] = e4m3_encode(w[start:start + block_rows] / row_scale)
    return codes, scale_inv


def dequantize_blocks(codes, scale_inv, block_rows=128, block_cols=128):
    """Inverse of quantize_blocks: float32 [R, C] = e4m3 value * its block's scale_inv."""
    rows, cols = codes.shape
    full = np.repeat(np.repeat(scale_inv, block_rows, axis=0)[:rows], block_cols, axis=1)[:, :cols]
    return e4m3_decode(codes) * full
