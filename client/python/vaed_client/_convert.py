"""Argument conversion for vaed_client.Client: Python values checked and
turned into what the extension takes.

* Arrays: any CPU array (numpy, an object with the buffer protocol, or one
  with ``__dlpack__`` such as a CPU ``torch.Tensor``) becomes a numpy array
  viewing the same memory (:func:`as_host_array`). CUDA arrays (objects
  with ``__cuda_array_interface__``, or DLPack producers on a CUDA device)
  are described by :func:`cuda_array` (pointer, dtype, shape, stream) for
  the client to register their allocation. torch is never imported: DLPack
  objects are read through ``numpy.from_dlpack`` (CPU) or the extension's
  capsule reader (CUDA).
* Options: every decode/plan knob is checked here, so each error names its
  argument (:func:`decode_options`), then packed into ``_core.DecodeArgs``.

Every check raises :class:`vaed_client.ValidationError` (code
``invalid_argument``, or ``failed_precondition`` for CUDA memory a daemon
without CUDA ranks cannot take).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from .errors import ValidationError

# numpy dtype -> the protocol's dtype names (vaed::DTypeName).
DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
               np.dtype(np.uint8): "uint8"}
NUMPY_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "uint8": np.dtype(np.uint8)}
# vaed.v1.DType value names (in a plan's dict) -> dtype names.
PROTO_DTYPES = {"DTYPE_FLOAT32": "float32", "DTYPE_FLOAT16": "float16", "DTYPE_UINT8": "uint8",
                "DTYPE_BFLOAT16": "bfloat16"}

# Output formats (vaed.v1.OutputFormat): name -> wire value.
FORMATS = {"uint8": 1, "float32": 2, "float32_unit": 3}
# stack_tiling / compile knobs (vaed.v1.StackTiling / Compile): value -> wire value.
_TRISTATE = {None: 0, "default": 0, "off": 1, False: 1, "on": 2, True: 2, "auto": 3}

# Longest timeout the C++ client takes (milliseconds in an int), in seconds.
MAX_TIMEOUT_S = (2**31 - 1) / 1000.0

# DLPack device types (dlpack.h DLDeviceType).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

TensorLike = Any  # numpy array, buffer-protocol object, or object with __dlpack__ (CPU)

# A latent's dtype name and shape (elements), as the daemon plans it.
Shapes = Dict[str, Tuple[str, List[int]]]


def invalid(message: str) -> ValidationError:
    return ValidationError(message, code=1, code_name="invalid_argument")


def real(value: Any, name: str, low: float, high: float, *, low_open: bool = True) -> float:
    """``value`` as a float in (low, high] (or [low, high] with low_open
    False); numpy scalars count, bools do not."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise invalid(f"{name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x > high or x < low or (low_open and x == low):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise invalid(f"{name} must be in {interval}, got {value!r}")
    return x


def boolean(value: Any, name: str) -> bool:
    """True or False (numpy bools count; 0 and 1 do not)."""
    if not isinstance(value, (bool, np.bool_)):
        raise invalid(f"{name} must be True or False, got {value!r}")
    return bool(value)


def text(value: Any, name: str) -> str:
    """A str option; None = "" (the daemon's default)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a str or None, got {value!r}")
    return value


def count(value: Any, name: str, high: int) -> int:
    """An int in [0, high] (numpy integers count, bools do not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise invalid(f"{name} must be an int, got {value!r}")
    if not 0 <= int(value) <= high:
        raise invalid(f"{name} must be in [0, {high}], got {value!r}")
    return int(value)


def shape(value: Any, name: str) -> List[int]:
    """A latent shape: a sequence of positive ints whose element count fits int64."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise invalid(f"{name} must be a non-empty sequence of ints, got {value!r}")
    dims = [count(d, f"{name}[{i}]", 2**63 - 1) for i, d in enumerate(value)]
    if any(d == 0 for d in dims):
        raise invalid(f"{name} {dims} has a zero dim; every dim must be positive")
    if math.prod(dims) >= 2**63:
        raise invalid(f"{name} {dims} has more than 2^63 elements")
    return dims


def _from_dlpack(obj: TensorLike, field_name: str) -> np.ndarray:
    """A numpy view of a DLPack producer's host memory."""
    try:
        device = int(obj.__dlpack_device__()[0]) if hasattr(obj, "__dlpack_device__") \
            else _DL_CPU
    except Exception as e:  # e.g. a torch tensor on the meta device
        raise invalid(f"{field_name}: cannot tell where its memory is (__dlpack_device__: "
                      f"{e})") from e
    if device not in (_DL_CPU, _DL_CUDA_HOST):
        raise invalid(f"{field_name}: DLPack device type {device} is not host memory")
    # torch keeps negation as a bit (e.g. z.conj().imag) that its DLPack
    # export drops (torch 1.13 and 2.11 alike): materialise it, or the
    # daemon would see -x.
    is_neg = getattr(obj, "is_neg", None)
    try:
        if callable(is_neg) and is_neg():
            obj = obj.resolve_neg()
        return np.from_dlpack(obj)
    except (TypeError, RuntimeError, BufferError, ValueError) as e:
        hint = ""
        if "dtype" in str(e).lower():
            hint = ("; vaed takes float32, float16 and uint8 latents: convert it first "
                    "(e.g. tensor.float())")
        raise invalid(f"{field_name}: cannot read it through DLPack ({e}){hint}") from e


# __cuda_array_interface__ typestr -> dtype name (little-endian only; "|"
# for one-byte types, as numpy writes them).
CUDA_TYPESTRS = {"<f4": "float32", "<f2": "float16", "|u1": "uint8", "<u1": "uint8"}
# DLPack (code, bits, lanes) -> dtype name (dlpack.h DLDataTypeCode: 1 uint, 2 float).
_DLPACK_DTYPES = {(2, 32, 1): "float32", (2, 16, 1): "float16", (1, 8, 1): "uint8"}
_ITEMSIZE = {"float32": 4, "float16": 2, "uint8": 1}


@dataclass
class CudaArray:
    """A C-contiguous array in CUDA device memory, as its producer
    described it (``__cuda_array_interface__`` or DLPack). ``ptr``: device
    address of the first element; ``nbytes``: its size in bytes; ``dtype``:
    "float32", "float16" or "uint8"; ``shape``: elements; ``stream``: the
    stream its producer named (CAI v3 ``stream``; None = none named; 1 the
    legacy default stream, 2 the per-thread default stream, else a
    cudaStream_t); ``owner``: the object (and for DLPack the capsule) that
    keeps the memory alive; ``interface``: how it was read, for messages."""

    ptr: int
    nbytes: int
    dtype: str
    shape: List[int]
    readonly: bool
    stream: Optional[int]
    owner: Tuple[Any, ...]
    interface: str


def failed_precondition(message: str) -> ValidationError:
    return ValidationError(message, code=5, code_name="failed_precondition")


def is_cuda(obj: Any) -> bool:
    """True for objects whose memory is on a CUDA device: those with
    ``__cuda_array_interface__``, and DLPack producers whose
    ``__dlpack_device__()`` is kDLCUDA (2) or kDLCUDAManaged (13). Does not
    export anything."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    if isinstance(obj, np.ndarray) or not hasattr(obj, "__dlpack_device__"):
        return False
    try:
        return int(obj.__dlpack_device__()[0]) in (_DL_CUDA, _DL_CUDA_MANAGED)
    except Exception:  # a broken producer: as_host_array says what is wrong
        return False


def cuda_interface_name(obj: Any) -> str:
    """How a CUDA object is read, for messages."""
    if hasattr(obj, "__cuda_array_interface__"):
        return "__cuda_array_interface__"
    return "DLPack kDLCUDA"


def no_cuda_ranks(obj: Any, field_name: str) -> ValidationError:
    """The refusal of a CUDA array by a daemon without CUDA ranks."""
    return failed_precondition(
        f"{field_name}: a CUDA tensor ({cuda_interface_name(obj)}); this daemon has no CUDA "
        "ranks (its Hello lists no cuda_devices): pass a CPU array (e.g. tensor.cpu())")


def _c_contiguous(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """Whether byte ``strides`` describe a C-contiguous layout of ``shape``
    (dims of size 1 may have any stride, as torch writes them)."""
    expected = itemsize
    for dim, stride in zip(reversed(list(shape)), reversed(list(strides))):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _cai_field(cai: Dict[str, Any], key: str, field_name: str) -> Any:
    if key not in cai:
        raise invalid(f"{field_name}: __cuda_array_interface__ has no '{key}' (version 3 "
                      "needs shape, typestr, data and version)")
    return cai[key]


def _cuda_stream(value: Any, where: str) -> Optional[int]:
    """A stream value of the CUDA array interface: None, 1, 2 or a handle."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or \
            int(value) < 0:
        raise invalid(f"{where} must be None or a stream handle (int), got {value!r}")
    if int(value) == 0:
        raise invalid(f"{where} is 0, which the interface forbids (1 = the legacy default "
                      "stream, 2 = the per-thread default stream)")
    return int(value)


def _from_cuda_array_interface(obj: Any, field_name: str) -> CudaArray:
    """Reads and checks ``__cuda_array_interface__`` (versions 2 and 3)."""
    where = f"{field_name}: __cuda_array_interface__"
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise invalid(f"{where} must be a dict, got {type(cai).__name__}")
    version = _cai_field(cai, "version", field_name)
    if version not in (2, 3) or isinstance(version, bool):
        raise invalid(f"{where}['version'] is {version!r}; vaed reads versions 2 and 3")
    dims = shape(_cai_field(cai, "shape", field_name), f"{where}['shape']")
    typestr = _cai_field(cai, "typestr", field_name)
    dtype = CUDA_TYPESTRS.get(typestr) if isinstance(typestr, str) else None
    if dtype is None:
        raise invalid(f"{where}['typestr'] {typestr!r} is not one vaed takes (float32 '<f4', "
                      "float16 '<f2', uint8 '|u1'); convert it first (e.g. tensor.float())")
    data = _cai_field(cai, "data", field_name)
    if not isinstance(data, tuple) or len(data) != 2 or \
            not isinstance(data[0], numbers.Integral) or isinstance(data[0], bool):
        raise invalid(f"{where}['data'] must be a tuple (pointer, read_only), got {data!r}")
    if int(data[0]) <= 0:
        raise invalid(f"{where}['data'][0] is {data[0]!r}, not a device pointer")
    itemsize = _ITEMSIZE[dtype]
    strides = cai.get("strides")
    if strides is not None and (not isinstance(strides, (tuple, list)) or
                                len(strides) != len(dims) or
                                not _c_contiguous(dims, strides, itemsize)):
        raise invalid(f"{where}['strides'] {strides!r} is not C-contiguous for shape {dims} of "
                      f"{dtype}: pass a contiguous tensor (e.g. tensor.contiguous())")
    if cai.get("mask") is not None:
        raise invalid(f"{where}['mask'] is set; vaed takes unmasked arrays only")
    stream = _cuda_stream(cai.get("stream"), f"{where}['stream']") if version >= 3 else None
    return CudaArray(ptr=int(data[0]), nbytes=math.prod(dims) * itemsize, dtype=dtype,
                     shape=dims, readonly=bool(data[1]), stream=stream, owner=(obj,),
                     interface="__cuda_array_interface__")


def _from_dlpack_cuda(obj: Any, field_name: str, stream: int) -> CudaArray:
    """Exports a DLPack producer on a CUDA device (the producer makes
    ``stream`` wait for its pending work, per the DLPack protocol) and reads
    the capsule."""
    where = f"{field_name}: DLPack"
    device = int(obj.__dlpack_device__()[0])
    if device == _DL_CUDA_MANAGED:
        raise invalid(f"{where} tensor in CUDA managed memory, which CUDA IPC cannot share: "
                      "pass device memory (cudaMalloc) or a CPU array")
    try:
        capsule = obj.__dlpack__(stream=stream)
        info = _core.dlpack_tensor_info(capsule)
    except (TypeError, RuntimeError, BufferError, ValueError) as e:
        raise invalid(f"{where}: cannot export it ({e})") from e
    dtype = _DLPACK_DTYPES.get(tuple(info["dtype"]))
    if dtype is None:
        raise invalid(f"{where} dtype (code, bits, lanes) {tuple(info['dtype'])} is not one vaed "
                      "takes (float32, float16, uint8); convert it first (e.g. tensor.float())")
    dims = shape(list(info["shape"]), f"{where} shape")
    itemsize = _ITEMSIZE[dtype]
    strides = info["strides"]
    if strides is not None and not _c_contiguous(dims, [s * itemsize for s in strides], itemsize):
        raise invalid(f"{where} strides {tuple(strides)} (elements) are not C-contiguous for "
                      f"shape {dims}: pass a contiguous tensor (e.g. tensor.contiguous())")
    return CudaArray(ptr=int(info["data"]), nbytes=math.prod(dims) * itemsize, dtype=dtype,
                     shape=dims, readonly=False, stream=None, owner=(obj, capsule),
                     interface="DLPack kDLCUDA")


def cuda_array(obj: Any, field_name: str, dlpack_stream: int = 1) -> CudaArray:
    """Describes a CUDA object (:func:`is_cuda`) for registration. DLPack
    producers are exported with ``dlpack_stream`` (their pending work is
    ordered before it). Raises ValidationError (``invalid_argument``)
    naming ``field_name`` and the rule: a missing interface key, a version
    other than 2 and 3, a dtype other than float32/float16/uint8, strides
    that are not C-contiguous, a mask, a null pointer, stream 0, managed
    memory."""
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj, field_name)
    return _from_dlpack_cuda(obj, field_name, dlpack_stream)


def stream_handle(value: Any) -> Optional[int]:
    """A ``stream=`` argument as a CUstream value: None, an int (1 = the
    legacy default stream, 2 = the per-thread default stream), or an object
    with ``cuda_stream`` (torch.cuda.Stream) or ``ptr`` (cupy Stream)."""
    if value is None:
        return None
    for attribute in ("cuda_stream", "ptr"):
        if not isinstance(value, numbers.Integral) and hasattr(value, attribute):
            value = getattr(value, attribute)
    return _cuda_stream(value, "stream")


def as_host_array(obj: TensorLike, field_name: str) -> np.ndarray:
    """A numpy array viewing ``obj``'s CPU memory (no copy for numpy arrays,
    buffer-protocol objects and CPU DLPack producers). Raises
    ValidationError for CUDA tensors (``failed_precondition``) and
    unsupported objects."""
    if isinstance(obj, np.ndarray):
        return obj
    if is_cuda(obj):
        # The Client handles CUDA arrays before asking for host ones; any
        # that gets here is in a place that takes host memory only.
        raise failed_precondition(
            f"{field_name}: a CUDA tensor ({cuda_interface_name(obj)}) where host memory is "
            "needed: pass a CPU array (e.g. tensor.cpu())")
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, field_name)
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        pass
    raise invalid(f"{field_name}: {type(obj).__name__} is not an array (need a numpy array, a "
                  "buffer, or an object with __dlpack__ on the CPU)")


