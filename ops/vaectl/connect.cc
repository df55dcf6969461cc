#include "ops/vaectl/connect.h"

#include <iostream>
#include <string_view>

namespace vaed::vaectl {

std::unique_ptr<client::Client> ConnectOrExplain(const GlobalOptions& global, int* exit_code) {
  client::ClientOptions options;
  options.socket = global.socket;
  options.client_name = "vaectl";
  options.connect_timeout_ms = global.connect_timeout_ms;
  // vaectl's calls are short-lived; the daemon does not need to keep its
  // regions alive across pauses.
  options.heartbeats = false;
  auto connected = client::Client::Connect(options);
  if (connected.ok()) {
    *exit_code = kExitOk;
    return std::move(connected).value();
  }
  const Status& s = connected.status();
  if (s.code() == StatusCode::kUnavailable) {
    // The client's message may already open with "vaed is not running";
    // say it once, with the socket.
    constexpr std::string_view kPrefix = "vaed is not running: ";
    std::string reason = s.message();
    if (reason.starts_with(kPrefix)) reason.erase(0, kPrefix.size());
    std::cerr << "vaed is not running at " << global.socket << ": " << reason << "\n";
    *exit_code = kExitUnavailable;
  } else {
    std::cerr << "vaectl: cannot talk to vaed at " << global.socket << ": " << s.ToString() << "\n";
    *exit_code = kExitFailure;
  }
  return nullptr;
}

int ReportFailure(const std::string& what, const Status& status) {
  std::cerr << "vaectl " << what << ": " << status.ToString() << "\n";
  return status.code() == StatusCode::kUnavailable ? kExitUnavailable : kExitFailure;
}

}  // namespace vaed::vaectl
