#!/usr/bin/env python3
"""Example DiT worker: hand latents to the node's vaed daemon, write MP4/WAV.

Copy this script as a starting point. It shows the two ways to pass a latent
to ``vaed_client.Client.decode``:

(a) In place: the H3 golden video latent ``video_case_grid_2x2`` is written
    into a buffer from ``client.alloc_latent(...)`` (shared memory that the
    daemon reads directly, no copy). It is decoded in ONE request together
    with the H3 golden audio latent ``audio_case_stereo`` (a plain numpy
    array, copied into the client's staging region) on model "h3". The
    script writes ``h3_grid_2x2.wav`` (16-bit PCM) and ``h3_grid_2x2.mp4``
    (H.264 yuv420p with the audio as AAC). The two golden cases have
    independent lengths (22 frames vs 1 s of audio), so the request passes
    ``independent_lengths=True``; a real worker's audio has
    round(frames / fps * 40) latent frames and leaves it False.
(b) Copy path: the TAEF2 latent of ``data/taef2/video_bikes`` is passed as a
    plain numpy array (model "taef2"); the client copies it into its staging
    region each call. The script writes ``bikes.mp4`` at 25 fps.

For each decode it prints the shapes, the daemon's timings (seconds per
component), whether the shape bucket was warm, which inputs were read in
place, and the files written. MP4 needs the ffmpeg CLI (skipped without it).

Run it against a running daemon, from the repository root:

    PYTHONPATH=build/python /usr/bin/python3 ops/examples/dit_worker.py \
        --socket /run/vaed/vaed.sock --out out/examples

Exit status: 0 on success (also when the shared files are absent: skipped),
2 when no daemon answers at the socket, 1 on other errors.
"""

import argparse
import os
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np

try:
    import vaed_client
except ImportError:
    sys.exit("vaed_client is not importable: install it, or run with "
             "PYTHONPATH=<repo>/build/python after building the repository")

DEFAULT_SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def write_wav(path, audio, sample_rate):
    """Planar float32 [channels, samples] -> interleaved 16-bit PCM WAV
    (clipped to [-1, 1], scaled by 32767 in float64 and rounded: the same
    samples as vaectl's pcm16 WAV)."""
    pcm = np.round(np.clip(audio, -1.0, 1.0).astype(np.float64) * 32767.0).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(audio.shape[0])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(np.ascontiguousarray(pcm.T).tobytes())  # [samples, channels]


def write_mp4(path, frames, fps, wav_path=None):
    """uint8 [N, H, W, 3] RGB frames -> H.264 yuv420p MP4 through the ffmpeg
    CLI, plus the WAV's audio as AAC when given. Returns False when ffmpeg
    is not installed."""
    if shutil.which("ffmpeg") is None:
        print(f"  ffmpeg not found on PATH: skipping {path}")
        return False
    n, height, width, _ = frames.shape
    cmd = ["ffmpeg", "-y", "-loglevel", "error",
           "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-r", str(fps),
           "-i", "-"]
    if wav_path is not None:
        cmd += ["-i", str(wav_path), "-c:a", "aac", "-b:a", "192k"]
    # yuv420p needs even sizes: pad odd ones with a black row/column. Both
    # streams are kept whole (no -shortest), as vaectl does.
    cmd += ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-crf", "18",
            "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(path)]
    # frames views the client's shared output region: hand its bytes to
    # ffmpeg without a copy (a flat memoryview, so the pipe writes bytes).
    subprocess.run(cmd, input=np.ascontiguousarray(frames).reshape(-1).data, check=True)
    return True


