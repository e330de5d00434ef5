"""The generator's random numbers: a counter-based hash written in plain integer SQL, the same bits on both engines.

Every draw of the generator is a uniform ``u(seed, day, index, stream, j)`` in [0, 1) with 53 random bits, computed
from the row's (day, index) and constants of (seed, stream, j). The arithmetic is 32-bit hashing carried out in
BIGINT: every value stays in [0, 2^32) and every product below 2^63, so neither Spark (ANSI mode raises on a
BIGINT overflow) nor DuckDB (which raises too) ever overflows, and both compute the same integers. No xxhash64
(Spark only), no floating-point hash.

Two 32-bit lanes, each a xorshift-multiply mixer from Wellons' hash prospector:
- lane 1, ``lowbias32``: x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16;
- lane 2: x ^= x >> 16; x *= 0x21f0aaad; x ^= x >> 15; x *= 0x735a2d97; x ^= x >> 15.
A multiplier at or above 2^31 (0x846ca68b) is applied as ``x * c = -(x * (2^32 - c)) mod 2^32``.

Row key of lane L: ``r_L = mix_L(mix_L(index ^ S_L) ^ day)`` with ``S_L`` from the seed; the draw of (stream, j):
``a = mix_1(r_1 ^ c_1)``, ``b = mix_2(r_2 ^ c_2)`` with ``c_L = mix_L(mix_L(T_L ^ stream) ^ j)``, ``T_L = mix_L(S_L ^ salt)`` (constants computed
here), and ``u = (a * 2^21 + (b >> 11)) / 2^53``. A 64-bit row key: two rows share all their draws with probability
2^-64. :func:`uniform_numpy` is the same function in numpy (the tests compare the engines with it).

The SQL is written as stages (``step_a``, ``step_b``, ``fin``) so that each stage references its input column by
name: a nested expression would repeat its input at every xorshift and grow exponentially.
"""
from __future__ import annotations

import numpy as np

M32 = 0xFFFFFFFF
TWO32 = 1 << 32
# (first multiplier, second multiplier, last shift) per lane
LANES = ((0x7FEB352D, 0x846CA68B, 16), (0x21F0AAAD, 0x735A2D97, 15))
_GOLDEN = 0x9E3779B9
_SALT = 0x85EBCA6B


def mix(x: int, lane: int) -> int:
    """One lane's 32-bit mixer on a Python int (constants)."""
    c1, c2, last = LANES[lane]
    x &= M32
    x ^= x >> 16
    x = (x * c1) & M32
    x ^= x >> 15
    x = (x * c2) & M32
    return x ^ (x >> last)


def seed_keys(seed: int) -> tuple[int, int]:
    """S_1, S_2: the seed (any non-negative integer) folded into one 32-bit key per lane."""
    out = []
    for lane in (0, 1):
        s = mix((lane + 1) * _GOLDEN, lane)
        v = int(seed)
        while True:  # 32 bits at a time, so every bit of a large seed counts
            s = mix(s ^ (v & M32), lane)
            v >>= 32
            if v == 0:
                break
        out.append(s)
    return out[0], out[1]


def stream_keys(seed: int, stream: int, j: int = 0) -> tuple[int, int]:
    """c_1, c_2 of draw (stream, j): from T_L = mix_L(S_L ^ salt), not S_L itself, so that no row key equals a
    stream key by construction (r ^ c = 0 would give a = 0)."""
    keys = seed_keys(seed)
    return tuple(mix(mix(mix(keys[lane] ^ _SALT, lane) ^ (int(stream) & M32), lane) ^ (int(j) & M32), lane)
                 for lane in (0, 1))


# ---- SQL (Spark dialect; DuckDB via sqlglot) --------------------------------------------------------------------
def _mul(x: str, c: int) -> str:
    """x * c mod 2^32 for x in [0, 2^32): one BIGINT product below 2^63."""
    if c < (1 << 31):
        return f"(({x}) * {c}) & {M32}"
    return f"({TWO32} - ((({x}) * {TWO32 - c}) & {M32})) & {M32}"


def step_a(x: str, lane: int) -> str:
    """x ^= x >> 16; x *= c1 (``x`` a column or a small expression: it appears twice)."""
    return _mul(f"({x}) ^ shiftright({x}, 16)", LANES[lane][0])


def step_b(y: str, lane: int) -> str:
    """y ^= y >> 15; y *= c2."""
    return _mul(f"{y} ^ shiftright({y}, 15)", LANES[lane][1])


def fin(z: str, lane: int) -> str:
    return f"({z} ^ shiftright({z}, {LANES[lane][2]}))"


def to_unit(a: str, b: str) -> str:
    """53 bits from two 32-bit lanes as a double in [0, 1) (exact: an integer below 2^53 over a power of 2)."""
    return f"(({a}) * 2097152 + shiftright({b}, 11)) / CAST(9007199254740992 AS DOUBLE)"


# ---- numpy reference --------------------------------------------------------------------------------------------
def _mix_np(x: np.ndarray, lane: int) -> np.ndarray:
    c1, c2, last = LANES[lane]
    x = x.astype(np.uint64) & np.uint64(M32)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(c1)) & np.uint64(M32)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(c2)) & np.uint64(M32)
    return x ^ (x >> np.uint64(last))


def row_keys_numpy(seed: int, day, index) -> tuple[np.ndarray, np.ndarray]:
    keys = seed_keys(seed)
    day = np.asarray(day, dtype=np.uint64)
    index = np.asarray(index, dtype=np.uint64)
    return tuple(_mix_np(_mix_np(index ^ np.uint64(keys[lane]), lane) ^ day, lane) for lane in (0, 1))


def uniform_numpy(seed: int, day, index, stream: int, j: int = 0) -> np.ndarray:
    """u(seed, day, index, stream, j) for arrays of (day, index): what both engines compute."""
    r1, r2 = row_keys_numpy(seed, day, index)
    c1, c2 = stream_keys(seed, stream, j)
    a = _mix_np(r1 ^ np.uint64(c1), 0)
    b = _mix_np(r2 ^ np.uint64(c2), 1)
    return ((a << np.uint64(21)) + (b >> np.uint64(11))).astype(np.float64) / 9007199254740992.0
