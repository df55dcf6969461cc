#!/usr/bin/env python3
"""Re-packs ../shared/golden/h3 small enough to travel to the GPU machine.

Usage: repack_golden.py SRC_DIR DST_DIR

SRC_DIR is the golden folder (../shared/golden/h3, 104 MB: two video cases
hold their float32 outputs). DST_DIR (e.g. .gpu-golden/golden/h3, so that
VAED_SHARED_DIR=.gpu-golden finds it where tests look) receives, under the
same file names, only what the GPU check reads (scripts/gpu/check.sh's
steps; the test programs labelled gpu read no golden data):

* the tiny video and audio decoders' weights and configs (the daemon's
  model "h3" of golden_h3, ipc_decode and ipc_client_death) and
  video_cases.json (golden_check.py compares the raw output's SHA-256 with
  the one it records), unchanged;
* each video case with only ``latent`` (float32 [1, 24, T, h, w], what the
  daemon decodes) and ``frames_u8`` (uint8 [F, H, W, 3], the official
  decode, vaectl's --reference-key); where the case holds ``frames_f32``
  (raw decoder output, float32 [1, 3, F, H, W]) also ``frames_f32_head``:
  its first two pixel frames, float32 [1, 3, 2, H, W], so that
  golden_check.py measures a max abs difference against the raw golden
  output without carrying all of it. ``latent_denorm``, ``frames_f32`` and
  ``tile_raw`` are left out;
* each audio case with only ``latent`` (float32 [B, 32, T]) and
  ``waveform`` (float32 [B, 1, N], vaectl's audio reference);
  ``latent_denorm`` and ``waveform_stereo_1x2xN`` are left out, and so is
  audio_cases.json (nothing on the GPU reads it).

Standard library only (the safetensors layout: an 8-byte little-endian
header length, a JSON header of dtype / shape / data_offsets per tensor,
then the data). Exit status 0, or 1 with a message naming the file and the
tensor that is missing or malformed.
"""

import json
import os
import shutil
import struct
import sys

COPIED = ("video_tiny_weights.safetensors", "video_tiny_config.json", "video_cases.json",
          "audio_tiny_weights.safetensors", "audio_tiny_config.json")
KEPT_VIDEO_KEYS = ("latent", "frames_u8")
KEPT_AUDIO_KEYS = ("latent", "waveform")
HEAD_FRAMES = 2  # raw pixel frames kept of frames_f32


def read_safetensors(path):
    """Returns (header dict without __metadata__, metadata or None, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", None)
    return header, metadata, memoryview(blob)[8 + n:]


def tensor_bytes(header, data, key, path):
    if key not in header:
        raise ValueError(f"{path}: tensor '{key}' is missing")
    begin, end = header[key]["data_offsets"]
    return data[begin:end]


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype, shape, bytes), written in that order."""
    header = {}
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data 8-byte aligned, as the format recommends
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in tensors:
            f.write(raw)


def raw_head(header, data, path):
    """frames_f32 [1, 3, F, H, W] float32 -> its first HEAD_FRAMES frames."""
    info = header["frames_f32"]
    if info["dtype"] != "F32" or len(info["shape"]) != 5 or info["shape"][:2] != [1, 3]:
        raise ValueError(f"{path}: frames_f32 is {info['dtype']} {info['shape']}, "
                         "expected F32 [1, 3, F, H, W]")
    _, channels, frames, height, width = info["shape"]
    keep = min(HEAD_FRAMES, frames)
    raw = tensor_bytes(header, data, "frames_f32", path)
    plane = height * width * 4  # one channel of one frame, bytes
    # Per channel the frames are contiguous: channel c starts at c * F planes.
    parts = [raw[c * frames * plane:(c * frames + keep) * plane] for c in range(channels)]
    return [1, channels, keep, height, width], b"".join(parts)


def kept_tensors(header, data, keys, path):
    """The tensors `keys` of a file, as write_safetensors takes them."""
    tensors = []
    for key in keys:
        info = header.get(key)
        if info is None:
            raise ValueError(f"{path}: tensor '{key}' is missing")
        tensors.append((key, info["dtype"], info["shape"], tensor_bytes(header, data, key, path)))
    return tensors


def repack_audio_case(src, dst):
    header, metadata, data = read_safetensors(src)
    write_safetensors(dst, kept_tensors(header, data, KEPT_AUDIO_KEYS, src), metadata)


def repack_video_case(src, dst):
    header, metadata, data = read_safetensors(src)
    tensors = kept_tensors(header, data, KEPT_VIDEO_KEYS, src)
    if "frames_f32" in header:
        shape, raw = raw_head(header, data, src)
        tensors.append(("frames_f32_head", "F32", shape, raw))
    write_safetensors(dst, tensors, metadata)


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    src_dir, dst_dir = argv[1], argv[2]
    os.makedirs(dst_dir, exist_ok=True)
    try:
        for name in COPIED:
            shutil.copyfile(os.path.join(src_dir, name), os.path.join(dst_dir, name))
        for name in sorted(os.listdir(src_dir)):
            src = os.path.join(src_dir, name)
            if name.startswith("video_case_") and name.endswith(".safetensors"):
                repack_video_case(src, os.path.join(dst_dir, name))
            elif name.startswith("audio_case_") and name.endswith(".safetensors"):
                repack_audio_case(src, os.path.join(dst_dir, name))
    except (OSError, ValueError, KeyError) as e:
        print(f"repack_golden.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
