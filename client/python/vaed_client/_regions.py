"""Shared-memory regions of vaed_client: the :class:`SharedRegion` objects
users see, the sweep of segments left by killed workers, and
:class:`ClientRegions`, the book a Client keeps of its regions, including
the ones it manages itself (staging copies of latents, the output region).

Memory model (DESIGN.md §2): latents and decoded outputs never travel on
the control socket. They live in POSIX shared-memory segments that this
process creates and registers with the daemon once; the daemon maps them
and reads and writes in place. CUDA arrays stay where they are: their
allocation is registered once by CUDA IPC handle (:class:`CudaRegistration`)
and the daemon reads and writes it on its GPU.
"""

from __future__ import annotations

import collections
import os
import re
import stat
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _core
from .errors import DaemonUnavailable, ValidationError, VaedError

# Byte alignment of every tensor the client places in a region (a cache
# line; also enough for every dtype).
ALIGN = 64

# A managed (staging / output) region larger than this and 4x what a
# request needs is replaced by a smaller one.
_KEEP_BYTES = 64 << 20

_SEGMENT_NAME = re.compile(r"^vaed-(\d+)-\d+-[0-9a-f]+$")


def align(n: int) -> int:
    """``n`` rounded up to a multiple of ALIGN."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


def sweep_stale_segments(directory: str = "/dev/shm") -> List[str]:
    """Unlinks this user's client segments (``vaed-<pid>-<n>-<hex>``, the
    names the client library gives them) whose creating process is gone:
    what a worker killed by SIGKILL or an unhandled SIGTERM leaves behind.
    Segments of live processes, of other users and other names are never
    touched. Returns the names removed. :class:`Client` runs it when it
    connects unless ``sweep_stale=False`` (use that when processes of this
    uid in another PID namespace share this /dev/shm)."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    uid = os.getuid()
    for name in names:
        m = _SEGMENT_NAME.match(name)
        if m is None:
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if st.st_uid != uid or not stat.S_ISREG(st.st_mode):
                continue
            os.kill(int(m.group(1)), 0)  # alive (or not ours to signal): keep
        except ProcessLookupError:
            try:
                os.unlink(path)
                removed.append(name)
            except OSError:
                pass
        except (OSError, OverflowError, ValueError):
            continue
    return removed


class SharedRegion:
    """A POSIX shared-memory segment this process owns, registered with the
    daemon (host memory, zero-filled at creation).

    ``nbytes`` is the size in bytes, ``name`` the shm name (no leading
    ``/``), ``region_id`` the id the daemon gave it (stable across
    reconnects: the client re-registers the segment with a restarted
    daemon), ``registered`` False once it was unregistered or its Client
    closed. The segment is unlinked when the last reference to it goes:
    numpy views made by :meth:`ndarray` keep it mapped.
    """

    def __init__(self, core_region: "_core.Region", region_id: int) -> None:
        self._core = core_region
        self.region_id = region_id
        self.registered = True

    @property
    def nbytes(self) -> int:
        return self._core.nbytes

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def address(self) -> int:
        """Virtual address of the first byte in this process."""
        return self._core.address

    def ndarray(self, shape: Sequence[int], dtype: Any = np.float32, offset: int = 0) -> np.ndarray:
        """A C-contiguous numpy view of ``shape`` elements of ``dtype`` starting
        ``offset`` bytes into the region (no copy; writes go to the region).
        Raises ValidationError (``out_of_range``) when it does not fit."""
        dt = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize if shape else dt.itemsize
        if offset < 0 or offset + nbytes > self.nbytes:
            raise ValidationError(
                f"region '{self.name}': {nbytes} bytes at offset {offset} do not fit in its "
                f"{self.nbytes} bytes", code=4, code_name="out_of_range")
        return np.ndarray(shape, dtype=dt, buffer=self._core, offset=offset)

    def offset_of(self, array: np.ndarray) -> Optional[int]:
        """Byte offset of ``array``'s data in this region when the whole
        array lies inside it and is C-contiguous; else None."""
        if not array.flags.c_contiguous:
            return None
        start = array.__array_interface__["data"][0]
        if start < self.address or start + array.nbytes > self.address + self.nbytes:
            return None
        return start - self.address

    def __repr__(self) -> str:
        return f"SharedRegion(id={self.region_id}, name='{self.name}', nbytes={self.nbytes})"


