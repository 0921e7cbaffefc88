// The response direction of the client's wire: proto/mayfly.capnp's Response to and from the plain Response. The
// request direction is the project's one codec (api/codec.h: encode_request / decode_request).
// Internal to the client library; kept apart from client.cc so tests can check the encoding without a server.
#pragma once

#include "client/client.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::client {

Response decode_response(proto::Response::Reader in);
// The reverse direction, used by the in-test server double (and by nothing in production).
void encode_response(const Response& response, proto::Response::Builder out);

}  // namespace mayfly::client
