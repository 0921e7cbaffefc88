#include "storage/write_dedup.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <memory>

#include "common/codec.h"
#include "storage/layout.h"
#include "storage/store_internal.h"

namespace mayfly::storage {
namespace {

using internal::from_leveldb;

constexpr uint8_t kDedupRecordVersion = 1;
// Up to this many newly acknowledged sequences are looked up one by one; more are scanned with an iterator.
constexpr uint64_t kDedupAcknowledgeLookups = 32;

std::string client_key(uint64_t client) {
  std::string key(1, static_cast<char>(KeyTag::kDedupClient));
  codec::put_u64_be(key, client);
  return key;
}

std::string result_prefix(uint64_t client) {
  std::string key(1, static_cast<char>(KeyTag::kDedupResult));
  codec::put_u64_be(key, client);
  return key;
}

std::string result_key(uint64_t client, uint64_t sequence) {
  std::string key = result_prefix(client);
  codec::put_u64_be(key, sequence);
  return key;
}

std::string activity_prefix() { return std::string(1, static_cast<char>(KeyTag::kDedupActivity)); }

std::string activity_key(int64_t last_active_micros, uint64_t client) {
  std::string key = activity_prefix();
  codec::put_i64_be(key, last_active_micros);
  codec::put_u64_be(key, client);
  return key;
}

// Clients are indexed by the minute of their last activity, not the instant: a client writing all the time moves
// its activity entry once a minute, not on every write (each move leaves a LevelDB tombstone that the expiry scan,
// which starts at the oldest entry, would step over until a compaction).
int64_t activity_bucket(int64_t micros) {
  return micros - micros % kDedupActivityBucketMicros;
}

std::string totals_key() { return std::string(1, static_cast<char>(KeyTag::kDedupTotals)); }

Result<std::optional<std::string>> get(leveldb::DB* db, const std::string& key) {
  std::string value;
  leveldb::Status status = db->Get(leveldb::ReadOptions(), key, &value);
  if (status.IsNotFound()) return std::optional<std::string>();
  MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "read exactly-once table"));
  return std::optional<std::string>(std::move(value));
}

std::string encode_result(const OpResult& result) {
  std::string out;
  out.reserve(result.body.size() + result.message.size() + 48);
  codec::put_u8(out, kDedupRecordVersion);
  // The outcome as its HTTP number (the record's format since version 1), made by the one mapping.
  codec::put_varint(out, static_cast<uint64_t>(result.http_status()));
  codec::put_varint(out, static_cast<uint64_t>(result.substatus));
  codec::put_bytes(out, result.message);
  codec::put_bytes(out, result.body);
  codec::put_bytes(out, result.etag);
  codec::put_varint_signed(out, result.ts_micros);
  return out;
}

Result<OpResult> decode_result(std::string_view bytes) {
  codec::Reader reader(bytes);
  uint8_t version = 0;
  uint64_t status = 0, substatus = 0;
  std::string_view message, body, etag;
  OpResult result;
  if (!reader.get_u8(version) || version != kDedupRecordVersion || !reader.get_varint(status) || status > 999 ||
      !reader.get_varint(substatus) || substatus > 0xffffffffULL || !reader.get_bytes(message) ||
      !reader.get_bytes(body) || !reader.get_bytes(etag) || !reader.get_varint_signed(result.ts_micros) ||
      !reader.done()) {
    return Status::corruption("undecodable write outcome in the exactly-once table");
  }
  const std::optional<HttpAnswer> answer = from_http_status(static_cast<int>(status));
  if (!answer) {
    return Status::corruption("write outcome with status " + std::to_string(status) + " in the exactly-once table");
  }
  result.code = answer->code;
  result.done = answer->done;
  result.substatus = static_cast<int>(substatus);
  result.message = std::string(message);
  result.body = std::string(body);
  result.etag = std::string(etag);
  return result;
}

