// The ffmpeg command lines of ops/common's writers (frame_writer.h,
// mp4_stream.h), built in this one place so that WriteMp4,
// WriteMp4WithAudio, Mp4Stream and MuxWavIntoMp4 encode alike: one list
// of video encoding arguments, one of audio encoding arguments. Internal to
// ops/common.
//
// Thread-safety: pure functions (FfmpegPath reads PATH).
#ifndef VAED_OPS_COMMON_FFMPEG_COMMAND_H_
#define VAED_OPS_COMMON_FFMPEG_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::ops {

// The ffmpeg CLI's path on PATH; kFailedPrecondition saying how to install
// it when there is none.
Result<std::string> FfmpegPath();

// kInvalidArgument unless `fps` is positive and finite.
Status CheckFps(double fps);

// kNotFound unless `input` is an existing regular file: "<what> <input> is
// not an existing regular file; writing <output>".
Status CheckInputFile(const std::string& input, const std::string& what, const std::string& output);

// `fps` as ffmpeg reads a rate ("%.6g": "25", "23.976").
std::string FfmpegRate(double fps);

// `ffmpeg` (its path) with the quiet, no-stdin-reading options, reading
// rawvideo rgb24 frames of `width_px` x `height_px` pixels at `rate` frames
// per second from its stdin (input 0). Outputs are appended by the caller.
std::vector<std::string> FfmpegRawRgbInput(const std::string& ffmpeg, int64_t height_px,
                                           int64_t width_px, const std::string& rate);

// The MP4 encode of WriteMp4 (frame_writer.h): FfmpegRawRgbInput, then,
// when `wav_path` is not null, the WAV as input 1 (mapped as the audio),
// the video encoding (H.264 CRF 18, yuv420p, BT.709 limited range, odd
// sizes padded), the audio encoding (AAC-LC 192 kb/s) when there is a WAV,
// and the MP4 output `path` (+faststart, overwritten).
std::vector<std::string> Mp4EncodeArgv(const std::string& ffmpeg, int64_t height_px,
                                       int64_t width_px, double fps, const std::string* wav_path,
                                       const std::string& path);

// The mux of MuxWavIntoMp4 (mp4_stream.h): the video-only MP4 `video_path`
// as input 0 (its video stream copied, not re-encoded), the WAV as input 1
// encoded as Mp4EncodeArgv encodes audio, into the MP4 `path`.
std::vector<std::string> MuxWavArgv(const std::string& ffmpeg, const std::string& video_path,
                                    const std::string& wav_path, const std::string& path);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_FFMPEG_COMMAND_H_
