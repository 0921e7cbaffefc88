// ReplayCache: the Cosmos DB gateway's defence against a captured signature sent again inside its 15-minute window
// (gateway/protocol.h kSignatureWindowSeconds). A master-key signature covers the verb, the resource and x-ms-date,
// not the body, so whoever saw one signed `PUT /dbs/d/colls/c` could send it again with another body (a forced
// defaultTtl of 1 s, say) until the date leaves the window. The gateway therefore lets each signature of a guarded
// request (gateway/protocol.h replay_guarded: database and container writes, and every request that forces a TTL
// change) be used once on this node: a second use is refused (401, "resend with a fresh x-ms-date"). A use whose
// request was refused with nothing done is released (see release()), so it is one *successful* use per signature.
//
// A signature is remembered until its date leaves the window, then forgotten (nothing older can be accepted anyway).
// At most kMaxEntries at once: when that many guarded requests were signed in the last 30 minutes, the next is refused
// (503, retry) rather than an old signature forgotten early (which would let it be replayed).
//
// Thread-safety: one thread (RpcHost's kj thread) uses a ReplayCache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>

namespace mayfly::node {

class ReplayCache {
 public:
  static constexpr size_t kMaxEntries = 65536;

  enum class Outcome { kFirstUse, kReplayed, kFull };
  // Records `signature` (the raw HMAC bytes) at `now_seconds` unless it was seen; it is remembered until
  // `valid_until_seconds`, when its signed date leaves the window (x-ms-date + 15 minutes).
  Outcome use(std::string_view signature, int64_t valid_until_seconds, int64_t now_seconds);
  // Forgets a signature `use` recorded whose request was then refused with nothing done (a 4xx: a 412 asking for the
  // force header, a 409, a 400), so the client may send it again corrected within the same second (the SDKs' dates
  // are to the second). A request whose outcome is unknown (a 5xx) keeps its signature used.
  void release(std::string_view signature, int64_t valid_until_seconds);
  size_t size() const { return seen_.size(); }

 private:
  void forget_expired(int64_t now_seconds);

  std::unordered_set<std::string> seen_;
  std::multimap<int64_t, std::string> by_expiry_;  // the second after which a signature's date is out of the window
};

}  // namespace mayfly::node
