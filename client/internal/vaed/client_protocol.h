// The protocol messages (vaed.v1) behind vaed::client::Client's calls, for
// the tools built in this tree (vaectl, the benchmarks, the Python module,
// the tests): they print or check every field of a reply through its
// generated class (text and JSON forms, reflection), and the tests send
// malformed input. Not installed: a program outside the tree uses
// vaed/client.h and its own reply types (vaed/replies.h), and links no
// protobuf.
//
// Each call is the Client call of the same name, with the same request,
// retries, callbacks, errors and thread-safety (vaed/client.h); only the
// reply stays the protocol message. What links this links the client
// library statically (the vaed_client_static target): libvaed_client.so
// exports no protocol class.
#ifndef VAED_CLIENT_PROTOCOL_H_
#define VAED_CLIENT_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vaed/client.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::client {

class ClientProtocol {
 public:
  // The reply to `client`'s latest Hello; the reference lives as long as
  // the Client (Client::hello()).
  static const v1::HelloReply& Hello(const Client& client);
  static Result<v1::DecodeReply> PlanDecode(Client& client, const std::string& model,
                                            DType latent_dtype,
                                            const std::vector<int64_t>& latent_shape,
                                            OutputFormat format);
  static Result<v1::DecodeReply> PlanDecode(Client& client, const DecodeRequest& request);
  static Result<v1::DecodeReply> Decode(Client& client, const DecodeRequest& request);
  static Result<v1::StatusReply> GetStatus(Client& client);
  static Result<v1::ReleaseQuarantineReply> ReleaseQuarantine(Client& client,
                                                              const std::string& target);

  // Sends one raw, already-serialized message and waits for the reply;
  // for tests of the daemon's handling of malformed input. Never retried
  // and never a reason to reconnect: replies (kUnknownClient included) come
  // back as they are; a daemon found gone is kUnavailable, and the next
  // call (SendRaw too) reconnects before it sends. When `bytes` parse as a
  // vaed.v1.Request, only the reply with its request_id (or 0) is taken;
  // otherwise any reply that is not to a heartbeat sent while waiting.
  static Result<v1::Reply> SendRaw(Client& client, const std::string& bytes);
};

}  // namespace vaed::client

#endif  // VAED_CLIENT_PROTOCOL_H_
