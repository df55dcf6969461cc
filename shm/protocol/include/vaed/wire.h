// Conversions between vaed's native vocabulary (Status, DType, TensorRef)
// and the vaed.v1 wire messages, shared by client and daemon so that both
// sides agree on one mapping.
//
// Thread-safety: pure functions.
#ifndef VAED_WIRE_H_
#define VAED_WIRE_H_

#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed {

// The protocol version this build speaks (vaed.v1.PROTOCOL_VERSION_CURRENT).
inline constexpr uint32_t kProtocolVersion = v1::PROTOCOL_VERSION_CURRENT;

v1::DType ToProto(DType dtype);
DType FromProto(v1::DType dtype);

v1::Error ToProtoError(const Status& status);
// A non-OK Status from a wire Error (an unknown code becomes kInternal with
// the code number in the message; code OK becomes kInternal too, since an
// Error message must never carry OK).
Status FromProtoError(const v1::Error& error);

void ToProto(const TensorRef& ref, v1::TensorRef* out);
// Checks the client-supplied fields (dtype known, shape dims >= 0, the byte
// size equal to numel * sizeof(dtype)); errors name `what` (e.g. "latent")
// and the field.
Result<TensorRef> FromProto(const v1::TensorRef& ref, std::string_view what);

}  // namespace vaed

#endif  // VAED_WIRE_H_