def dtype_name(array: np.ndarray, field_name: str) -> str:
    """The protocol's name of ``array``'s dtype; ValidationError unless it is
    float32, float16 or uint8."""
    name = DTYPE_NAMES.get(array.dtype)
    if name is None:
        raise invalid(f"{field_name}.dtype {array.dtype} is not one vaed takes (float32, "
                      "float16, uint8); convert it, e.g. .astype(numpy.float32)")
    return name


def to_ms(seconds: Optional[float], field_name: str) -> int:
    """A deadline in whole milliseconds (rounded up); None = 0 (none)."""
    if seconds is None:
        return 0
    return math.ceil(real(seconds, field_name, 0.0, (2**32 - 1) / 1000.0) * 1000.0)


def tristate(value: Union[None, bool, str], field_name: str) -> int:
    """None / "default", "off" / False, "on" / True, "auto" as the wire value."""
    try:
        return _TRISTATE[value.lower() if isinstance(value, str) else
                         bool(value) if isinstance(value, np.bool_) else value]
    except (KeyError, TypeError):
        raise invalid(f"{field_name} {value!r} is not one of None, 'default', 'off', 'on', "
                      "'auto' (or a bool)")


def _tiling(value: Any) -> Optional[Tuple[int, int]]:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise invalid(f"tiling must be (tile_latent, overlap_latent), got {value!r}")
    return (count(value[0], "tiling[0] (tile_latent)", 2**32 - 1),
            count(value[1], "tiling[1] (overlap_latent)", 2**32 - 1))


