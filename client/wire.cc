#include "client/wire.h"

#include <string>

namespace mayfly::client {

namespace {

// The explicit length keeps bytes after an embedded NUL (the server rejects such text instead of seeing it cut short).
kj::StringPtr wire_text(const std::string& value) { return kj::StringPtr(value.c_str(), value.size()); }

std::string text(capnp::Text::Reader reader) { return std::string(reader.cStr(), reader.size()); }

}  // namespace

Response decode_response(proto::Response::Reader in) {
  Response response;
  response.status = in.getStatus();
  response.substatus = in.getSubstatus();
  response.message = text(in.getMessage());
  response.body = text(in.getBody());
  response.etag = text(in.getEtag());
  response.ts = in.getTs();
  response.request_charge = in.getRequestCharge();
  response.session_token = text(in.getSessionToken());
  response.retry_after_ms = in.getRetryAfterMs();
  response.served_by = in.getServedBy();
  response.leader_hint = in.getLeaderHint();
  response.continuation = text(in.getContinuation());
  if (in.hasData()) {
    auto data = in.getData();
    response.data.assign(reinterpret_cast<const char*>(data.begin()), data.size());
  }
  return response;
}

void encode_response(const Response& response, proto::Response::Builder out) {
  out.setStatus(response.status);
  out.setSubstatus(response.substatus);
  out.setMessage(wire_text(response.message));
  out.setBody(wire_text(response.body));
  out.setEtag(wire_text(response.etag));
  out.setTs(response.ts);
  out.setRequestCharge(response.request_charge);
  out.setSessionToken(wire_text(response.session_token));
  out.setRetryAfterMs(response.retry_after_ms);
  out.setServedBy(response.served_by);
  out.setLeaderHint(response.leader_hint);
  out.setContinuation(wire_text(response.continuation));
  if (!response.data.empty()) {
    out.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(response.data.data()), response.data.size()));
  }
}

}  // namespace mayfly::client
