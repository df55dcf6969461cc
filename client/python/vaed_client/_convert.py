"""Argument conversion for vaed_client.Client: Python values checked and
turned into what the extension takes.

* Arrays: any CPU array (numpy, an object with the buffer protocol, or one
  with ``__dlpack__`` such as a CPU ``torch.Tensor``) becomes a numpy array
  viewing the same memory (:func:`as_host_array`); CUDA tensors are refused.
  torch is never imported: DLPack objects are read through
  ``numpy.from_dlpack``.
* Options: every decode/plan knob is checked here, so each error names its
  argument (:func:`decode_options`), then packed into ``_core.DecodeArgs``.

Every check raises :class:`vaed_client.ValidationError` (code
``invalid_argument``, or ``failed_precondition`` for CUDA memory).
"""

from __future__ import annotations

import math
import numbers
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
    if device in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise ValidationError(
            f"{field_name}: a CUDA tensor (DLPack device {device}); this vaed daemon decodes "
            "from host shared memory: pass a CPU tensor (e.g. tensor.cpu())",
            code=5, code_name="failed_precondition")
    if device not in (_DL_CPU, _DL_CUDA_HOST):
        raise invalid(f"{field_name}: DLPack device type {device} is not host memory")
    # torch keeps negation as a bit (e.g. z.conj().imag) that its DLPack
    # export (1.13) drops: materialise it, or the daemon would see -x.
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


def as_host_array(obj: TensorLike, field_name: str) -> np.ndarray:
    """A numpy array viewing ``obj``'s CPU memory (no copy for numpy arrays,
    buffer-protocol objects and CPU DLPack producers). Raises
    ValidationError for CUDA tensors (``failed_precondition``) and
    unsupported objects."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        raise ValidationError(
            f"{field_name}: a CUDA array (__cuda_array_interface__); this vaed daemon decodes "
            "from host shared memory: pass a CPU array (e.g. tensor.cpu())",
            code=5, code_name="failed_precondition")
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


def decode_options(model: Any, format: Any, fps: Any = None, profile: Any = None,
                   stack_tiling: Any = None, compile: Any = None, deadline: Any = None,
                   group_size: Any = 0, independent_lengths: Any = False,
                   inject_faults: Any = (), tiling: Any = None,
                   progress: Any = None) -> Dict[str, Any]:
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
        profile=text(profile, "profile"), deadline_ms=to_ms(deadline, "deadline"),
        group_size=count(group_size, "group_size", 2**32 - 1), inject_faults=faults,
        tiling=tile_overlap, progress=progress)


def plan_key(options: Dict[str, Any], shapes: Shapes) -> Tuple:
    """What a plan depends on: model, format, A/V sync and the latents' shapes."""
    return (options["model"], options["format"], options["fps"], options["independent_lengths"],
            tuple((k, d, tuple(s)) for k, (d, s) in sorted(shapes.items())))


def plan_args(options: Dict[str, Any], shapes: Shapes) -> "_core.DecodeArgs":
    """A plan-only request for latents of these dtypes and shapes (region id
    and offset 0: the daemon reads no memory for a plan)."""
    def ref(name: str) -> Optional[Tuple]:
        return (0, 0, *shapes[name]) if name in shapes else None
    return _core.DecodeArgs(
        model=options["model"], latent=ref("video_latent"), audio_latent=ref("audio_latent"),
        format=options["format"], fps=options["fps"],
        independent_lengths=options["independent_lengths"])
