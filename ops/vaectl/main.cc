// vaectl: operate a running vaed daemon (status, top, quarantine, decode):
// the command line; each subcommand runs in its own *_command.cc.
#include <CLI/CLI.hpp>
#include <string>

#include "ops/common/enum_option.h"
#include "ops/vaectl/commands.h"
#include "ops/vaectl/plan_command.h"

namespace {

constexpr const char* kDescription =
    "vaectl: operate vaed, the per-node VAE decode sidecar.\n"
    "Talks to a running daemon over its control socket; latents and frames travel\n"
    "through POSIX shared memory.";

constexpr const char* kFooter =
    "Examples:\n"
    "  vaectl status\n"
    "  vaectl --socket /tmp/vaed/vaed.sock status --json\n"
    "  vaectl top --interval 2\n"
    "  vaectl quarantine list\n"
    "  vaectl quarantine release pid:4242\n"
    "  vaectl decode ../shared/data/taef2/video_bikes.safetensors --model taef2 --format mp4\n"
    "  vaectl decode --random-latent 1,32,64,64 --model demo --out demo.png\n"
    "  vaectl decode --audio-latent ../shared/golden/h3/audio_case_stereo.safetensors --model h3\n"
    "\n"
    "Exit status: 0 ok, 1 a request or file operation failed or the command line is\n"
    "invalid, 2 vaed is not running\n"
    "(or not answering) at the socket, 3 vaed answered but reports itself unhealthy.";

constexpr const char* kDecodeDescription =
    "Decode a video and/or audio latent through the daemon, write PNG/MP4/raw frames and WAV "
    "audio, report timings, PSNR and audio checks";

constexpr const char* kDecodeFooter =
    "Reads LATENT_FILE (safetensors; tensor --key, e.g. float32 [N,32,h,w] for TAEF2,\n"
    "[1,24,T,h,w] for the H3 video decoder) or generates --random-latent, and/or an\n"
    "audio latent (--audio-latent FILE, tensor --audio-key, or --random-audio-latent;\n"
    "H3: float32 [channels 1|2, 32, T], 800 samples per latent frame at 32000 Hz).\n"
    "Asks the daemon for the output sizes (plan), decodes once into shared memory and\n"
    "writes PNG frames (frame_0000.png, ...), an H.264 yuv420p MP4, or raw uint8 NHWC\n"
    "RGB bytes with a JSON sidecar; PNG and MP4 need the ffmpeg CLI. Audio is written\n"
    "as a WAV file (--wav-format pcm16 or float32): --audio-out, else beside the video\n"
    "output (clip.mp4 -> clip.wav), else <audio latent stem>.wav; with --format mp4 the\n"
    "MP4 also carries it as AAC. --format none writes no video, and a WAV only where\n"
    "--audio-out names one.\n"
    "\n"
    "--format mp4 streams: the daemon announces each part of the output as soon as it\n"
    "is final (H3: after each temporal window; TAEF2: after each frame batch) and\n"
    "vaectl feeds those frames to one ffmpeg through a pipe while the rest decodes;\n"
    "the audio is muxed in at the end (the video is not re-encoded). --no-stream\n"
    "encodes after the whole decode instead: the same frames and audio. The report's\n"
    "\"mp4 after reply\" row (JSON mp4_streamed, mp4_tail_seconds) says how long the\n"
    "MP4 took after the decode. A decode that fails leaves no partial MP4.\n"
    "\n"
    "A joint request must satisfy the daemon's A/V length rule: audio latent frames =\n"
    "round(video frames / fps * 40) for H3 (fps: --fps, also the MP4's rate), unless\n"
    "--independent-lengths.\n"
    "\n"
    "The video decodes tile-parallel on a group of the daemon's VAE ranks: --group-size N\n"
    "(0 = the daemon's group.size; one of its group.qualified_sizes). The bytes do not\n"
    "depend on it. The report's group line names the group, its generation, each rank's\n"
    "tiles and decode seconds and the imbalance (max / mean), and any fallback.\n"
    "\n"
    "Prints the daemon's timing per component, the geometry, output checks (audio rms,\n"
    "peak, clipped %, non-finite, constant), the A/V lengths, warm/cold and the model\n"
    "(loudly when it has demo weights). When the file also holds the original pixels\n"
    "(--original-key) and/or a reference decode (--reference-key), it prints the PSNR\n"
    "of the decode and of the reference vs the original (mean over frames of\n"
    "10*log10(255^2/MSE), MSE over all uint8 values in float64), their difference,\n"
    "and the max |diff| and number of values that differ from the reference. When the\n"
    "audio latent file holds a reference waveform (--audio-reference-key, float32 with\n"
    "channels*samples values) it prints the max |diff| of the float32 samples.\n"
    "\n"
    "Examples:\n"
    "  vaectl decode ../shared/data/taef2/photo_astronaut.safetensors --model taef2 --out "
    "astronaut.png\n"
    "  vaectl decode ../shared/data/taef2/video_bikes.safetensors --model taef2 --format mp4 --fps "
    "25\n"
    "  vaectl decode ../shared/data/taef2/video_bikes.safetensors --model taef2 --format mp4 "
    "--no-stream\n"
    "  vaectl decode ../shared/golden/h3/video_case_grid_2x2.safetensors --model h3 --format "
    "mp4 --reference-key frames_u8 --stack-tiling on\n"
    "  vaectl decode ../shared/golden/h3/video_case_one_tile.safetensors --reference-key "
    "frames_u8 \\\n"
    "      --audio-latent ../shared/golden/h3/audio_case_odd_length.safetensors --model h3 "
    "--format mp4\n"
    "  vaectl decode ../shared/golden/h3/video_case_grid_2x2.safetensors --model h3 --format "
    "none --group-size 2\n"
    "  vaectl decode --random-audio-latent 2,32,40 --model h3 --wav-format float32 --json\n"
    "  vaectl decode --random-latent 2,32,16,16 --seed 7 --model demo --format none --json";

using vaed::vaectl::DecodeCommandOptions;
using vaed::vaectl::GlobalOptions;
using vaed::vaectl::TopCommandOptions;

// A validator of numbers in (0, max] (NaN fails): "" or "<flag> <value>
// must be <must_be>". `name` is what --help shows for it.
CLI::Validator PositiveAtMost(const std::string& flag, double max, const std::string& must_be,
                              const std::string& name) {
  return CLI::Validator(
      [flag, max, must_be](std::string& v) -> std::string {
        try {
          const double x = std::stod(v);
          if (x > 0 && x <= max) return "";  // false for NaN
        } catch (const std::exception&) {
        }
        return flag + " " + v + " must be " + must_be;
      },
      name);
}

void AddGlobalOptions(CLI::App& app, GlobalOptions* global) {
  app.add_option("--socket", global->socket,
                 std::string("vaed control socket (Unix socket path); default: $") +
                     vaed::client::kSocketEnvironmentVariable + " when set, else " +
                     vaed::client::kDefaultSocket);
  app.add_flag("--json", global->json, "print one JSON object instead of text");
  app.add_option("--connect-timeout-ms", global->connect_timeout_ms,
                 "how long to wait for the daemon's hello reply")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

CLI::App* AddStatusCommand(CLI::App& app) {
  CLI::App* status = app.add_subcommand(
      "status", "Show daemon health, uptime, models, clients, regions and request counters");
  status->footer(
      "Shows version, health, uptime, pid and socket; every model (kind, demo flag,\n"
      "weights path and sha256, resident memory); connected clients, registered regions,\n"
      "requests served/failed, protocol errors, queue depth and intra-op threads.\n"
      "Exit status: 0 healthy, 2 not running, 3 unhealthy.");
  return status;
}

// --latent-space: the space of the request's latents (the client's enum).
// Listed as "{denormalized,normalized}", the order its error has always had
// (client/python/tests/test_latent_space.py matches it).
void AddLatentSpaceOption(CLI::App* cmd, vaed::client::LatentSpace* space) {
  static const vaed::ops::EnumNames<vaed::client::LatentSpace> kNames = {
      {"denormalized", vaed::client::LatentSpace::kDenormalized},
      {"normalized", vaed::client::LatentSpace::kNormalized}};
  vaed::ops::AddEnumOption(*cmd, "--latent-space", space, kNames,
                "the latents' space: normalized (the DiT's; the daemon de-normalises them) or "
                "denormalized (already latent * std + mean, as diffusers' "
                "AutoencoderKLMiniMaxH3.decode takes them); same frames either way");
}

CLI::App* AddPlanCommand(CLI::App& app, vaed::vaectl::PlanCommandOptions* plan) {
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "What decoding a latent shape would produce, without decoding: output sizes, "
      "tile grid, temporal windows");
  cmd->add_option("--shape", plan->shape,
                  "video latent shape, e.g. 1,24,33,96,168 for H3 (float32)")
      ->type_name("N,C,...");
  cmd->add_option("--audio-shape", plan->audio_shape,
                  "audio latent shape, e.g. 2,32,150 for H3 (float32)")
      ->type_name("C,32,T");
  cmd->add_option("--model", plan->model, "model to plan for (default: the daemon's default)");
  cmd->add_option("--fps", plan->fps, "video frames per second for the A/V rule (0 = the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--independent-lengths", plan->independent_lengths,
                "do not require the audio length to match the video's");
  AddLatentSpaceOption(cmd, &plan->latent_space);
  cmd->footer(
      "Asks the daemon (a plan-only request: nothing is decoded or allocated) and prints\n"
      "the output shape and bytes, a tiled model's tiles per temporal window and windows,\n"
      "and the audio output. A shape the model or the memory limit refuses fails with\n"
      "the daemon's error. Example:\n"
      "  vaectl plan --shape 1,24,33,96,168 --model h3");
  return cmd;
}

CLI::App* AddTopCommand(CLI::App& app, TopCommandOptions* top) {
  CLI::App* top_cmd = app.add_subcommand(
      "top", "Live view: requests/s, outcomes, queue, latency per component, rank utilisation");
  top_cmd->footer(
      "Polls the daemon's status every --interval seconds and redraws: version, pid, uptime,\n"
      "health and socket; requests/s and totals; outcome counts; queue depth, in-flight\n"
      "decodes, clients and quarantined clients; memory and the metrics endpoint; each\n"
      "component's count, p50/p95/mean since start and mean over the last refresh; each\n"
      "rank's utilisation over the last refresh (busy seconds gained / wall seconds) and\n"
      "last imbalance (max / mean rank time); the VAE groups. The first frame shows\n"
      "averages since the daemon started. A daemon that goes away is shown as \"daemon\n"
      "unavailable\" and polled again. Quit with q (stdin a terminal), Ctrl-C or SIGTERM.\n"
      "Exit status: that of the last refresh: 0 answered, 2 not running.");
  top_cmd->add_option("--interval", top->interval_seconds, "seconds between refreshes (> 0)")
      ->capture_default_str()
      ->type_name("SECONDS")
      ->check(PositiveAtMost("--interval", 86400, "a number of seconds in (0, 86400]", ""));
  top_cmd
      ->add_option("--iterations", top->iterations,
                   "frames to show, then exit (0 = until q, Ctrl-C or SIGTERM)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  top_cmd->add_flag("--no-clear", top->no_clear,
                    "append each frame instead of clearing the screen (logs, pipes)");
  return top_cmd;
}

// `vaectl quarantine list` and `vaectl quarantine release TARGET`.
struct QuarantineCommands {
  CLI::App* list;
  CLI::App* release;
};

QuarantineCommands AddQuarantineCommands(CLI::App& app, std::string* release_target) {
  CLI::App* quarantine = app.add_subcommand(
      "quarantine", "List quarantined client processes, or release one (list | release TARGET)");
  quarantine->require_subcommand(1);
  quarantine->footer(
      "A client process (peer uid + pid) that faults quarantine.fault_threshold times within\n"
      "quarantine.window_ms (protocol violations, bad regions, invalid requests, memory\n"
      "faults, quota overruns) is refused for quarantine.duration_ms, doubling on repeat.\n"
      "Release needs root, the daemon's user or server.admin_uids.");
  CLI::App* quarantine_list =
      quarantine->add_subcommand("list", "Show quarantined processes and the connected clients");
  CLI::App* quarantine_release =
      quarantine->add_subcommand("release", "Lift a quarantine now (and reset its back-off)");
  quarantine_release
      ->add_option("TARGET", *release_target, "a client id, pid:N, uid:N, a client name, or 'all'")
      ->required();
  return {quarantine_list, quarantine_release};
}

// A latent given as the file `file_option` or as a random shape
// `random_option` (shown as `shape_name`), not both.
void AddLatentChoice(CLI::App* decode_cmd, const std::string& file_option, std::string* file,
                     const std::string& file_help, const std::string& random_option,
                     std::string* random_shape, const std::string& random_help,
                     const std::string& shape_name) {
  auto* file_opt = decode_cmd->add_option(file_option, *file, file_help)->check(CLI::ExistingFile);
  auto* random_opt =
      decode_cmd->add_option(random_option, *random_shape, random_help)->type_name(shape_name);
  file_opt->excludes(random_opt);
}

// LATENT_FILE, --random-latent, the audio latent, --seed and the keys.
void AddLatentOptions(CLI::App* decode_cmd, DecodeCommandOptions* decode) {
  AddLatentChoice(decode_cmd, "LATENT_FILE", &decode->latent_file,
                  "safetensors file holding the video/image latent (optional with an audio "
                  "latent)",
                  "--random-latent", &decode->random_latent,
                  "decode a seeded random float32 latent of this shape instead of a file (e.g. "
                  "1,32,64,64 for the demo model, 1,24,7,16,16 for h3_video)",
                  "D0,D1,...");
  AddLatentChoice(decode_cmd, "--audio-latent", &decode->audio_latent_file,
                  "safetensors file holding the audio latent (H3: float32 [1|2, 32, T])",
                  "--random-audio-latent", &decode->random_audio_latent,
                  "decode a seeded random float32 audio latent of this shape instead of a file "
                  "(e.g. 2,32,40: stereo, 1 s for H3)",
                  "C,32,T");
  decode_cmd
      ->add_option("--seed", decode->seed, "seed of --random-latent and --random-audio-latent")
      ->capture_default_str();
  decode_cmd->add_option("--key", decode->key, "tensor holding the latent")->capture_default_str();
}

// How the daemon decodes: tiling, profile, compiled plans, model.
void AddDecodeChoiceOptions(CLI::App* decode_cmd, DecodeCommandOptions* decode) {
  static const vaed::ops::EnumNames<vaed::client::StackTiling> kStackTilingNames = {
      {"default", vaed::client::StackTiling::kDefault},
      {"off", vaed::client::StackTiling::kOff},
      {"on", vaed::client::StackTiling::kOn},
      {"auto", vaed::client::StackTiling::kAuto}};
  static const vaed::ops::EnumNames<vaed::client::Compile> kCompileNames = {
      {"default", vaed::client::Compile::kDefault},
      {"off", vaed::client::Compile::kOff},
      {"on", vaed::client::Compile::kOn},
      {"auto", vaed::client::Compile::kAuto}};
  vaed::ops::AddEnumOption(*decode_cmd, "--stack-tiling", &decode->stack_tiling, kStackTilingNames,
                "tile scheduling of tiled models: default (the model's), off, on or auto; "
                "the output is the same, speed and memory differ");
  decode_cmd->add_option("--profile", decode->profile,
                         "decode profile: safe, optimized, diagnostic or student, within what the "
                         "daemon allows (vaectl status); empty = the daemon's default");
  vaed::ops::AddEnumOption(*decode_cmd, "--compile", &decode->compile, kCompileNames,
                "compiled plans by shape bucket (models with compiled_plans): default (off "
                "under safe, auto otherwise), off, on or auto; same output");
  decode_cmd->add_option("--model", decode->model,
                         "model to decode with (default: the daemon's default model)");
  AddLatentSpaceOption(decode_cmd, &decode->latent_space);
  decode_cmd
      ->add_option("--deadline-ms", decode->deadline_ms,
                   "give up when the daemon has not finished within this many milliseconds "
                   "(queue time included); 0 = no deadline. Nothing is written then")
      ->capture_default_str()
      ->type_name("MS");
}

// Video outputs and the comparisons with the latent file's tensors.
void AddVideoOutputOptions(CLI::App* decode_cmd, DecodeCommandOptions* decode) {
  decode_cmd
      ->add_option("--out", decode->out,
                   "png: directory (default <stem>_frames/) or a .png file for one "
                   "frame; mp4/raw: file (default <stem>.mp4 / <stem>.u8) or directory")
      ->type_name("DIR_OR_FILE");
  vaed::ops::AddEnumOption(*decode_cmd, "--format", &decode->format, vaed::vaectl::VideoFileFormatNames(),
                "what to write: png, mp4, raw or none");
  decode_cmd->add_flag(
      "--no-stream", decode->no_stream,
      "mp4: encode after the whole decode instead of feeding each frame to "
      "ffmpeg as soon as the daemon announces it final; the same frames and audio");
  decode_cmd
      ->add_option("--fps", decode->fps,
                   "video frame rate: of the MP4, and the one the daemon's A/V length rule and "
                   "durations use")
      ->capture_default_str()
      ->check(PositiveAtMost("--fps", 1000, "a frame rate in (0, 1000] frames per second",
                             "FPS in (0, 1000]"));
  decode_cmd
      ->add_option("--reference-key", decode->reference_key,
                   "uint8 [N,H,W,3] or [H,W,3] reference decode in the file to compare "
                   "with ('' to skip)")
      ->capture_default_str();
  decode_cmd->add_option("--original-key", decode->original_key,
                         "uint8 original pixels in the file (default: frames_u8, then "
                         "image_u8, unless that is the --reference-key; 'none': no original)");
}

// The audio latent's key, the WAV output, its comparison, the A/V rule.
void AddAudioOptions(CLI::App* decode_cmd, DecodeCommandOptions* decode) {
  decode_cmd->add_option("--audio-key", decode->audio_key, "tensor holding the audio latent")
      ->capture_default_str();
  decode_cmd
      ->add_option("--audio-out", decode->audio_out,
                   "WAV file, or directory for <audio latent stem>.wav (default: beside the "
                   "video output, e.g. clip.mp4 -> clip.wav, else <audio latent stem>.wav)")
      ->type_name("FILE_OR_DIR");
  vaed::ops::AddEnumOption(*decode_cmd, "--wav-format", &decode->wav_format,
                vaed::vaectl::WavSampleFormatNames(),
                "WAV samples: pcm16 (16-bit PCM) or float32 (IEEE float, lossless)");
  decode_cmd
      ->add_option("--audio-reference-key", decode->audio_reference_key,
                   "float32 reference waveform in the audio latent file to compare with, "
                   "channels*samples values ('' to skip)")
      ->capture_default_str();
  decode_cmd->add_flag("--independent-lengths", decode->independent_lengths,
                       "let audio and video lengths differ (waives the daemon's A/V length rule)");
}

CLI::App* AddDecodeCommand(CLI::App& app, DecodeCommandOptions* decode) {
  CLI::App* decode_cmd = app.add_subcommand("decode", kDecodeDescription);
  decode_cmd->footer(kDecodeFooter);
  AddLatentOptions(decode_cmd, decode);
  AddDecodeChoiceOptions(decode_cmd, decode);
  AddVideoOutputOptions(decode_cmd, decode);
  AddAudioOptions(decode_cmd, decode);
  decode_cmd
      ->add_option("--group-size", decode->group_size,
                   "ranks of the daemon's VAE group that decode the video tile-parallel: 0 = the "
                   "daemon's group.size, else one of its group.qualified_sizes (vaectl status "
                   "lists the groups); same output, the report's group line shows the ranks")
      ->capture_default_str()
      ->type_name("N");
  vaed::ops::AddEnumOption(*decode_cmd, "--progress", &decode->progress, vaed::vaectl::ProgressChoiceNames(),
                "progress while the daemon decodes, on stderr: auto (a bar with ETA when "
                "stderr is a terminal and not --json), bar, lines (one line per temporal "
                "window / frame batch / audio) or none");
  return decode_cmd;
}

}  // namespace

