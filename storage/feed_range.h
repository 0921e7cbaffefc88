// Cosmos DB's effective partition key (EPK) and feed ranges. The SDKs address part of a container by a range of
// EPKs — `feed_range_from_partition_key("a")`, the ranges `read_feed_ranges()` hands out — and send it as
// x-ms-start-epk / x-ms-end-epk. Mayfly keeps one partition key range ("" to "FF"), so a narrower range is a filter:
// an item is in the range when the EPK of its partition key value is. The hash is Cosmos's, so a range an SDK
// computed names the same items here:
//   EPK = MurmurHash3 x64 128 (seed 0) of the value's hashing bytes (string: 0x08, UTF-8, 0xFF; number: 0x05 and
//   the IEEE double, little-endian; true 0x03; false 0x02; null 0x01), as 16 bytes high half first, big-endian,
//   the top two bits cleared, in upper-case hex (32 characters; "FF" is above every one).
// That is partition key version 2, kind Hash. A hierarchical key (kind MultiHash) hashes each component on its own
// and puts the hashes one after the other (64 or 96 characters), so the items under a prefix of its components are
// the range [EPK(prefix), EPK(prefix) + "FF") — how the SDKs address a prefix.
// Thread-safety: pure functions and values.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace mayfly::storage {

// The EPK of a canonical partition key value (storage::canonical_partition_key_text's output: "\"a\"", "42",
// "true", "null", or a hierarchical key's ["a",42]). InvalidArgument when the text is not such a value.
Result<std::string> effective_partition_key(std::string_view canonical_partition_key_json);

// A range of EPKs, min inclusive, max exclusive, in upper-case hex. The whole container is ["", "FF").
struct FeedRange {
  std::string min;
  std::string max = "FF";

  bool whole() const { return min.empty() && max == "FF"; }
  bool contains(std::string_view epk) const { return min <= epk && epk < max; }
  bool operator==(const FeedRange&) const = default;
};

// The range of one effective partition key, [epk, epk + 1) — what an SDK's feed range of one partition key value is.
FeedRange point_feed_range(const std::string& epk);

// From x-ms-start-epk / x-ms-end-epk as sent (either may be empty: "" and "FF"): hex, at most 256 characters each,
// min < max. InvalidArgument naming the header otherwise.
Result<FeedRange> parse_feed_range(std::string_view start_epk, std::string_view end_epk);

}  // namespace mayfly::storage
