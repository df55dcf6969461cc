// A test seam inside the client library: named points where a test can
// make the library throw, to check that no exception leaves the C ABI, a
// Client call or the heartbeat thread, and that the Client works on
// afterwards. Internal: neither installed nor exported from
// libvaed_client.so (tests that use it link the object library
// vaed_client_objects).
//
// The points:
//   "<C ABI function>"   e.g. "vaed_decode": at the start of each C ABI
//                        entry point that returns a vaed_status
//   "client.exchange"    after a request was sent, before its reply is read
//                        (the connection is mid-request)
//   "client.heartbeat"   in the heartbeat thread, before each Heartbeat
//   "client.start_heartbeat"  in Client::Connect, before the heartbeat
//                        thread is started
//
// Thread-safety: SetFaultHook and FaultPoint may be called from any thread;
// the hook runs on the thread that reaches the point.
#ifndef VAED_CLIENT_SRC_FAULT_POINTS_H_
#define VAED_CLIENT_SRC_FAULT_POINTS_H_

namespace vaed::client::internal {

// Called with the point's name each time a point is reached; throws to
// inject a fault there, returns to let the library go on.
using FaultHook = void (*)(const char* point);

// Installs `hook` (nullptr, the default, removes it).
void SetFaultHook(FaultHook hook) noexcept;

// Calls the installed hook, if any, with `point`; lets what it throws pass.
void FaultPoint(const char* point);

}  // namespace vaed::client::internal

#endif  // VAED_CLIENT_SRC_FAULT_POINTS_H_