int main(int argc, char** argv) {
  GlobalOptions global;
  DecodeCommandOptions decode;
  TopCommandOptions top;
  std::string release_target;

  CLI::App app{kDescription, "vaectl"};
  app.footer(kFooter);
  app.require_subcommand(1);
  // Global options may also follow the subcommand: `vaectl status --json`.
  app.fallthrough();
  AddGlobalOptions(app, &global);
  CLI::App* status = AddStatusCommand(app);
  CLI::App* top_cmd = AddTopCommand(app, &top);
  const QuarantineCommands quarantine = AddQuarantineCommands(app, &release_target);
  AddDecodeCommand(app, &decode);
  vaed::vaectl::PlanCommandOptions plan;
  CLI::App* plan_cmd = AddPlanCommand(app, &plan);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; a usage error is an invalid option (kExitFailure),
    // not one of CLI11's own codes (100-127).
    return app.exit(e) == 0 ? vaed::vaectl::kExitOk : vaed::vaectl::kExitFailure;
  }
  global.socket = vaed::client::Client::SocketPath(global.socket);

  if (status->parsed()) return vaed::vaectl::RunStatus(global);
  if (top_cmd->parsed()) return vaed::vaectl::RunTop(global, top);
  if (plan_cmd->parsed()) return vaed::vaectl::RunPlan(global, plan);
  if (quarantine.list->parsed()) return vaed::vaectl::RunQuarantineList(global);
  if (quarantine.release->parsed()) {
    return vaed::vaectl::RunQuarantineRelease(global, release_target);
  }
  return vaed::vaectl::RunDecode(global, decode);
}
