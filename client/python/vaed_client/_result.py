"""What vaed_client.Client.decode returns (:class:`DecodeResult`) and what
Client.decode_stream yields before it (:class:`StreamPart`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import numpy as np


@dataclass
class DecodeResult:
    """What :meth:`Client.decode` returns.

    Unless the decode was asked for ``copy=True``, ``frames`` and ``audio``
    are numpy views of the client's output region: no copy, valid as long
    as they exist, but their *contents* are overwritten by the next
    :meth:`Client.decode` on the same client. :meth:`copy` keeps them.

    frames
        Video output, or None for an audio-only request. ``format="uint8"``:
        uint8 ``[frames, height_px, width_px, 3]`` RGB (round half to even of
        clamp(x, 0, 1) * 255). ``"float32"``: float32 ``[frames, 3,
        height_px, width_px]``, the decoder's raw output (H3: ImageNet-
        normalised RGB, not clamped). ``"float32_unit"``: float32 ``[frames,
        3, height_px, width_px]`` RGB in [0, 1] after the model's official
        post-processing (H3: inverse ImageNet normalisation and clamp;
        TAEF2: its raw output, unclamped). With a CUDA ``output=``, that
        array itself (written in place, ordered on the decode's stream).
    audio
        float32 ``[channels, samples]`` planar waveform (H3: 32000 Hz,
        channels 1 mono or 2 = left, right), or None without an audio latent.
    timings
        Seconds per component, e.g. ``decode``, ``video_vae.decode_latent``,
        ``audio_vae.decode_latent``, ``video_vae.tile_decode``,
        ``video_vae.tile_merge`` (wall clock, measured by the daemon).
    info
        The daemon's whole reply (``vaed.v1.DecodeReply`` as a dict keyed by
        proto field names): shapes, model, ``warm`` (False when a rank
        that decoded it had not decoded that shape bucket before, neither
        in a request nor in the daemon's start-up warm-up), ``profile``, ``tiling`` (windows, tiles,
        stack and plan decisions), ``compile_decision``, ``audio`` (sample
        rate, seconds), ``group``, ``peak_rss_bytes``, ...
    inputs_in_place
        For each latent sent: True when the daemon read it in place from one
        of this client's regions, False when it was copied into a staging
        region first.
    """

    frames: Optional[np.ndarray]
    audio: Optional[np.ndarray]
    timings: Dict[str, float]
    info: Dict[str, Any]
    inputs_in_place: Dict[str, bool] = field(default_factory=dict)

    @property
    def warm(self) -> bool:
        """False when a rank that decoded this had not decoded its shape
        bucket before (the daemon's ``warm_shapes`` are decoded at start-up)."""
        return bool(self.info.get("warm", False))

    @property
    def sample_rate(self) -> Optional[int]:
        """Audio sample rate in Hz, or None without audio."""
        audio = self.info.get("audio")
        return int(audio["sample_rate_hz"]) if audio else None

    @property
    def fps(self) -> float:
        """Video frames per second the daemon used (the request's or the model's)."""
        return float(self.info.get("fps", 0.0))

    def copy(self) -> "DecodeResult":
        """A result whose arrays own their memory (safe past the next decode)."""
        return DecodeResult(
            # A caller's CUDA output array is the caller's: kept as it is.
            frames=self.frames.copy() if isinstance(self.frames, np.ndarray) else self.frames,
            audio=None if self.audio is None else self.audio.copy(),
            timings=dict(self.timings), info=self.info,
            inputs_in_place=dict(self.inputs_in_place))


@dataclass(frozen=True)
class StreamPart:
    """One part of the output that became final, yielded by
    :meth:`Client.decode_stream` before its :class:`DecodeResult` (the
    daemon's ``vaed.v1.FinalRange``).

    stage
        ``"video"`` (the frames) or ``"audio"`` (the waveform).
    unit
        ``"frames"`` for video: pixel frames of the output (not latent
        frames); ``"samples"`` for audio: samples per channel (H3: 32000
        Hz).
    begin, end
        The half-open range ``[begin, end)`` in ``unit``. Per stage the
        parts are contiguous and in order: the first begins at 0, each
        begins where the previous one ended, the last ends at ``total``.
    total
        Frames (video) or samples per channel (audio) of the whole output.
    data
        Exactly the final elements, with no copy unless
        ``decode_stream(copy=True)``. Video: ``frames[begin:end]`` of what
        :attr:`DecodeResult.frames` will be (uint8 ``[end - begin,
        height_px, width_px, 3]`` or float32 ``[end - begin, 3, height_px,
        width_px]``, by ``format``); with a CUDA ``output=``, that object
        sliced the same way (ordered on the decode's stream; an object
        that cannot be sliced, such as :class:`CudaArray`, is given whole:
        index it with ``begin`` and ``end``). Audio: float32 ``[channels,
        end - begin]``, ``audio[:, begin:end]`` of :attr:`DecodeResult.audio`
        (a strided view, not contiguous when there are 2 channels).

    Ownership: a view aliases the client's output region (or the caller's
    CUDA ``output``). The daemon has written those elements and never
    writes them again for this request, so they may be read (encoded,
    copied) at once; like :class:`DecodeResult` views, their *contents* are
    overwritten by the next decode on the same client.
    """

    stage: str
    unit: str
    begin: int
    end: int
    total: int
    data: Any
