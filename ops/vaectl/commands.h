// The subcommands of vaectl and their options. Each Run* function returns
// the process exit code and prints its result to stdout (errors to stderr).
#ifndef VAED_OPS_VAECTL_COMMANDS_H_
#define VAED_OPS_VAECTL_COMMANDS_H_

#include <cstdint>
#include <string>

#include "ops/common/audio_writer.h"
#include "ops/vaectl/output_plan.h"
#include "ops/vaectl/progress_format.h"
#include "vaed/client.h"

namespace vaed::vaectl {

// vaectl's exit codes (also listed in `vaectl --help`); an int where the
// Run* functions return them.
enum ExitCode : int {
  kExitOk = 0,           // the command did what was asked
  kExitFailure = 1,      // a request failed, or a file could not be read or written
  kExitUnavailable = 2,  // the daemon is not running or does not answer at the socket
  kExitUnhealthy = 3,    // `status`: the daemon answered but reports itself unhealthy
};

struct GlobalOptions {
  // After parsing: client::Client::SocketPath of --socket (the flag, else
  // $VAED_SOCKET, else the default), so messages name the real path.
  std::string socket;
  bool json = false;
  int connect_timeout_ms = 3000;
};

// `vaectl decode`. A request has a video latent (latent_file or
// random_latent), an audio latent (audio_latent_file or
// random_audio_latent), or both; RunDecode fails with kExitFailure when it
// has neither. Closed sets of values are enums, parsed at their flags.
struct DecodeCommandOptions {
  std::string latent_file;    // safetensors file; empty with random_latent
  std::string random_latent;  // "N,C,H,W": seeded random float32 latent instead of a file
  // Seed of random_latent and random_audio_latent.
  uint64_t seed = 0;
  std::string key = "latent";
  // --stack-tiling default | off | on | auto (DecodeRequest::stack_tiling).
  client::StackTiling stack_tiling = client::StackTiling::kDefault;
  std::string profile;  // "" = the daemon's default
  // --compile default | off | on | auto (DecodeRequest::compile).
  client::Compile compile = client::Compile::kDefault;
  std::string model;  // "" = the daemon's default model
  std::string out;    // see PlanOutput() in output_plan.h
  // --format png | mp4 | raw | none: of the video; kNone also writes no audio.
  VideoFileFormat format = VideoFileFormat::kPng;
  // Video frames per second: the MP4's rate and the request's
  // AvSync.fps (durations and the A/V length rule agree with the file).
  double fps = 24.0;
  std::string reference_key = "decoded_u8";
  std::string original_key;  // "" = frames_u8, then image_u8 (not the reference); "none"

  // Audio (models with the "audio" capability; H3: float32 [channels, 32, T]).
  std::string audio_latent_file;    // safetensors file; empty with random_audio_latent
  std::string random_audio_latent;  // "C,32,T": seeded random float32 latent instead of a file
  std::string audio_key = "latent";
  std::string audio_out;  // see PlanAudioOutput() in output_plan.h
  // --wav-format pcm16 | float32.
  ops::WavSampleFormat wav_format = ops::WavSampleFormat::kPcm16;
  std::string audio_reference_key = "waveform";  // "" = no audio comparison
  // Waive the daemon's A/V length rule for a joint request.
  bool independent_lengths = false;
  // The space of both latents (DecodeRequest::latent_space).
  client::LatentSpace latent_space = client::LatentSpace::kNormalized;
  // Ranks of the daemon's VAE group that decode the video tile-parallel
  // (DecodeRequest::group_size): 0 = the daemon's group.size, otherwise one
  // of its group.qualified_sizes (the daemon refuses others). Same bytes.
  uint32_t group_size = 0;
  // --format mp4: false (default) feeds the frames to ffmpeg as the daemon
  // announces them final (a streamed decode), so encoding overlaps the
  // decode; true encodes after the decode. The same frames and audio either way.
  bool no_stream = false;
  // Milliseconds the daemon may take, queue time included
  // (DecodeRequest::deadline_ms); 0 = no deadline. A decode past it fails
  // and writes nothing (a streamed MP4 is removed).
  uint32_t deadline_ms = 0;
  // Per-window progress on stderr: auto (a bar on a terminal), bar, lines
  // or none (ResolveProgressMode in progress_format.h).
  ProgressChoice progress = ProgressChoice::kAuto;
};

// `vaectl top`.
struct TopCommandOptions {
  // Seconds between refreshes (GetStatus polls); must be finite and > 0.
  // Shorter shows rates over shorter, noisier spans.
  double interval_seconds = 1.0;
  // Frames to show before exiting; 0 = until 'q', SIGINT or SIGTERM.
  int64_t iterations = 0;
  // Append each frame (followed by a blank line) instead of clearing the
  // screen and redrawing: for logs, pipes and tests.
  bool no_clear = false;
};

int RunStatus(const GlobalOptions& global);
// `vaectl top`: a live view of the daemon (frames from RenderTop in
// top_view.h) refreshed every interval_seconds until options.iterations
// frames were shown, SIGINT or SIGTERM arrives, or 'q' is typed (when stdin
// is a terminal, which is put in non-canonical no-echo mode meanwhile and
// restored). A daemon that cannot be reached is shown as "daemon
// unavailable: <reason>" and polled again next refresh; it never ends the
// command. Exit code: that of the last refresh (kExitOk the daemon
// answered, kExitUnavailable it did not); kExitFailure for invalid options
// or global --json (not supported: use `vaectl status --json`).
int RunTop(const GlobalOptions& global, const TopCommandOptions& options);
// `vaectl quarantine list`: quarantined client processes and clients.
int RunQuarantineList(const GlobalOptions& global);
// `vaectl quarantine release TARGET` (a client id, pid:N, uid:N, a client
// name, or "all"); needs an admin peer (root, the daemon's user,
// server.admin_uids). kExitFailure when nothing matched or not allowed.
int RunQuarantineRelease(const GlobalOptions& global, const std::string& target);
int RunDecode(const GlobalOptions& global, const DecodeCommandOptions& options);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_COMMANDS_H_
