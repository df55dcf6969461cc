// The protocol's reply messages (vaed.v1) copied into the C++ client's own
// reply types (vaed/replies.h), field for field. The copies own their data;
// the message may be discarded afterwards.
//
// Thread-safety: pure functions.
#ifndef VAED_CLIENT_SRC_REPLY_CONVERSION_H_
#define VAED_CLIENT_SRC_REPLY_CONVERSION_H_

#include "vaed/replies.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::client {

HelloReply FromProtocol(const v1::HelloReply& m);
DecodeReply FromProtocol(const v1::DecodeReply& m);
StatusReply FromProtocol(const v1::StatusReply& m);
ReleaseQuarantineReply FromProtocol(const v1::ReleaseQuarantineReply& m);
Progress FromProtocol(const v1::Progress& m);
FinalRange FromProtocol(const v1::FinalRange& m);

}  // namespace vaed::client

#endif  // VAED_CLIENT_SRC_REPLY_CONVERSION_H_
