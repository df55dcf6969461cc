"""CudaArray: a C-contiguous array in device memory that vaed_client
allocated itself (``Client.alloc_latent(..., device="cuda:N")``), the
"managed buffer".

It is plain cuMemAlloc memory in the device's primary context, exposed
through ``__cuda_array_interface__`` v3, so ``torch.as_tensor(a,
device="cuda")``, ``cupy.asarray(a)`` and :meth:`Client.decode` (as a latent
or as ``output=``) take it without a copy. Unlike a tensor of PyTorch's
caching allocator nothing else can free or reuse the memory while the
daemon has it registered. It is freed when this object and everything that
keeps it alive (a torch tensor made from it holds a reference; so does the
client while the allocation is registered, until
:meth:`Client.release_cuda`) are gone. Unrun on a GPU.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np


class CudaArray:
    """``shape`` elements of ``dtype`` at the start of a device allocation
    of the client library.

    Attributes: ``shape`` (tuple of ints), ``dtype`` (numpy dtype),
    ``nbytes``, ``device`` ("cuda:N", this process's ordinal),
    ``device_uuid`` ("GPU-..."), ``ptr`` (the device address)."""

    def __init__(self, buffer: Any, shape: Tuple[int, ...], dtype: np.dtype, ordinal: int):
        self._buffer = buffer  # vaed_client._core.CudaBuffer: frees the memory when collected
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.device = f"cuda:{ordinal}"

    @property
    def ptr(self) -> int:
        return int(self._buffer.ptr)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def device_uuid(self) -> str:
        return str(self._buffer.device_uuid)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        # stream None: no synchronisation needed, the zero fill finished
        # before allocate() returned; later writes are ordered by their writers.
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __repr__(self) -> str:
        return f"CudaArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"
