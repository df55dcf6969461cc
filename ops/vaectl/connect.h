// Connecting vaectl to the daemon, with the one error message users see
// when it is down.
#ifndef VAED_OPS_VAECTL_CONNECT_H_
#define VAED_OPS_VAECTL_CONNECT_H_

#include <memory>
#include <string>

#include "ops/vaectl/commands.h"
#include "vaed/client.h"
#include "vaed/status.h"

namespace vaed::vaectl {

// Connects as client "vaectl". On failure prints to stderr
//   "vaed is not running at <socket>: <reason>"   (kUnavailable), or
//   "vaectl: cannot talk to vaed at <socket>: <status>"
// and returns nullptr with *exit_code set (kExitUnavailable or
// kExitFailure).
std::unique_ptr<client::Client> ConnectOrExplain(const GlobalOptions& global, int* exit_code);

// Prints "vaectl <what>: <status>" to stderr and returns the exit code for it.
int ReportFailure(const std::string& what, const Status& status);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_CONNECT_H_
