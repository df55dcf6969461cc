"""What vaed_client.Client.decode returns: :class:`DecodeResult`."""

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
