// `vaectl decode --format mp4` (without --no-stream): the frames of a
// streamed decode (client::DecodeRequest::final_range) go to one
// ffmpeg (ops::Mp4Stream) as the daemon announces them final, so the
// encoding overlaps the decode; the audio, written as a WAV after the
// decode, is muxed in at the end without re-encoding the video. The MP4
// holds what --no-stream writes (WriteMp4 / WriteMp4WithAudio): the same
// H.264 stream of the same frames and the same AAC audio.
#ifndef VAED_OPS_VAECTL_STREAMED_MP4_H_
#define VAED_OPS_VAECTL_STREAMED_MP4_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "ops/common/frame_writer.h"
#include "ops/common/mp4_stream.h"
#include "ops/vaectl/output_plan.h"
#include "vaed/mutex.h"
#include "vaed/replies.h"
#include "vaed/status.h"

namespace vaed::vaectl {

// One streamed MP4 output. Owns a writer thread that appends announced
// frames to the encoder; Finish() or Abort() (or the destructor) joins it.
//
// Thread-safety: OnFinalRange() may be called from any one thread (the
// thread calling client::Client::Decode()) while the writer runs; Finish()
// and Abort() from the thread that created the object, after Decode()
// returned.
class StreamedMp4Output {
 public:
  // `plan`: an OutputKind::kMp4 plan. The video is encoded to a temporary
  // file beside plan.path (TemporaryVideoPath); with plan.mux_audio Finish()
  // muxes plan.wav into a second one (TemporaryMuxPath); only a complete
  // MP4 is renamed to plan.path, so a failure leaves a file already at
  // plan.path as it was. `output`: the whole planned video
  // output, uint8 [frames, height_px, width_px, 3] RGB (the request's
  // output region); not owned, must outlive this object; read only where
  // announced final. `fps`: the MP4's frame rate.
  // Starts ffmpeg and the writer thread. Errors: kInvalidArgument for a
  // plan that is not kMp4 or inconsistent `output`; kIoError when the
  // temporary file beside plan.path cannot be created (checked before any
  // decode); those of ops::Mp4Stream::Start.
  static Result<std::unique_ptr<StreamedMp4Output>> Start(const OutputPlan& plan,
                                                          const ops::RgbFrames& output, double fps);

  // Abort() unless Finish() was called.
  ~StreamedMp4Output();
  StreamedMp4Output(const StreamedMp4Output&) = delete;
  StreamedMp4Output& operator=(const StreamedMp4Output&) = delete;

  // The body of DecodeRequest::final_range. A "video" range (pixel frames)
  // is queued for the writer thread; it returns at once and never writes
  // to ffmpeg (it runs under the client's lock, where a blocked pipe would
  // hold up the connection's heartbeats). Other stages are ignored (the
  // audio is written after the decode). A range that does not continue
  // the previous one, or ends past the planned frames, is not queued; the
  // inconsistency is what Finish() returns.
  void OnFinalRange(const client::FinalRange& range);

  // After a successful Decode(): queues the frames not announced yet (all
  // of them, from a daemon that does not stream), waits until the writer
  // has sent every frame, finishes the encoder and, with plan.mux_audio,
  // muxes plan.wav (already written) in, then renames the complete MP4 to
  // plan.path. OK: plan.path is complete. On error nothing partial is left
  // (the temporary files are removed; plan.path is untouched). Errors: an
  // inconsistent announced range (kInternal), the encoder's and
  // ops::MuxWavIntoMp4's. Calling it again returns kFailedPrecondition.
  Status Finish();

  // After a failed Decode(): stops the writer thread and ffmpeg and removes
  // the temporary files (plan.path is untouched). Idempotent; a no-op after
  // Finish().
  void Abort() noexcept;

  // Pixel frames announced final so far (the end of the last video range).
  uint64_t announced_frames() const;

  // Where the video is encoded: "<plan.path>.video-<pid>.mp4", beside the
  // output (so the final rename stays on one file system).
  static std::string TemporaryVideoPath(const std::string& path);
  // Where the audio is muxed in: "<plan.path>.muxed-<pid>.mp4".
  static std::string TemporaryMuxPath(const std::string& path);

 private:
  StreamedMp4Output(const OutputPlan& plan, const ops::RgbFrames& output,
                    std::unique_ptr<ops::Mp4Stream> encoder, std::string video_path);

  // The writer thread: appends queued ranges until closed.
  void WriteQueued();
  // Closes the queue and joins the writer; `cancel` kills ffmpeg first (a
  // writer blocked on the pipe then returns).
  void StopWriter(bool cancel) noexcept;
  // Removes the temporary files (never plan.path).
  void RemoveFiles() const noexcept;
  // The finished video (and plan.wav when muxed) as the complete MP4 at
  // plan.path, by rename. Errors: the mux's; kIoError for the rename.
  Status MoveIntoPlace() const;

  const OutputPlan plan_;
  const ops::RgbFrames output_;
  const std::string video_path_;  // the temporary file the encoder writes
  const uint64_t frame_bytes_;
  // Used by the writer thread until it is joined, then by Finish/Abort.
  std::unique_ptr<ops::Mp4Stream> encoder_;
  Status write_error_;  // the writer's first failed Append

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  // Frame ranges [begin, end) announced and not yet taken by the writer.
  std::deque<std::pair<uint64_t, uint64_t>> queue_ VAED_GUARDED_BY(mu_);
  uint64_t announced_end_ VAED_GUARDED_BY(mu_) = 0;
  Status range_error_ VAED_GUARDED_BY(mu_);
  bool closed_ VAED_GUARDED_BY(mu_) = false;  // no more ranges: drain and exit

  std::thread writer_;
  bool done_ = false;  // Finish() or Abort() ran
};

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_STREAMED_MP4_H_
