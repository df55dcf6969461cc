#include <iostream>

#include "ops/vaectl/commands.h"
#include "ops/vaectl/connect.h"
#include "ops/vaectl/status_report.h"

namespace vaed::vaectl {

int RunQuarantineList(const GlobalOptions& global) {
  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;
  auto status = client->GetStatus();
  if (!status.ok()) return ReportFailure("quarantine list", status.status());
  if (global.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& q : status->quarantined) list.push_back(QuarantineToJson(q));
    std::cout << nlohmann::json{{"quarantined", list},
                                {"quarantines", status->quarantines},
                                {"client_faults", status->client_faults}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << FormatQuarantine(*status);
  }
  return kExitOk;
}

int RunQuarantineRelease(const GlobalOptions& global, const std::string& target) {
  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;
  auto released = client->ReleaseQuarantine(target);
  if (!released.ok()) return ReportFailure("quarantine release", released.status());
  if (global.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& q : released->released) list.push_back(QuarantineToJson(q));
    std::cout << nlohmann::json{{"released", list}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& q : released->released) {
    std::cout << "released pid " << q.pid << " uid " << q.uid << " ('" << q.client_name
              << "', offence " << q.offences << ")\n";
  }
  return kExitOk;
}

}  // namespace vaed::vaectl
