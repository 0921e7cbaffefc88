// StoreReader::forecast_expiry (storage/store_reader.h): the TTL forecast of a container on this node, for
// `mayfly container forecast` and the forecast metrics (README "Time to live", "Forecast").
#include <leveldb/db.h>

#include "common/codec.h"
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
  const ReadSnapshot snapshot(db_);
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
  bool more = true;
  // Own-ttl items expire at their instant whenever TTL is on (-1 or a number).
  if (state.policy.is_on()) {
    std::string start = own_prefix;
    codec::put_i64_be(start, bounds.own_expiry_below_micros);
    for (it->Seek(start); it->Valid() && has_prefix(it->key(), own_prefix); it->Next()) {
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(view(it->key())));
      if (key.sort_micros > horizon) break;
      if (static_cast<size_t>(forecast.entries_read) >= max_entries) {
        forecast.truncated = true;
        more = false;
        break;
      }
      MAYFLY_ASSIGN_OR_RETURN(int64_t bytes, decode_index_value(it->value()));
      forecast.entries_read += 1;
      forecast.histogram.add(now, key.sort_micros, bytes);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
  }
  // Inheriting items only with a defaultTtl of n seconds: E = _ts + n, rising with the write ts.
  if (more && state.policy.kind == ttl::DefaultTtl::Kind::kSeconds) {
    const int64_t seconds = state.policy.seconds;
    std::string start = inherit_prefix;
    codec::put_i64_be(start, bounds.default_ts_below_micros);
    for (it->Seek(start); it->Valid() && has_prefix(it->key(), inherit_prefix); it->Next()) {
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(view(it->key())));
      const int64_t expiry = ttl::expiry_instant_micros(key.sort_micros, seconds);
      if (expiry > horizon) break;
      if (static_cast<size_t>(forecast.entries_read) >= max_entries) {
        forecast.truncated = true;
        more = false;
        break;
      }
      MAYFLY_ASSIGN_OR_RETURN(int64_t bytes, decode_index_value(it->value()));
      forecast.entries_read += 1;
      forecast.histogram.add(now, expiry, bytes);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
  }
  // The backlog: what is expired at `now` and not yet collected on this node, in both indexes.
  for (const bool own : {true, false}) {
    if (!more) break;
    const std::string& prefix = own ? own_prefix : inherit_prefix;
    const int64_t below = own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros;
    for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(view(it->key())));
      if (key.sort_micros >= below) break;
      if (static_cast<size_t>(forecast.entries_read) >= max_entries) {
        forecast.truncated = true;
        more = false;
        break;
      }
      MAYFLY_ASSIGN_OR_RETURN(int64_t bytes, decode_index_value(it->value()));
      forecast.entries_read += 1;
      forecast.backlog_items += 1;
      forecast.backlog_bytes += bytes;
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
  }
  return forecast;
}

}  // namespace mayfly::storage