Result<DedupTotals> decode_totals(const std::optional<std::string>& raw) {
  DedupTotals totals;
  if (!raw) return totals;
  codec::Reader reader(*raw);
  uint8_t version = 0;
  if (!reader.get_u8(version) || version != kDedupRecordVersion || !reader.get_varint(totals.clients) ||
      !reader.get_varint_signed(totals.result_bytes) || !reader.get_varint_signed(totals.last_eviction_micros) ||
      !reader.done() || totals.result_bytes < 0) {
    return Status::corruption("undecodable exactly-once table totals");
  }
  return totals;
}

}  // namespace

Result<DedupTotals> read_dedup_totals(leveldb::DB* db) {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(db, totals_key()));
  return decode_totals(raw);
}

Status DedupApply::load_totals() {
  if (totals_) return Status::ok();
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(totals_key()));
  MAYFLY_ASSIGN_OR_RETURN(DedupTotals totals, decode_totals(raw));
  totals_ = totals;
  return Status::ok();
}

Result<std::optional<std::string>> DedupApply::get(const std::string& key) {
  return reads_ != nullptr ? reads_->get(key) : storage::get(db_, key);
}

Result<std::unique_ptr<leveldb::Iterator>> DedupApply::scan() {
  if (reads_ != nullptr) MAYFLY_RETURN_IF_ERROR(reads_->before_scan());
  return std::unique_ptr<leveldb::Iterator>(db_->NewIterator(leveldb::ReadOptions()));
}

