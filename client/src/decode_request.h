// The wire form of a DecodeRequest (vaed.v1.Decode). Internal to the
// client library.
//
// Thread-safety: pure functions.
#ifndef VAED_CLIENT_SRC_DECODE_REQUEST_H_
#define VAED_CLIENT_SRC_DECODE_REQUEST_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "vaed/client.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::client {

// Translates a user-visible region id to the daemon's; `field` names the
// request field for the error (e.g. "latent.region_id").
using RegionIdMap = std::function<Result<uint64_t>(uint64_t user_id, std::string_view field)>;

// Fills `d` from `request`. Plan-only requests carry dtypes and shapes of
// the latents only (no regions, offsets or outputs; `region_id` is not
// called and may be null). Otherwise every tensor that IsSet() is sent
// with its region id mapped by `region_id` and its byte size derived from
// dtype and shape (the daemon checks it again). The progress flag is the
// caller's (Decode sets it when it has a callback). Errors: what
// `region_id` returns.
Status BuildDecode(const DecodeRequest& request, bool plan_only, const RegionIdMap& region_id,
                   v1::Decode* d);

// Whether the daemon decoded (or planned) `request` in the latent space it
// asked for. A daemon older than Decode.latent_space ignores the field and
// would decode de-normalised latents as normalised ones: its reply says
// nothing (DecodeReply.latent_space unspecified), and a request for
// kDenormalized then fails with kVersionMismatch naming `latent_space`
// (the decode's output holds those wrong frames and must not be used).
Status CheckLatentSpaceHonoured(const DecodeRequest& request, const v1::DecodeReply& reply);

}  // namespace vaed::client

#endif  // VAED_CLIENT_SRC_DECODE_REQUEST_H_
