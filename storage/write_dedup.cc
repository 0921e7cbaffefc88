#include "storage/write_dedup.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <openssl/sha.h>

#include <memory>

#include "common/codec.h"
#include "storage/layout.h"
#include "storage/store_internal.h"

namespace mayfly::storage {
namespace {

using internal::from_leveldb;

constexpr uint8_t kDedupRecordVersion = 1;
constexpr uint8_t kDedupRecordVersionWithOwner = 2;  // a client record of a key's client: version 1 and the owner
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

std::string key_totals_key(uint64_t owner) {
  std::string key = totals_key();
  codec::put_u64_be(key, owner);
  return key;
}

uint64_t first_64_bits_of_sha256(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return value;
}

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

// A key's share: clients and result bytes.
Result<DedupTotals> decode_key_totals(const std::optional<std::string>& raw, uint64_t owner) {
  DedupTotals totals;
  if (!raw) return totals;
  codec::Reader reader(*raw);
  uint8_t version = 0;
  if (!reader.get_u8(version) || version != kDedupRecordVersion || !reader.get_varint(totals.clients) ||
      !reader.get_varint_signed(totals.result_bytes) || !reader.done() || totals.result_bytes < 0) {
    return Status::corruption("undecodable exactly-once share of key owner " + std::to_string(owner));
  }
  return totals;
}

std::string encode_key_totals(const DedupTotals& totals) {
  std::string value;
  codec::put_u8(value, kDedupRecordVersion);
  codec::put_varint(value, totals.clients);
  codec::put_varint_signed(value, totals.result_bytes);
  return value;
}

}  // namespace

Result<DedupTotals> read_dedup_totals(leveldb::DB* db) {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(db, totals_key()));
  return decode_totals(raw);
}

Result<DedupTotals> read_dedup_key_totals(leveldb::DB* db, uint64_t owner) {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(db, key_totals_key(owner)));
  return decode_key_totals(raw, owner);
}

uint64_t dedup_owner_of(std::string_view key_name) {
  std::string text("mayfly exactly-once owner");
  text.push_back('\0');
  text.append(key_name);
  const uint64_t owner = first_64_bits_of_sha256(text);
  return owner != 0 ? owner : 1;
}

uint64_t dedup_table_client(uint64_t owner, uint64_t client) {
  if (owner == 0) return client;
  std::string text("mayfly exactly-once client");
  text.push_back('\0');
  codec::put_u64_be(text, owner);
  codec::put_u64_be(text, client);
  return first_64_bits_of_sha256(text);
}

Result<DedupTotals*> DedupApply::key_totals(uint64_t owner) {
  auto found = keys_.find(owner);
  if (found != keys_.end()) return &found->second;
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(key_totals_key(owner)));
  MAYFLY_ASSIGN_OR_RETURN(DedupTotals totals, decode_key_totals(raw, owner));
  return &keys_.emplace(owner, totals).first->second;
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

Result<DedupApply::ClientRecord> DedupApply::decode_record(std::string_view raw, uint64_t table_client) {
  ClientRecord record;
  codec::Reader reader(raw);
  uint8_t version = 0;
  bool ok = reader.get_u8(version) && (version == kDedupRecordVersion || version == kDedupRecordVersionWithOwner) &&
            reader.get_varint_signed(record.last_active_micros) && reader.get_varint(record.first_unacknowledged) &&
            reader.get_varint(record.results) && reader.get_varint_signed(record.result_bytes);
  if (ok && version == kDedupRecordVersionWithOwner) ok = reader.get_u64_be(record.owner) && record.owner != 0;
  if (!ok || !reader.done()) {
    return Status::corruption("undecodable exactly-once record of client " + std::to_string(table_client));
  }
  return record;
}

std::string DedupApply::encode_record(const ClientRecord& record) {
  // The anonymous owner's records keep version 1's bytes (those of every record written before owners existed).
  std::string value;
  codec::put_u8(value, record.owner != 0 ? kDedupRecordVersionWithOwner : kDedupRecordVersion);
  codec::put_varint_signed(value, record.last_active_micros);
  codec::put_varint(value, record.first_unacknowledged);
  codec::put_varint(value, record.results);
  codec::put_varint_signed(value, record.result_bytes);
  if (record.owner != 0) codec::put_u64_be(value, record.owner);
  return value;
}