Result<std::optional<OpResult>> DedupApply::check(const WriteId& id) {
  MAYFLY_RETURN_IF_ERROR(load_totals());
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(client_key(id.client)));
  // Only refusals say who (built on demand: most writes are not refused).
  const auto who = [&id] {
    return "write " + std::to_string(id.sequence) + " of client " + std::to_string(id.client);
  };
  if (!raw) {
    if (id.retry && totals_->last_eviction_micros >= 0 && ts_ - totals_->last_eviction_micros <= kDedupWindowMicros) {
      OpResult lost = OpResult::error(StatusCode::kUnavailable,
                                      who() + " is a retry, and this cluster evicted exactly-once records lately "
                                            "(too many clients): its first attempt may have been applied, so it "
                                            "is not applied again. The outcome is unknown: read to find out");
      lost.substatus = kDedupSubstatusRecordLost;
      return std::optional<OpResult>(std::move(lost));
    }
    if (totals_->result_bytes >= kDedupMaxTotalBytes) {
      OpResult full = OpResult::error(StatusCode::kThrottled,
                                      who() + " is refused: the cluster keeps too many unacknowledged write "
                                            "outcomes; nothing was applied: retry shortly");
      full.substatus = kDedupSubstatusTableFull;
      return std::optional<OpResult>(std::move(full));
    }
    id_ = id;
    record_ = ClientRecord{ts_, id.first_unacknowledged, 0, 0};
    return std::optional<OpResult>();
  }
  ClientRecord stored;
  codec::Reader reader(*raw);
  uint8_t version = 0;
  if (!reader.get_u8(version) || version != kDedupRecordVersion ||
      !reader.get_varint_signed(stored.last_active_micros) || !reader.get_varint(stored.first_unacknowledged) ||
      !reader.get_varint(stored.results) || !reader.get_varint_signed(stored.result_bytes) || !reader.done()) {
    return Status::corruption("undecodable exactly-once record of client " + std::to_string(id.client));
  }
  if (id.sequence < stored.first_unacknowledged) {
    return std::optional<OpResult>(OpResult::error(
        StatusCode::kInvalidArgument,
        who() + " was answered before and its client has acknowledged it since (a delayed copy?): not applied"));
  }
  // The outcomes the client has acknowledged since it last wrote: dropped in this entry whatever the verdict.
  ClientRecord next = stored;
  next.last_active_micros = ts_;
  std::vector<std::pair<std::string, int64_t>> acknowledged;
  if (id.first_unacknowledged > stored.first_unacknowledged) {
    next.first_unacknowledged = id.first_unacknowledged;
    const auto drop = [&](std::string key, int64_t bytes) {
      acknowledged.emplace_back(std::move(key), bytes);
      next.results = next.results > 0 ? next.results - 1 : 0;
      next.result_bytes -= bytes;
    };
    if (id.first_unacknowledged - stored.first_unacknowledged <= kDedupAcknowledgeLookups) {
      // A client acknowledging a few writes (the usual case: one or two per write) costs point reads, not an
      // iterator over every LevelDB file; the same keys, in the same order, as the scan below finds.
      for (uint64_t sequence = stored.first_unacknowledged; sequence < id.first_unacknowledged; ++sequence) {
        std::string key = result_key(id.client, sequence);
        MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> value, get(key));
        if (!value) continue;
        const auto bytes = static_cast<int64_t>(key.size() + value->size());
        drop(std::move(key), bytes);
      }
    } else {
      const std::string end = result_key(id.client, id.first_unacknowledged);
      MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
      for (it->Seek(result_key(id.client, stored.first_unacknowledged)); it->Valid() && it->key().compare(end) < 0;
           it->Next()) {
        drop(it->key().ToString(), static_cast<int64_t>(it->key().size() + it->value().size()));
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
    }
    if (next.result_bytes < 0) return Status::corruption("exactly-once record of client " + std::to_string(id.client) +
                                                         " counts fewer bytes than it holds");
  }
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> recorded, get(result_key(id.client, id.sequence)));
  if (recorded) {
    MAYFLY_ASSIGN_OR_RETURN(OpResult first, decode_result(*recorded));
    first.duplicate = true;
    id_ = id;
    stored_ = stored;
    record_ = next;
    acknowledged_ = std::move(acknowledged);
    return std::optional<OpResult>(std::move(first));
  }
  if (next.results >= kDedupMaxUnacknowledged || next.result_bytes >= kDedupMaxClientBytes ||
      totals_->result_bytes >= kDedupMaxTotalBytes) {
    OpResult full = OpResult::error(
        StatusCode::kThrottled, who() + " is refused: " +
                 (totals_->result_bytes >= kDedupMaxTotalBytes
                      ? std::string("the cluster keeps too many unacknowledged write outcomes")
                      : "this client has " + std::to_string(next.results) +
                            " unacknowledged writes (at most " + std::to_string(kDedupMaxUnacknowledged) + ", " +
                            std::to_string(kDedupMaxClientBytes >> 20) + " MiB)") +
                 "; nothing was applied: retry once earlier writes are answered");
    full.substatus = kDedupSubstatusTableFull;
    return std::optional<OpResult>(std::move(full));
  }
  id_ = id;
  stored_ = stored;
  record_ = next;
  acknowledged_ = std::move(acknowledged);
  return std::optional<OpResult>();
}

Status DedupApply::forget(uint64_t client, leveldb::WriteBatch& batch) {
  for (uint64_t gone : forgotten_) {
    if (gone == client) return Status::ok();  // evicted and idle both: forgotten once
  }
  forgotten_.push_back(client);
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(client_key(client)));
  int64_t last_active = 0;
  codec::Reader reader(raw ? std::string_view(*raw) : std::string_view());
  uint8_t version = 0;
  if (!raw || !reader.get_u8(version) || version != kDedupRecordVersion || !reader.get_varint_signed(last_active)) {
    return Status::corruption("exactly-once activity entry of client " + std::to_string(client) +
                              " without a readable record");
  }
  const std::string prefix = result_prefix(client);
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    batch.Delete(it->key());
    totals_->result_bytes -= static_cast<int64_t>(it->key().size() + it->value().size());
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  batch.Delete(client_key(client));
  batch.Delete(activity_key(activity_bucket(last_active), client));
  totals_->clients = totals_->clients > 0 ? totals_->clients - 1 : 0;
  if (totals_->result_bytes < 0) return Status::corruption("exactly-once totals count fewer bytes than they hold");
  totals_changed_ = true;
  return Status::ok();
}

