// StoreReader::forecast_expiry (storage/store_reader.h): the TTL forecast of a container on this node, for
// `mayfly container forecast` and the forecast metrics (docs/ttl.md, "Forecast").
#include <leveldb/db.h>

#include "common/codec.h"
#include "common/work_budget.h"
#include "storage/store_internal.h"
#include "storage/store_reader.h"
#include "ttl/ttl.h"

namespace mayfly::storage {

using internal::decode_index_value;
using internal::from_leveldb;
using internal::has_prefix;
using internal::read_options;
using internal::view;

Result<ExpiryForecast> StoreReader::forecast_expiry(std::string_view database, std::string_view container,
                                                    size_t max_entries) const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  const leveldb::ReadOptions options = read_options(&snapshot);
  ExpiryForecast forecast;
  std::string meta_bytes;
  const leveldb::Status got = db_->Get(options, meta_key(), &meta_bytes);
  if (!got.IsNotFound()) {
    MAYFLY_RETURN_IF_ERROR(from_leveldb(got, "read the applied state"));
    MAYFLY_ASSIGN_OR_RETURN(MetaState meta, decode_meta(meta_bytes));
    forecast.applied_index = meta.applied_index;
    forecast.at_micros = meta.applied_ts_micros;
  }
  MAYFLY_ASSIGN_OR_RETURN(forecast.container, find_container(database, container, &snapshot));
  const uint64_t crid = forecast.container.crid;
  const ttl::ContainerTtlState& state = forecast.container.ttl;
  const int64_t now = forecast.at_micros;
  // Every entry below its index's bound is expired at `now` (watermarks included), every one at or above is alive.
  const ttl::ExpiredBounds bounds = ttl::expired_bounds(state, now);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(options));
  const int64_t horizon = now + ttl::kForecastHorizonMicros;
  const std::string own_prefix = own_expiry_prefix(crid);
  const std::string inherit_prefix = inherit_expiry_prefix(crid);
  // Reads the entries of one index from `start` on, in key order, until `past(key)` or the entry cap (then truncated):
  // `take(key, record bytes)` for each. Returns false once the cap is hit (nothing further is read).
  const auto scan = [&](const std::string& prefix, const std::string& start, const auto& past,
                        const auto& take) -> Result<bool> {
    for (it->Seek(start); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
      if (!charge_work(kStepsPerItem)) return work_status();  // timed out, cancelled, stopping
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(view(it->key())));
      if (past(key)) break;
      if (static_cast<size_t>(forecast.entries_read) >= max_entries) {
        forecast.truncated = true;
        return false;
      }
      MAYFLY_ASSIGN_OR_RETURN(int64_t bytes, decode_index_value(it->value()));
      forecast.entries_read += 1;
      take(key, bytes);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
    return true;
  };
  const auto from = [](const std::string& prefix, int64_t sort_micros) {
    std::string start = prefix;
    codec::put_i64_be(start, sort_micros);
    return start;
  };
  bool more = true;
  // Own-ttl items expire at their instant whenever TTL is on (-1 or a number).
  if (state.policy.is_on()) {
    MAYFLY_ASSIGN_OR_RETURN(
        more, scan(own_prefix, from(own_prefix, bounds.own_expiry_below_micros),
                   [&](const IndexKey& key) { return key.sort_micros > horizon; },
                   [&](const IndexKey& key, int64_t bytes) { forecast.histogram.add(now, key.sort_micros, bytes); }));
  }
  // Inheriting items only with a defaultTtl of n seconds: E = _ts + n, rising with the write ts.
  if (more && state.policy.kind == ttl::DefaultTtl::Kind::kSeconds) {
    const int64_t seconds = state.policy.seconds;
    MAYFLY_ASSIGN_OR_RETURN(
        more, scan(inherit_prefix, from(inherit_prefix, bounds.default_ts_below_micros),
                   [&](const IndexKey& key) { return ttl::expiry_instant_micros(key.sort_micros, seconds) > horizon; },
                   [&](const IndexKey& key, int64_t bytes) {
                     forecast.histogram.add(now, ttl::expiry_instant_micros(key.sort_micros, seconds), bytes);
                   }));
  }
  // The backlog: what is expired at `now` and not yet collected on this node, in both indexes.
  for (const bool own : {true, false}) {
    if (!more) break;
    const std::string& prefix = own ? own_prefix : inherit_prefix;
    const int64_t below = own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros;
    MAYFLY_ASSIGN_OR_RETURN(more, scan(prefix, prefix, [&](const IndexKey& key) { return key.sort_micros >= below; },
                                       [&](const IndexKey&, int64_t bytes) {
                                         forecast.backlog_items += 1;
                                         forecast.backlog_bytes += bytes;
                                       }));
  }
  return forecast;
}

}  // namespace mayfly::storage
