// Writing an MP4 while its frames are still being produced: one ffmpeg
// child process reads rawvideo rgb24 from a pipe and encodes each frame as
// it arrives, so encoding overlaps whatever produces the frames (a
// streamed decode). The encoding is exactly WriteMp4's
// (frame_writer.h): H.264 (libx264, CRF 18), yuv420p, BT.709 limited
// range, odd sizes padded, +faststart; the same frames give the same
// video stream. The audio is added afterwards by MuxWavIntoMp4, without
// re-encoding the video.
//
// ffmpeg's diagnostics go to this process's stderr, never to stdout.
#ifndef VAED_OPS_COMMON_MP4_STREAM_H_
#define VAED_OPS_COMMON_MP4_STREAM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "vaed/status.h"

namespace vaed::ops {

class ChildProcess;

// One MP4 being encoded by an ffmpeg child process.
//
// Thread-safety: not synchronized: Append() and Finish() from one thread
// at a time (it may be handed between threads with external ordering).
// Cancel() alone may be called from another thread while Append() runs.
class Mp4Stream {
 public:
  // Starts ffmpeg writing the MP4 `path` (overwritten; ffmpeg creates it
  // when it starts or with the first frame) from frames of
  // `height_px` x `width_px` pixels at `fps` frames per second.
  // Errors: kInvalidArgument for non-positive extents or an fps not
  // positive and finite; kFailedPrecondition when ffmpeg is not on PATH;
  // the errno of starting it.
  static Result<std::unique_ptr<Mp4Stream>> Start(const std::string& path, int64_t height_px,
                                                  int64_t width_px, double fps);

  // A stream not finished is cancelled: ffmpeg is killed and reaped; the
  // partial file is left where it is (the caller removes it).
  ~Mp4Stream();
  Mp4Stream(const Mp4Stream&) = delete;
  Mp4Stream& operator=(const Mp4Stream&) = delete;

  // Bytes of one frame: height_px * width_px * 3 (uint8 HWC RGB).
  uint64_t frame_bytes() const { return frame_bytes_; }
  // Frames appended so far.
  int64_t frames_appended() const { return frames_appended_; }

  // Sends `frames`, uint8 [n, height_px, width_px, 3] RGB, C-contiguous
  // (whole frames), to ffmpeg, blocking while it encodes earlier frames.
  // `frames` is read during the call only.
  // Errors: kInvalidArgument when frames.size() is not a multiple of
  // frame_bytes(); kFailedPrecondition after Finish(); kIoError (EPIPE)
  // when ffmpeg has exited or was cancelled; nothing is sent after a failed
  // Append (every later call returns its error).
  Status Append(std::span<const uint8_t> frames);

  // Ends the input, waits for ffmpeg to write the file and reaps it. OK:
  // `path` is a complete MP4 of the appended frames. Errors: kIoError with
  // ffmpeg's exit status (or the signal that ended it) when it failed
  // (e.g. `path` not writable) or was cancelled, else the error of a
  // failed Append; kFailedPrecondition when no frame was appended (an MP4
  // needs one). Calling it again returns the same Status.
  Status Finish();

  // Kills ffmpeg now (SIGKILL): an Append() blocked in another thread
  // returns kIoError promptly, and Finish() reports the kill. The partial
  // file is left for the caller to remove. Safe to call concurrently with
  // Append(), not with Finish() or the destructor.
  void Cancel() noexcept;

 private:
  Mp4Stream(std::unique_ptr<ChildProcess> ffmpeg, std::string path, uint64_t frame_bytes);

  std::unique_ptr<ChildProcess> ffmpeg_;
  std::string path_;
  uint64_t frame_bytes_;
  int64_t frames_appended_ = 0;
  Status append_error_;  // the first failed Append
  bool finished_ = false;
  Status finish_status_;  // valid once finished_
};

// Writes `path`: the video stream of the MP4 `video_path` (e.g. one written
// by Mp4Stream) copied as it is (`-c:v copy`, not re-encoded), plus the
// audio of the WAV `wav_path` encoded as WriteMp4WithAudio encodes it
// (AAC-LC, ffmpeg's native `aac`, 192 kb/s, the WAV's rate and channels);
// neither stream cut to the other's length (no `-shortest`), the moov atom
// at the front (+faststart). Both inputs are read as plain files even when
// their names look like URLs (ffmpeg's `file:`). `path` must differ from
// both inputs. Errors: kNotFound when `video_path` or `wav_path` is not an
// existing regular file; kFailedPrecondition when ffmpeg is not on PATH;
// kIoError when ffmpeg fails (a partial `path` may be left).
// Thread-safety: may run concurrently on different outputs.
Status MuxWavIntoMp4(const std::string& video_path, const std::string& wav_path,
                     const std::string& path);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_MP4_STREAM_H_
