"""A minimal safetensors reader for examples and tests (numpy only).

Format (huggingface/safetensors, as ../shared/data/taef2/README.md §1
describes it): a little-endian uint64 N, N bytes of JSON mapping tensor
names to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
relative to the data buffer that follows), optional ``__metadata__``.
"""

from __future__ import annotations

import json
import mmap
import struct
from typing import Dict

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "F64": np.float64,
           "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "BOOL": np.bool_}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Every tensor of the file as a read-only numpy array viewing a private
    memory map of it (C-contiguous, the file's dtype and shape). Raises
    ValueError for a malformed file or an unsupported dtype (e.g. BF16)."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for a safetensors header")
    (header_bytes,) = struct.unpack("<Q", data[:8])
    if header_bytes > len(data) - 8:
        raise ValueError(f"{path}: header of {header_bytes} bytes runs past the file end")
    header = json.loads(bytes(data[8:8 + header_bytes]))
    base = 8 + header_bytes
    out: Dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor '{name}' has dtype {entry['dtype']}, not supported")
        begin, end = entry["data_offsets"]
        shape = tuple(int(d) for d in entry["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if base + end > len(data) or end - begin != count * np.dtype(dtype).itemsize:
            raise ValueError(f"{path}: tensor '{name}' data_offsets {entry['data_offsets']} do "
                             f"not match its shape {list(shape)} and the file size")
        out[name] = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin).reshape(shape)
    return out
