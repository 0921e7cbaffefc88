// StoreReader::preview_default_ttl (storage/store_reader.h): what a defaultTtl change would expire, for the dry-run
// and the guard of updateContainer (docs/ttl.md, "Containers").
#include <leveldb/db.h>

#include "common/work_budget.h"
#include "storage/store_internal.h"
#include "storage/store_reader.h"

namespace mayfly::storage {

using internal::from_leveldb;
using internal::has_prefix;
using internal::read_options;

std::string TtlChangePreview::to_json() const {
  auto pair = [](const char* name, int64_t items, int64_t bytes) {
    return std::string("\"") + name + "\":{\"items\":" + std::to_string(items) + ",\"bytes\":" +
           std::to_string(bytes) + "}";
  };
  return "{\"appliedIndex\":" + std::to_string(applied_index) + ",\"at\":" + std::to_string(at_micros / 1'000'000) +
         "," + pair("live", live_items, live_bytes) + "," + pair("expiredAtOnce", at_once_items, at_once_bytes) + "," +
         pair("expiredWithinHour", within_hour_items, within_hour_bytes) + "," +
         pair("expiredWithinDay", within_day_items, within_day_bytes) + "}";
}

Result<TtlChangePreview> StoreReader::preview_default_ttl(std::string_view database, std::string_view container,
                                                          ttl::DefaultTtl policy) const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  const leveldb::ReadOptions options = read_options(&snapshot);
  TtlChangePreview preview;
  std::string meta_bytes;
  const leveldb::Status got = db_->Get(options, meta_key(), &meta_bytes);
  if (!got.IsNotFound()) {
    MAYFLY_RETURN_IF_ERROR(from_leveldb(got, "read the applied state"));
    MAYFLY_ASSIGN_OR_RETURN(MetaState meta, decode_meta(meta_bytes));
    preview.applied_index = meta.applied_index;
    preview.at_micros = meta.applied_ts_micros;
  }
  MAYFLY_ASSIGN_OR_RETURN(ContainerRecord record, find_container(database, container, &snapshot));
  const int64_t now = preview.at_micros;
  // The state the change would leave (its watermarks keep what is dead now dead), as apply computes it.
  const ttl::ContainerTtlState after = ttl::change_policy(record.ttl, policy, now);
  constexpr int64_t kHour = int64_t{3600} * 1'000'000;
  const std::string prefix = item_prefix(record.crid);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(options));
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    if (!charge_work(kStepsPerItem)) return work_status();  // timed out, cancelled, stopping
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord item,
                            decode_item(std::string_view(it->value().data(), it->value().size())));
    if (!ttl::alive(item.ttl, item.write_ts_micros, record.ttl, now)) continue;  // expired already (not collected)
    const int64_t bytes = static_cast<int64_t>(it->key().size() + it->value().size());
    preview.live_items += 1;
    preview.live_bytes += bytes;
    if (!ttl::alive(item.ttl, item.write_ts_micros, after, now)) {
      preview.at_once_items += 1;
      preview.at_once_bytes += bytes;
    }
    if (!ttl::alive(item.ttl, item.write_ts_micros, after, now + kHour)) {
      preview.within_hour_items += 1;
      preview.within_hour_bytes += bytes;
    }
    if (!ttl::alive(item.ttl, item.write_ts_micros, after, now + 24 * kHour)) {
      preview.within_day_items += 1;
      preview.within_day_bytes += bytes;
    }
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan items"));
  return preview;
}

}  // namespace mayfly::storage
