// The `vaed` command line (CLI11): which options to run with, from the
// embedded defaults, the --config file and the flags.
//
// The flags are defined once, in command_line.cc, and `vaed --help` prints
// them all with their help text; that is the one list. A flag that sets a
// config key names it in its help ("(executor.intra_op_threads)") and takes
// its range from the key's table row (config_keys.h); a test checks that
// every key named in --help exists.
//
// Thread-safety: ParseCommandLine writes to stdout/stderr; call it once, from
// main().
#ifndef VAED_DAEMON_SERVER_COMMAND_LINE_H_
#define VAED_DAEMON_SERVER_COMMAND_LINE_H_

#include <string>

#include "daemon/server/config.h"

namespace vaed::server {

// The outcome of command-line parsing: options to run with, or an exit
// (for --help, --version, --print-config or a usage error).
struct CommandLine {
  DaemonOptions options;
  bool exit_now = false;
  int exit_code = 0;
};

// Parses argv over the embedded defaults and the --config file, then
// ValidateOptions(). --help, --version and --print-config print to stdout
// and exit 0; a usage error (CLI11's message and exit code) or an invalid
// config ("vaed: <message naming the key>", exit 2) prints to stderr.
CommandLine ParseCommandLine(int argc, char** argv);

// What `vaed --help` prints.
std::string CommandLineHelp();

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_COMMAND_LINE_H_