class CudaRegistration:
    """A CUDA allocation registered with the daemon (the whole cudaMalloc
    block, as CUDA IPC shares it): ``region_id``, ``base`` (device address
    of its first byte), ``nbytes``, ``device_uuid``. ``owners`` holds the
    caller's objects whose memory lies in it (the first one registered it),
    so the allocation cannot be freed or handed to another tensor by a
    caching allocator while the daemon may write it; they are dropped when
    the registration ends (:meth:`Client.release_cuda`, :meth:`Client.close`)."""

    def __init__(self, info: Dict[str, Any], ptr: int, owner: Tuple[Any, ...]) -> None:
        self.region_id = int(info["region_id"])
        self.base = ptr - int(info["offset_bytes"])
        self.nbytes = int(info["size_bytes"])
        self.device_uuid = str(info["device_uuid"])
        self.owners: List[Tuple[Any, ...]] = [owner]

    def offset_of(self, ptr: int, nbytes: int) -> Optional[int]:
        """Byte offset of [ptr, ptr + nbytes) in this allocation; None when
        it does not lie wholly inside."""
        if ptr < self.base or ptr + nbytes > self.base + self.nbytes:
            return None
        return ptr - self.base

    def __repr__(self) -> str:
        return (f"CudaRegistration(id={self.region_id}, base=0x{self.base:x}, "
                f"nbytes={self.nbytes}, device='{self.device_uuid}')")


