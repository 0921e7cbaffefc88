// The one mapping between the operation vocabulary (api/operation.h) and the wire (proto/mayfly.capnp's Request),
// used by the client library to send, by a follower to forward, and by the node to receive.
// Thread-safety: pure functions.
#pragma once

#include <optional>

#include "api/operation.h"
#include "common/status.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::api {

// Fills `out` from `request`; an unset consistency goes out as session (the schema default). Request::endpoint is the
// client's and never sent.
void encode_request(const Request& request, proto::Request::Builder out);

// The first segment a message carrying `request` needs (Cap'n Proto's size hint): without one an RPC message starts
// with a zeroed 8 KiB segment, most of it unused by a 256-byte write.
capnp::MessageSize size_hint(const Request& request);

// Takes a request off the wire as sent (Options::consistency always set). Fails (kInvalidArgument) only when the
// message names something this build does not know — an operation or a change feed start added by a newer client;
// what the values mean is checked by the node (node/request.h).
Result<Request> decode_request(proto::Request::Reader in);

// The operation a wire request names, before it is decoded (authorization looks at it first); nullopt for a member
// this build does not know.
std::optional<Kind> kind_of(proto::Request::Which which);

proto::Consistency to_proto(Consistency consistency);
Consistency from_proto(proto::Consistency consistency);  // a value this build does not know reads as session

}  // namespace mayfly::api
