"""A minimal safetensors reader for examples and tests (numpy only).

Format (huggingface/safetensors, as ../shared/data/taef2/README.md §1
describes it): a little-endian uint64 N, N bytes of JSON mapping tensor
names to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
relative to the data buffer that follows), optional ``__metadata__``.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Any, Dict, Union

import numpy as np

__all__ = ["read_safetensors"]

# safetensors dtype -> numpy dtype, little-endian as the format stores them.
# BF16 and the F8 types have no numpy dtype and are refused.
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2",
           "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


def _non_negative_ints(value: Any, length: Union[int, None] = None) -> bool:
    return (isinstance(value, list) and (length is None or len(value) == length)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value))


def read_safetensors(path: Union[str, "os.PathLike[str]"]) -> Dict[str, np.ndarray]:
    """Reads every tensor of a safetensors file into numpy arrays, by name.

    Returns a dict ``{tensor name: numpy.ndarray}`` in the file's order; the
    ``__metadata__`` entry (free-form strings) is skipped. Each array has the
    tensor's shape (``[]`` gives a 0-d array, a 0 in the shape an empty
    array), is C-contiguous, and has the numpy dtype of the tensor's dtype,
    little-endian as the file stores it: F64, F32, F16 -> float64, float32,
    float16; I64, I32, I16, I8 -> int64 ... int8; U64, U32, U16, U8 ->
    uint64 ... uint8; BOOL -> bool. An H3 golden case, for example, gives
    ``{"latent": float32 [1, 128, T, h, w], "frames_u8": uint8 [...], ...}``.

    Memory and lifetime: nothing is read up front. All arrays view one
    private (copy-on-write) memory map of the file, as
    ``numpy.load(path, mmap_mode="c")`` does: a page is read from the file
    (the page cache, shared with other readers) when first touched. The
    arrays are *writable*, as numpy.load's are, but a write copies only the
    page it touches into this process's memory and never reaches the file;
    so a multi-GB weight file costs no second copy unless it is all
    written. The map lives as long as any of the arrays (or a view of one);
    the file is closed on return and may then be deleted or replaced by a
    rename. Do not write into or truncate the file itself while arrays are
    alive: pages not yet copied may then show the new bytes, and touching a
    page past a truncation kills the process with SIGBUS. ``array.copy()``
    gives an array independent of the file. (Under strict overcommit,
    ``vm.overcommit_memory=2``, the kernel reserves the file's size for the
    writable map.)

    Raises OSError (FileNotFoundError, PermissionError, IsADirectoryError,
    ...) when the file cannot be opened or mapped, and ValueError naming the
    file (and the tensor) when it is not a safetensors file this reader
    takes: shorter than the 8-byte header length, a header that runs past
    the end of the file or is not a JSON object, an entry without a dtype,
    shape or data_offsets, a dtype numpy lacks (BF16, F8_*), or
    data_offsets that do not match the shape and dtype or lie outside the
    file.
    """
    name_of_file = os.fspath(path)
    with open(name_of_file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:  # mmap refuses an empty file with an error that names no file
            raise ValueError(f"{name_of_file}: {size} bytes, too short for a safetensors file "
                             "(it starts with an 8-byte header length)")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    (header_bytes,) = struct.unpack("<Q", data[:8])
    if header_bytes > len(data) - 8:
        raise ValueError(f"{name_of_file}: header of {header_bytes} bytes runs past the file end "
                         f"({len(data)} bytes); not a safetensors file?")
    try:
        header = json.loads(bytes(data[8:8 + header_bytes]))
    except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"{name_of_file}: the safetensors header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{name_of_file}: the safetensors header is a JSON "
                         f"{type(header).__name__}, not an object")
    base = 8 + header_bytes
    out: Dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        where = f"{name_of_file}: tensor '{name}'"
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise ValueError(f"{where}: entry {entry!r} needs dtype, shape and data_offsets")
        dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype_name not in _DTYPES:
            raise ValueError(f"{where} has dtype {dtype_name}, not supported (supported: "
                             f"{', '.join(_DTYPES)})")
        if not _non_negative_ints(shape):
            raise ValueError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if not _non_negative_ints(offsets, 2) or offsets[0] > offsets[1]:
            raise ValueError(f"{where}: data_offsets {offsets!r} are not [begin, end] with "
                             "0 <= begin <= end")
        dtype = np.dtype(_DTYPES[dtype_name])
        begin, end = offsets
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if base + end > len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{where}: data_offsets {offsets} do not match its shape "
                             f"{list(shape)}, dtype {dtype_name} and the file size "
                             f"({len(data)} bytes)")
        out[name] = np.frombuffer(data, dtype=dtype, count=count,
                                  offset=base + begin).reshape(shape)
    return out
