#include <iostream>

#include "ops/vaectl/commands.h"
#include "ops/vaectl/connect.h"
#include "ops/vaectl/status_report.h"

namespace vaed::vaectl {

int RunStatus(const GlobalOptions& global) {
  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;
  auto status = client->GetStatus();
  if (!status.ok()) return ReportFailure("status", status.status());
  if (global.json) {
    std::cout << StatusToJson(*status).dump(2) << "\n";
  } else {
    std::cout << FormatStatus(*status);
  }
  return status->healthy ? kExitOk : kExitUnhealthy;
}

}  // namespace vaed::vaectl
