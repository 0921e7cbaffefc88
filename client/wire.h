// Conversion between the client's plain Request/Response and the wire types of proto/mayfly.capnp.
// Internal to the client library; kept apart from client.cc so tests can check every op's encoding without a server.
#pragma once

#include "client/client.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::client {

// A write's identity for exactly-once execution (proto WriteId): set by the Client on the writes it numbers.
struct WriteStamp {
  uint64_t client = 0;
  uint64_t sequence = 0;
  uint64_t first_unacknowledged = 0;
  bool retry = false;
};

// Fills `out` from `request`. `consistency` and `session_token` are the effective values (the Client has already
// applied its defaults and its session token); `stamp`, when given, becomes the request's writeId.
void encode_request(const Request& request, Consistency consistency, const std::string& session_token,
                    proto::Request::Builder out, const WriteStamp* stamp = nullptr);
Response decode_response(proto::Response::Reader in);

// The reverse directions, used by the in-test server double (and by nothing in production).
Request decode_request(proto::Request::Reader in);
void encode_response(const Response& response, proto::Response::Builder out);

}  // namespace mayfly::client