class ClientRegions:
    """The regions one Client registered, by id, and those it manages for
    its decodes: one staging region per latent field (copies of latents
    that are not in a region of the client), one output region, and
    regions to unregister at the next call.

    Managed regions are never read in place, whatever array lies in them:
    the output region is rewritten by the very decode, a staging region by
    the other latent's copy, and a retired one may still be written by an
    abandoned decode. Not thread-safe: the Client calls it under its lock,
    passing its ``_core.Client`` to the calls that talk to the daemon.
    """

    def __init__(self) -> None:
        self.by_id: Dict[int, SharedRegion] = {}
        self.staging: Dict[str, SharedRegion] = {}
        self.output: Optional[SharedRegion] = None
        # Region ids to unregister at the next call: alloc_latent arrays that
        # were collected (appended by finalizers) and retired managed regions.
        self.pending_free: Deque[int] = collections.deque()
        # Ids of the managed regions (staging, output, retired).
        self.managed: set = set()
        # Registered CUDA allocations, by allocation base address.
        self.cuda: Dict[int, CudaRegistration] = {}

    def register(self, core: "_core.Client", nbytes: int) -> SharedRegion:
        """Creates a region of ``nbytes`` (> 0) bytes and registers it."""
        core_region = _core.Region(int(nbytes))
        region_id = core.register_region(core_region)
        region = SharedRegion(core_region, region_id)
        self.by_id[region_id] = region
        return region

    def unregister(self, core: "_core.Client", region: SharedRegion) -> None:
        """Forgets ``region`` (also as a managed region) and unregisters it
        with the daemon; nothing for a region this book does not hold.
        Returns once the daemon acknowledged, which it does only after the
        decodes still using the region ended (up to the request timeout):
        only then may its memory be reused. Forgotten here first, so a
        region whose acknowledgement did not come (raises) is never placed
        again."""
        if self.by_id.pop(region.region_id, None) is None:
            return
        region.registered = False
        for key, staged in list(self.staging.items()):
            if staged is region:
                del self.staging[key]
        if self.output is region:
            self.output = None
        self.managed.discard(region.region_id)
        core.unregister_region(region.region_id)

    def free_pending(self, core: "_core.Client") -> None:
        """Unregisters the regions of collected alloc_latent arrays and of
        retired managed regions. They are forgotten even when the daemon
        cannot be told (it then drops them with the client, or once the
        decodes using them end). A retired region of a decode that still
        runs holds this call until that decode ends (see unregister)."""
        while self.pending_free:
            region = self.by_id.get(self.pending_free.popleft())
            if region is not None:
                try:
                    self.unregister(core, region)
                except DaemonUnavailable:
                    # No acknowledgement within the timeout: the rest waits
                    # for the next call rather than for a timeout each.
                    return
                except VaedError:
                    pass

    def find(self, array: np.ndarray) -> Optional[Tuple[SharedRegion, int]]:
        """The region ``array`` lies in (whole and C-contiguous) and its byte
        offset there; None when it lies in none of them."""
        for region in self.by_id.values():
            offset = region.offset_of(array)
            if offset is not None:
                return region, offset
        return None

    def place_input(self, core: "_core.Client", array: np.ndarray, field_name: str,
                    dtype: str) -> Tuple[Tuple, bool]:
        """(region_id, offset, dtype, shape) of a latent, and whether it is
        used in place. Copies it into the field's staging region otherwise."""
        shape = [int(d) for d in array.shape]
        found = self.find(array)
        if found is not None and found[0].region_id not in self.managed:
            region, offset = found
            return (region.region_id, offset, dtype, shape), True
        region = self._managed_region(core, self.staging.get(field_name), array.nbytes)
        self.staging[field_name] = region
        np.copyto(region.ndarray(array.shape, array.dtype), array, casting="no")
        return (region.region_id, 0, dtype, shape), False

    def place_cuda(self, core: "_core.Client", array: Any) -> Tuple:
        """(region_id, offset, dtype, shape) of a CUDA array
        (``_convert.CudaArray``), registering its allocation once: an array
        in an allocation registered before reuses that registration (and
        adds its owner, so the memory stays allocated while registered)."""
        for registration in self.cuda.values():
            offset = registration.offset_of(array.ptr, array.nbytes)
            if offset is not None:
                if not any(o[0] is array.owner[0] for o in registration.owners):
                    registration.owners.append(array.owner)
                return (registration.region_id, offset, array.dtype, list(array.shape))
        info = core.register_cuda_region(array.ptr, array.nbytes)
        registration = CudaRegistration(info, array.ptr, array.owner)
        self.cuda[registration.base] = registration
        return (registration.region_id, int(info["offset_bytes"]), array.dtype,
                list(array.shape))

    def release_cuda(self, core: "_core.Client", ptr: Optional[int] = None) -> int:
        """Unregisters the CUDA allocation holding device address ``ptr``
        (every one when None) and drops the references to its owners once
        the daemon acknowledged (it then no longer writes the memory; see
        :meth:`unregister`). Returns how many were released. A failed
        acknowledgement raises and keeps the owners referenced."""
        released = 0
        for base, registration in list(self.cuda.items()):
            if ptr is not None and registration.offset_of(ptr, 1) is None:
                continue
            core.unregister_region(registration.region_id)
            del self.cuda[base]
            released += 1
        return released

    def place_output(self, core: "_core.Client", nbytes: int) -> SharedRegion:
        """The output region, holding at least ``nbytes`` bytes."""
        self.output = self._managed_region(core, self.output, nbytes)
        return self.output

    def _managed_region(self, core: "_core.Client", region: Optional[SharedRegion],
                        need: int) -> SharedRegion:
        """`region` when it holds `need` bytes and is not oversized (more
        than _KEEP_BYTES and 4x the need: one huge request must not pin its
        memory for the client's life); else a new managed region."""
        need = align(max(need, 1))
        if region is not None and need <= region.nbytes and \
                (region.nbytes <= _KEEP_BYTES or region.nbytes <= 4 * need):
            return region
        if region is not None:
            self.unregister(core, region)
        region = self.register(core, need)
        self.managed.add(region.region_id)
        return region

    def retire_managed(self) -> None:
        """After a decode that may still be running on the daemon (its call
        was interrupted or timed out): the next decode gets fresh staging
        and output regions, so the abandoned one cannot overwrite its result.
        The old ones are unregistered at the next call."""
        for region in [self.output, *self.staging.values()]:
            if region is not None:
                self.pending_free.append(region.region_id)
        self.output = None
        self.staging.clear()

    def drop_managed(self, core: "_core.Client") -> None:
        """Forgets the managed regions (a restarted daemon could not register
        them again, e.g. /dev/shm was cleaned): the next placement makes new
        ones."""
        for region in [self.output, *self.staging.values()]:
            if region is not None:
                try:
                    self.unregister(core, region)
                except VaedError:
                    pass
        self.output = None
        self.staging.clear()

    def forget_all(self) -> None:
        """After the Client closed: every region is unregistered (the daemon
        unmapped them with the client); views of them stay valid."""
        for region in self.by_id.values():
            region.registered = False
        self.by_id.clear()
        self.staging.clear()
        self.output = None
        self.cuda.clear()  # the daemon dropped them with the client