Result<std::optional<OpResult>> DedupApply::check(const WriteId& id) {
  MAYFLY_RETURN_IF_ERROR(load_totals());
  const uint64_t table_client = dedup_table_client(id.owner, id.client);
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(client_key(table_client)));
  // Only refusals say who (built on demand: most writes are not refused).
  const auto who = [&id] {
    return "write " + std::to_string(id.sequence) + " of client " + std::to_string(id.client);
  };
  const auto full = [&who](const char* bound, const std::string& why) {
    OpResult refused = OpResult::error(StatusCode::kThrottled,
                                       who() + " is refused: " + why + "; nothing was applied: retry once earlier "
                                                                      "writes are answered");
    refused.substatus = kDedupSubstatusTableFull;
    refused.dedup_refusal = bound;
    return std::optional<OpResult>(std::move(refused));
  };
  const auto key_share_used = [](const DedupTotals& share) {
    return "this key's clients keep " + std::to_string(share.clients) + " clients and " +
           std::to_string(share.result_bytes >> 20) + " MiB of unacknowledged write outcomes (each key at most " +
           std::to_string(kDedupMaxClientsPerKey) + " clients, " + std::to_string(kDedupMaxKeyBytes >> 20) +
           " MiB)";
  };
  if (!raw) {
    if (id.owner != 0 && id.retry) {
      // A write first sent before owners existed may have its outcome under the anonymous record of its client.
      MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> legacy, get(client_key(id.client)));
      if (legacy) {
        MAYFLY_ASSIGN_OR_RETURN(ClientRecord anonymous, decode_record(*legacy, id.client));
        if (anonymous.owner == 0) {
          MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> recorded, get(result_key(id.client, id.sequence)));
          if (recorded) {
            MAYFLY_ASSIGN_OR_RETURN(OpResult first, decode_result(*recorded));
            first.duplicate = true;
            return std::optional<OpResult>(std::move(first));
          }
        }
      }
    }
    if (id.retry && totals_->last_eviction_micros >= 0 && ts_ - totals_->last_eviction_micros <= kDedupWindowMicros) {
      OpResult lost = OpResult::error(StatusCode::kUnavailable,
                                      who() + " is a retry, and this cluster evicted exactly-once records lately "
                                            "(too many clients): its first attempt may have been applied, so it "
                                            "is not applied again. The outcome is unknown: read to find out");
      lost.substatus = kDedupSubstatusRecordLost;
      return std::optional<OpResult>(std::move(lost));
    }
    if (totals_->result_bytes >= kDedupMaxTotalBytes) {
      return full("table", "the cluster keeps too many unacknowledged write outcomes");
    }
    if (id.owner != 0) {
      MAYFLY_ASSIGN_OR_RETURN(DedupTotals * share, key_totals(id.owner));
      if (share->clients >= kDedupMaxClientsPerKey || share->result_bytes >= kDedupMaxKeyBytes) {
        return full("key", key_share_used(*share));
      }
    }
    id_ = id;
    table_client_ = table_client;
    record_ = ClientRecord{ts_, id.first_unacknowledged, 0, 0, id.owner};
    return std::optional<OpResult>();
  }
  MAYFLY_ASSIGN_OR_RETURN(ClientRecord stored, decode_record(*raw, table_client));
  if (stored.owner != id.owner) {
    // Two (owner, client) pairs with the same 64-bit table id: a SHA-256 collision, or a damaged table.
    return std::optional<OpResult>(OpResult::error(
        StatusCode::kConflict, who() + " is refused: its client id collides with another key's client in the "
                                       "exactly-once table; nothing was applied: draw a new client id"));
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
        std::string key = result_key(table_client, sequence);
        MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> value, get(key));
        if (!value) continue;
        const auto bytes = static_cast<int64_t>(key.size() + value->size());
        drop(std::move(key), bytes);
      }
    } else {
      const std::string end = result_key(table_client, id.first_unacknowledged);
      MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
      for (it->Seek(result_key(table_client, stored.first_unacknowledged)); it->Valid() && it->key().compare(end) < 0;
           it->Next()) {
        drop(it->key().ToString(), static_cast<int64_t>(it->key().size() + it->value().size()));
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
    }
    if (next.result_bytes < 0) return Status::corruption("exactly-once record of client " + std::to_string(id.client) +
                                                         " counts fewer bytes than it holds");
  }
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> recorded, get(result_key(table_client, id.sequence)));
  if (recorded) {
    MAYFLY_ASSIGN_OR_RETURN(OpResult first, decode_result(*recorded));
    first.duplicate = true;
    id_ = id;
    table_client_ = table_client;
    stored_ = stored;
    record_ = next;
    acknowledged_ = std::move(acknowledged);
    return std::optional<OpResult>(std::move(first));
  }
  if (totals_->result_bytes >= kDedupMaxTotalBytes) {
    return full("table", "the cluster keeps too many unacknowledged write outcomes");
  }
  if (next.results >= kDedupMaxUnacknowledged || next.result_bytes >= kDedupMaxClientBytes) {
    return full("client", "this client has " + std::to_string(next.results) + " unacknowledged writes (at most " +
                              std::to_string(kDedupMaxUnacknowledged) + ", " +
                              std::to_string(kDedupMaxClientBytes >> 20) + " MiB)");
  }
  if (id.owner != 0) {
    // What the key holds once this client's acknowledged outcomes are dropped.
    MAYFLY_ASSIGN_OR_RETURN(DedupTotals * share, key_totals(id.owner));
    DedupTotals after = *share;
    after.result_bytes -= stored.result_bytes - next.result_bytes;
    if (after.result_bytes >= kDedupMaxKeyBytes) return full("key", key_share_used(after));
  }
  id_ = id;
  table_client_ = table_client;
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
  if (!raw) {
    return Status::corruption("exactly-once activity entry of client " + std::to_string(client) +
                              " without a record");
  }
  MAYFLY_ASSIGN_OR_RETURN(ClientRecord record, decode_record(*raw, client));
  const std::string prefix = result_prefix(client);
  int64_t bytes = 0;
  {
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      batch.Delete(it->key());
      bytes += static_cast<int64_t>(it->key().size() + it->value().size());
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  }
  totals_->result_bytes -= bytes;
  batch.Delete(client_key(client));
  batch.Delete(activity_key(activity_bucket(record.last_active_micros), client));
  totals_->clients = totals_->clients > 0 ? totals_->clients - 1 : 0;
  if (record.owner != 0) {
    MAYFLY_ASSIGN_OR_RETURN(DedupTotals * share, key_totals(record.owner));
    share->clients -= share->clients > 0 ? 1 : 0;
    share->result_bytes -= bytes;
    keys_changed_.insert(record.owner);
  }
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
      if (id_ && client == table_client_) continue;  // active in this very entry
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
    const uint64_t client = table_client_;
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
    if (record_.owner != 0) {
      // The key's share moves by what this client's record moves (before any eviction below takes its own part).
      MAYFLY_ASSIGN_OR_RETURN(DedupTotals * share, key_totals(record_.owner));
      if (!stored_) share->clients += 1;
      share->result_bytes += record_.result_bytes - (stored_ ? stored_->result_bytes : 0);
      keys_changed_.insert(record_.owner);
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
    batch.Put(client_key(client), encode_record(record_));
  }
  if (index % kDedupExpiryEvery == 0) MAYFLY_RETURN_IF_ERROR(expire_idle(batch));
  for (uint64_t owner : keys_changed_) {
    const DedupTotals& share = keys_.at(owner);
    if (share.result_bytes < 0) {
      return Status::corruption("exactly-once share of key owner " + std::to_string(owner) +
                                " counts fewer bytes than it holds");
    }
    if (share.clients == 0 && share.result_bytes == 0) {
      batch.Delete(key_totals_key(owner));
    } else {
      batch.Put(key_totals_key(owner), encode_key_totals(share));
    }
  }
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
