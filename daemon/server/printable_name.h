// The rule for names a client chooses (client names, model and profile
// names, quarantine release targets): they end up in logs and replies, so
// printable ASCII only and bounded, and a client cannot forge log lines or
// corrupt the journal.
//
// Thread-safety: pure function.
#ifndef VAED_DAEMON_SERVER_PRINTABLE_NAME_H_
#define VAED_DAEMON_SERVER_PRINTABLE_NAME_H_

#include <string>

#include "vaed/status.h"

namespace vaed::server {

// OK when `name` is at most 128 bytes of printable ASCII (0x20-0x7e);
// otherwise kInvalidArgument naming `field` ("hello.client_name") and the
// first offending byte or the length.
Status CheckPrintableName(const std::string& name, const std::string& field);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_PRINTABLE_NAME_H_