# Decode.latent_space by name (the wire's LatentSpace values).
LATENT_SPACES = {"normalized": 1, "denormalized": 2}


def latent_space(value: Any) -> int:
    """``"normalized"`` or ``"denormalized"`` as the wire value; ValidationError
    naming ``latent_space`` otherwise."""
    if not isinstance(value, str) or value not in LATENT_SPACES:
        raise invalid(f"latent_space {value!r} is not one of {', '.join(map(repr, LATENT_SPACES))}")
    return LATENT_SPACES[value]


def decode_options(model: Any, format: Any, fps: Any = None, profile: Any = None,
                   stack_tiling: Any = None, compile: Any = None, deadline: Any = None,
                   group_size: Any = 0, independent_lengths: Any = False,
                   inject_faults: Any = (), tiling: Any = None,
                   progress: Any = None, latent_space_name: Any = "normalized"
                   ) -> Dict[str, Any]:
    """The request's options, checked here (each error names its argument),
    as ``_core.DecodeArgs`` keywords."""
    if not isinstance(format, str) or format not in FORMATS:
        raise invalid(f"format {format!r} is not one of {', '.join(FORMATS)}")
    if isinstance(inject_faults, (str, bytes)) or not isinstance(inject_faults, Iterable):
        raise invalid(f"inject_faults must be a list of fault names, got {inject_faults!r}")
    faults = list(inject_faults)
    if not all(isinstance(f, str) for f in faults):
        raise invalid(f"inject_faults must hold str names, got {faults!r}")
    tile_overlap = _tiling(tiling)
    if progress is not None and not callable(progress):
        raise invalid(f"progress must be callable or None, got {progress!r}")
    return dict(
        model=text(model, "model"), format=FORMATS[format],
        stack_tiling=tristate(stack_tiling, "stack_tiling"), compile=tristate(compile, "compile"),
        fps=0.0 if fps is None else real(fps, "fps (frames per second)", 0.0, 1000.0),
        independent_lengths=boolean(independent_lengths, "independent_lengths"),
        latent_space=latent_space(latent_space_name),
        profile=text(profile, "profile"), deadline_ms=to_ms(deadline, "deadline"),
        group_size=count(group_size, "group_size", 2**32 - 1), inject_faults=faults,
        tiling=tile_overlap, progress=progress)


def plan_key(options: Dict[str, Any], shapes: Shapes) -> Tuple:
    """What a plan depends on: model, format, A/V sync, latent space and the
    latents' shapes."""
    return (options["model"], options["format"], options["fps"], options["independent_lengths"],
            options["latent_space"], tuple((k, d, tuple(s)) for k, (d, s) in sorted(shapes.items())))


def plan_args(options: Dict[str, Any], shapes: Shapes) -> "_core.DecodeArgs":
    """A plan-only request for latents of these dtypes and shapes (region id
    and offset 0: the daemon reads no memory for a plan)."""
    def ref(name: str) -> Optional[Tuple]:
        return (0, 0, *shapes[name]) if name in shapes else None
    return _core.DecodeArgs(
        model=options["model"], latent=ref("video_latent"), audio_latent=ref("audio_latent"),
        format=options["format"], fps=options["fps"],
        independent_lengths=options["independent_lengths"], latent_space=options["latent_space"])