Status DedupApply::expire_idle(leveldb::WriteBatch& batch) {
  const std::string prefix = activity_prefix();
  // Entries of minutes before the one the window began in: those clients were idle for at least the window.
  const std::string bound = activity_key(activity_bucket(ts_ - kDedupWindowMicros), 0);
  std::vector<uint64_t> idle;
  {
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
    for (it->Seek(prefix); it->Valid() && it->key().compare(bound) < 0 && idle.size() < kDedupExpiryBatch;
         it->Next()) {
      codec::Reader reader(std::string_view(it->key().data() + 1, it->key().size() - 1));
      int64_t last_active = 0;
      uint64_t client = 0;
      if (!reader.get_i64_be(last_active) || !reader.get_u64_be(client) || !reader.done()) {
        return Status::corruption("undecodable exactly-once activity key");
      }
      if (id_ && client == id_->client) continue;  // active in this very entry
      idle.push_back(client);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  }
  if (!idle.empty()) MAYFLY_RETURN_IF_ERROR(load_totals());
  for (uint64_t client : idle) MAYFLY_RETURN_IF_ERROR(forget(client, batch));
  return Status::ok();
}

Status DedupApply::finish(const OpResult* executed, uint64_t index, leveldb::WriteBatch& batch) {
  if (id_) {
    const uint64_t client = id_->client;
    for (const auto& [key, bytes] : acknowledged_) {
      batch.Delete(key);
      totals_->result_bytes -= bytes;
      totals_changed_ = true;
    }
    if (executed != nullptr) {
      const std::string key = result_key(client, id_->sequence);
      std::string value = encode_result(*executed);
      const auto bytes = static_cast<int64_t>(key.size() + value.size());
      batch.Put(key, value);
      record_.results += 1;
      record_.result_bytes += bytes;
      totals_->result_bytes += bytes;
      totals_changed_ = true;
    }
    if (!stored_) {
      totals_changed_ = true;
      totals_->clients += 1;
      if (totals_->clients > kDedupMaxClients) {
        // The least recently active client makes room (never this one: its activity entry is only in the batch).
        MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
        it->Seek(activity_prefix());
        if (it->Valid() && it->key().starts_with(activity_prefix()) && it->key().size() == 17) {
          codec::Reader reader(std::string_view(it->key().data() + 9, 8));
          uint64_t oldest = 0;
          if (!reader.get_u64_be(oldest)) return Status::corruption("undecodable exactly-once activity key");
          MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
          it.reset();
          MAYFLY_RETURN_IF_ERROR(forget(oldest, batch));
          totals_->last_eviction_micros = ts_;
        }
      }
    }
    const int64_t bucket = activity_bucket(ts_);
    if (!stored_ || activity_bucket(stored_->last_active_micros) != bucket) {
      if (stored_) batch.Delete(activity_key(activity_bucket(stored_->last_active_micros), client));
      batch.Put(activity_key(bucket, client), "");
    }
    std::string value;
    codec::put_u8(value, kDedupRecordVersion);
    codec::put_varint_signed(value, record_.last_active_micros);
    codec::put_varint(value, record_.first_unacknowledged);
    codec::put_varint(value, record_.results);
    codec::put_varint_signed(value, record_.result_bytes);
    batch.Put(client_key(client), value);
  }
  if (index % kDedupExpiryEvery == 0) MAYFLY_RETURN_IF_ERROR(expire_idle(batch));
  if (totals_changed_) {
    if (totals_->result_bytes < 0) return Status::corruption("exactly-once totals count fewer bytes than they hold");
    std::string value;
    codec::put_u8(value, kDedupRecordVersion);
    codec::put_varint(value, totals_->clients);
    codec::put_varint_signed(value, totals_->result_bytes);
    codec::put_varint_signed(value, totals_->last_eviction_micros);
    batch.Put(totals_key(), value);
  }
  return Status::ok();
}

}  // namespace mayfly::storage
