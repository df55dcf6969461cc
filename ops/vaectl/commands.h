// The subcommands of vaectl. Each returns the process exit code and prints
// its result to stdout (errors to stderr).
//
// Exit codes: kExitOk; kExitFailure (a request failed, a file could not be
// read or written); kExitUnavailable (the daemon is not running or does not
// answer at the socket); kExitUnhealthy (status: the daemon answered but
// reports itself unhealthy).
#ifndef VAED_OPS_VAECTL_COMMANDS_H_
#define VAED_OPS_VAECTL_COMMANDS_H_

#include <cstdint>
#include <string>

#include "vaed/client.h"

namespace vaed::vaectl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUnavailable = 2;
inline constexpr int kExitUnhealthy = 3;

struct GlobalOptions {
  std::string socket = client::kDefaultSocket;
  bool json = false;
  int connect_timeout_ms = 3000;
};

struct DecodeCommandOptions {
  std::string latent_file;    // safetensors file; empty with random_latent
  std::string random_latent;  // "N,C,H,W": seeded random float32 latent instead of a file
  uint64_t seed = 0;
  std::string key = "latent";
  std::string stack_tiling = "default";  // default | off | on | auto
  std::string model;  // "" = the daemon's default model
  std::string out;    // see PlanOutput() in decode_report.h
  std::string format = "png";
  double fps = 24.0;
  std::string reference_key = "decoded_u8";
  std::string original_key;  // "" = frames_u8, then image_u8 (not the reference); "none"
};

int RunStatus(const GlobalOptions& global);
int RunDecode(const GlobalOptions& global, const DecodeCommandOptions& options);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_COMMANDS_H_
