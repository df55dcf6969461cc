// Writing decoded frames (uint8 NHWC RGB) to disk: PNG images and H.264 MP4
// through the ffmpeg command-line tool, or raw bytes with a JSON sidecar.
//
// ffmpeg is run as a child process (no shell, child_process.h) that reads
// rawvideo rgb24 from its stdin; its diagnostics go to this process's
// stderr, never to stdout, so `--json` output stays clean. The MP4
// arguments are built in one place (ffmpeg_command.h), shared with
// mp4_stream.h, which encodes an MP4 while its frames still arrive.
//
// Errors: kFailedPrecondition when ffmpeg is not on PATH (the message says
// how to install it), kInvalidArgument for inconsistent frame geometry,
// kIoError when ffmpeg fails or a file cannot be written.
//
// Thread-safety: functions may run concurrently on different outputs.
#ifndef VAED_OPS_COMMON_FRAME_WRITER_H_
#define VAED_OPS_COMMON_FRAME_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vaed/status.h"

namespace vaed::ops {

// Decoded frames: uint8 [frames, height_px, width_px, 3] RGB, C-contiguous.
// Non-owning.
struct RgbFrames {
  std::span<const uint8_t> data;
  int64_t frames = 0;
  int64_t height_px = 0;
  int64_t width_px = 0;
};

// kInvalidArgument unless all extents are positive and data.size() equals
// frames * height_px * width_px * 3.
Status CheckRgbFrames(const RgbFrames& frames);

// Searches PATH for an executable regular file called `name`; returns its
// path. kNotFound when there is none.
Result<std::string> FindExecutable(std::string_view name);

// OK when the ffmpeg CLI is on PATH; otherwise the kFailedPrecondition
// that the PNG and MP4 writers below would return. Lets callers fail before
// a long decode rather than after it.
Status CheckFfmpegAvailable();

// Writes `frames` as `dir`/frame_0000.png, frame_0001.png, ... (lossless),
// creating `dir` if needed. Returns the paths written, in frame order.
Result<std::vector<std::string>> WritePngSequence(const RgbFrames& frames, const std::string& dir);

// Writes a single-frame `frames` to the PNG file `path`.
// kInvalidArgument when frames.frames != 1.
Status WritePngImage(const RgbFrames& frames, const std::string& path);

// Writes `frames` as an MP4 file `path`: H.264 (libx264, CRF 18), yuv420p,
// BT.709 limited range, tagged as such, `fps` frames per second. Odd widths
// or heights are padded with black to even sizes (yuv420p needs them).
// kInvalidArgument when fps is not positive and finite.
Status WriteMp4(const RgbFrames& frames, const std::string& path, double fps);

// As WriteMp4, with the same video encoding, plus an audio stream read
// from the WAV file `wav_path` (e.g. one written by WriteWav): AAC-LC
// (ffmpeg's native `aac` encoder, 192 kb/s) at the WAV's sample rate and
// channel count. Neither stream is cut to the other's length (no
// `-shortest`): the A/V length rule (spec/h3_vae.md §3.1) is the caller's,
// and the file keeps both streams whole. The moov atom is at the front
// (`+faststart`). `wav_path` is read as a plain file even when it looks
// like a URL (ffmpeg's `file:` protocol).
// kNotFound when `wav_path` is not an existing regular file; otherwise the
// errors of WriteMp4 (kIoError also when ffmpeg cannot read the WAV file).
Status WriteMp4WithAudio(const RgbFrames& frames, const std::string& path, double fps,
                         const std::string& wav_path);

// Writes the raw bytes to `raw_path` and a JSON sidecar to `json_path`
// describing them: {"file", "dtype": "uint8", "layout": "NHWC",
// "channels": "RGB", "shape": [N,H,W,3], "bytes"}.
Status WriteRawWithSidecar(const RgbFrames& frames, const std::string& raw_path,
                           const std::string& json_path);

// Runs `argv` (argv[0] an executable path, no shell), writes `input` to
// its stdin, closes it and waits. kIoError naming argv[0] when it cannot be
// started, exits non-zero or dies from a signal. A child that exits before
// reading all input does not raise SIGPIPE in this process.
Status RunWithStdin(const std::vector<std::string>& argv, std::span<const uint8_t> input);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_FRAME_WRITER_H_