def report(title, latents, result, reference=None):
    """Prints what a decode took and returned."""
    print(f"{title}:")
    for name, latent in latents.items():
        print(f"  {name:<12} {latent.dtype} {list(latent.shape)}")
    if result.frames is not None:
        print(f"  frames       {result.frames.dtype} {list(result.frames.shape)} "
              f"at {result.fps:g} fps")
    if result.audio is not None:
        print(f"  audio        {result.audio.dtype} {list(result.audio.shape)} "
              f"at {result.sample_rate} Hz")
    print(f"  warm         {result.warm}")
    print(f"  in place     {result.inputs_in_place}")
    print("  timings      " + ", ".join(f"{k}: {v:.4f}" for k, v in result.timings.items()))
    if reference is not None:
        diff = np.abs(result.frames.astype(np.int16) - reference.astype(np.int16)).max()
        print(f"  {'reference':<12} max |frames - reference| = {diff}")


def decode_h3(client, shared, out, fps):
    """(a) H3 video latent in place + audio latent, one request."""
    video = vaed_client.read_safetensors(shared / "golden/h3/video_case_grid_2x2.safetensors")
    audio = vaed_client.read_safetensors(shared / "golden/h3/audio_case_stereo.safetensors")

    # A DiT worker would write its output here (np.copyto, or
    # torch.from_numpy(latent).copy_(tensor)): the daemon reads it in place.
    latent = client.alloc_latent(video["latent"].shape, np.float32)
    np.copyto(latent, video["latent"])

    result = client.decode(latent, audio["latent"], model="h3", fps=fps,
                           independent_lengths=True)  # golden cases: unrelated lengths
    report("h3 video + audio (video latent in place)",
           {"latent": latent, "audio latent": audio["latent"]}, result, video["frames_u8"])

    wav_path = out / "h3_grid_2x2.wav"
    write_wav(wav_path, result.audio, result.sample_rate)
    print(f"  wrote        {wav_path}")
    mp4_path = out / "h3_grid_2x2.mp4"
    if write_mp4(mp4_path, result.frames, fps, wav_path):
        print(f"  wrote        {mp4_path}")


def decode_taef2(client, shared, out):
    """(b) TAEF2 latent as a plain numpy array (copied into staging)."""
    bikes = vaed_client.read_safetensors(shared / "data/taef2/video_bikes.safetensors")
    result = client.decode(bikes["latent"], model="taef2", fps=25)
    report("taef2 bikes (copy path)", {"latent": bikes["latent"]}, result, bikes["decoded_u8"])
    mp4_path = out / "bikes.mp4"
    if write_mp4(mp4_path, result.frames, 25):
        print(f"  wrote        {mp4_path}")


def main():
    parser = argparse.ArgumentParser(
        description="Example DiT worker: decode H3 video+audio and TAEF2 latents through "
                    "the vaed daemon and write MP4/WAV files.")
    parser.add_argument("--socket", default=os.environ.get("VAED_SOCKET") or "/run/vaed/vaed.sock",
                        help="daemon socket (default: $VAED_SOCKET or /run/vaed/vaed.sock)")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED,
                        help=f"shared data directory (default: {DEFAULT_SHARED})")
    parser.add_argument("--out", type=Path, default=Path("out/examples"),
                        help="output directory (default: out/examples)")
    parser.add_argument("--fps", type=float, default=24.0,
                        help="frame rate of the H3 video and its MP4 (default: 24)")
    args = parser.parse_args()

    needed = [args.shared / "golden/h3/video_case_grid_2x2.safetensors",
              args.shared / "golden/h3/audio_case_stereo.safetensors",
              args.shared / "data/taef2/video_bikes.safetensors"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        print("skipping: shared files not found (pass --shared DIR):\n  " + "\n  ".join(missing))
        return 0

    try:
        with vaed_client.Client(args.socket) as client:
            print(f"connected to {args.socket} (client id {client.client_id})")
            args.out.mkdir(parents=True, exist_ok=True)
            decode_h3(client, args.shared, args.out, args.fps)
            decode_taef2(client, args.shared, args.out)
    except vaed_client.DaemonUnavailable as e:
        print(f"no vaed daemon: {e}", file=sys.stderr)
        return 2
    except vaed_client.VaedError as e:
        print(f"decode failed: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"ffmpeg failed (exit status {e.returncode})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
