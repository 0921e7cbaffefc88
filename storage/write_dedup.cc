#include "storage/write_dedup.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <openssl/sha.h>

#include <memory>

#include "common/assert.h"
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

struct ActivityEntry {
  int64_t bucket = 0;
  uint64_t client = 0;
};

Result<ActivityEntry> decode_activity_key(const leveldb::Slice& key) {
  ActivityEntry entry;
  codec::Reader reader(std::string_view(key.data(), key.size()).substr(key.empty() ? 0 : 1));
  if (key.empty() || !reader.get_i64_be(entry.bucket) || !reader.get_u64_be(entry.client) || !reader.done()) {
    return Status::corruption("undecodable exactly-once activity key");
  }
  return entry;
}

// The sequence of one of `client`'s outcome keys.
Result<uint64_t> decode_result_key(const leveldb::Slice& key, uint64_t client) {
  uint64_t sequence = 0;
  codec::Reader reader(std::string_view(key.data(), key.size()).substr(key.size() < 9 ? 0 : 9));
  if (key.size() != 17 || !reader.get_u64_be(sequence)) {
    return Status::corruption("undecodable exactly-once outcome key of client " + std::to_string(client));
  }
  return sequence;
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
  DedupTotals totals;
  if (mirror_ != nullptr) {
    MAYFLY_RETURN_IF_ERROR(mirror_->load(db_, reads_));
    auto share = mirror_->shares_.find(owner);
    if (share != mirror_->shares_.end()) totals = share->second;
  } else {
    MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(key_totals_key(owner)));
    MAYFLY_ASSIGN_OR_RETURN(totals, decode_key_totals(raw, owner));
  }
  return &keys_.emplace(owner, totals).first->second;
}

Status DedupApply::load_totals() {
  if (totals_) return Status::ok();
  if (mirror_ != nullptr) {
    MAYFLY_RETURN_IF_ERROR(mirror_->load(db_, reads_));
    totals_ = mirror_->totals_;
    return Status::ok();
  }
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

Result<std::optional<DedupApply::ClientRecord>> DedupApply::stored_record(uint64_t client) {
  if (mirror_ != nullptr) {
    MAYFLY_ASSIGN_OR_RETURN(DedupMirror::Client * found, mirror_->find(db_, reads_, client));
    if (found == nullptr) return std::optional<ClientRecord>();
    return std::optional<ClientRecord>(found->record);
  }
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get(client_key(client)));
  if (!raw) return std::optional<ClientRecord>();
  MAYFLY_ASSIGN_OR_RETURN(ClientRecord record, decode_record(*raw, client));
  return std::optional<ClientRecord>(record);
}

Result<std::optional<std::string>> DedupApply::stored_result(uint64_t client, uint64_t sequence) {
  const std::string key = result_key(client, sequence);
  if (mirror_ != nullptr) {
    // Most writes are not duplicates: the mirror knows there is no outcome without a read.
    MAYFLY_ASSIGN_OR_RETURN(DedupMirror::Client * found, mirror_->find(db_, reads_, client));
    if (found == nullptr || !found->results.contains(sequence)) return std::optional<std::string>();
    MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> value, get(key));
    if (!value) {
      return Status::corruption("exactly-once outcome " + std::to_string(sequence) + " of client " +
                                std::to_string(client) + " is in the table's mirror but not in the store");
    }
    return value;
  }
  return get(key);
}

Result<std::vector<DedupApply::StoredResult>> DedupApply::stored_results(uint64_t client, uint64_t from,
                                                                          uint64_t to) {
  std::vector<StoredResult> out;
  if (mirror_ != nullptr) {
    MAYFLY_ASSIGN_OR_RETURN(DedupMirror::Client * found, mirror_->find(db_, reads_, client));
    if (found == nullptr) return out;
    for (auto it = found->results.lower_bound(from); it != found->results.end() && it->first < to; ++it) {
      out.push_back(StoredResult{it->first, it->second});
    }
    return out;
  }
  if (to - from <= kDedupAcknowledgeLookups) {
    // A client acknowledging a few writes (the usual case: one or two per write) costs point reads, not an iterator
    // over every LevelDB file; the same keys, in the same order, as the scan below finds.
    for (uint64_t sequence = from; sequence < to; ++sequence) {
      const std::string key = result_key(client, sequence);
      MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> value, get(key));
      if (value) out.push_back(StoredResult{sequence, static_cast<int64_t>(key.size() + value->size())});
    }
    return out;
  }
  const std::string end = result_key(client, to);
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
  for (it->Seek(result_key(client, from)); it->Valid() && it->key().compare(end) < 0; it->Next()) {
    MAYFLY_ASSIGN_OR_RETURN(uint64_t sequence, decode_result_key(it->key(), client));
    out.push_back(StoredResult{sequence, static_cast<int64_t>(it->key().size() + it->value().size())});
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  return out;
}

Result<std::vector<DedupApply::StoredResult>> DedupApply::all_stored_results(uint64_t client) {
  std::vector<StoredResult> out;
  if (mirror_ != nullptr) {
    MAYFLY_ASSIGN_OR_RETURN(DedupMirror::Client * found, mirror_->find(db_, reads_, client));
    if (found == nullptr) return out;
    for (const auto& [sequence, bytes] : found->results) out.push_back(StoredResult{sequence, bytes});
    return out;
  }
  const std::string prefix = result_prefix(client);
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    MAYFLY_ASSIGN_OR_RETURN(uint64_t sequence, decode_result_key(it->key(), client));
    out.push_back(StoredResult{sequence, static_cast<int64_t>(it->key().size() + it->value().size())});
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  return out;
}

Result<std::optional<uint64_t>> DedupApply::least_recently_active() {
  if (mirror_ != nullptr) {
    MAYFLY_RETURN_IF_ERROR(mirror_->load(db_, reads_));
    if (mirror_->activity_.empty()) return std::optional<uint64_t>();
    return std::optional<uint64_t>(mirror_->activity_.begin()->second);
  }
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
  it->Seek(activity_prefix());
  std::optional<uint64_t> oldest;
  if (it->Valid() && it->key().starts_with(activity_prefix()) && it->key().size() == 17) {
    codec::Reader reader(std::string_view(it->key().data() + 9, 8));
    uint64_t client = 0;
    if (!reader.get_u64_be(client)) return Status::corruption("undecodable exactly-once activity key");
    oldest = client;
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  return oldest;
}

Result<std::vector<uint64_t>> DedupApply::idle_clients(int64_t bound_bucket) {
  std::vector<uint64_t> idle;
  if (mirror_ != nullptr) {
    MAYFLY_RETURN_IF_ERROR(mirror_->load(db_, reads_));
    // The index as stored before this entry, as the scan below sees LevelDB: a client evicted in this entry is
    // still in it (and counts towards the batch), the client this entry makes active is passed over.
    const std::pair<int64_t, uint64_t> bound(bound_bucket, 0);
    for (auto it = mirror_->activity_.begin();
         it != mirror_->activity_.end() && *it < bound && idle.size() < kDedupExpiryBatch; ++it) {
      if (id_ && it->second == table_client_) continue;  // active in this very entry
      idle.push_back(it->second);
    }
    return idle;
  }
  const std::string bound = activity_key(bound_bucket, 0);
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<leveldb::Iterator> it, scan());
  for (it->Seek(activity_prefix()); it->Valid() && it->key().compare(bound) < 0 && idle.size() < kDedupExpiryBatch;
       it->Next()) {
    MAYFLY_ASSIGN_OR_RETURN(ActivityEntry entry, decode_activity_key(it->key()));
    if (id_ && entry.client == table_client_) continue;  // active in this very entry
    idle.push_back(entry.client);
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan exactly-once table"));
  return idle;
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
  MAYFLY_ASSIGN_OR_RETURN(std::optional<ClientRecord> found, stored_record(table_client));
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
  if (!found) {
    if (id.owner != 0 && id.retry) {
      // A write first sent before owners existed may have its outcome under the anonymous record of its client.
      MAYFLY_ASSIGN_OR_RETURN(std::optional<ClientRecord> anonymous, stored_record(id.client));
      if (anonymous && anonymous->owner == 0) {
        MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> recorded, stored_result(id.client, id.sequence));
        if (recorded) {
          MAYFLY_ASSIGN_OR_RETURN(OpResult first, decode_result(*recorded));
          first.duplicate = true;
          return std::optional<OpResult>(std::move(first));
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
  const ClientRecord stored = *found;
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
  std::vector<StoredResult> acknowledged;
  if (id.first_unacknowledged > stored.first_unacknowledged) {
    next.first_unacknowledged = id.first_unacknowledged;
    MAYFLY_ASSIGN_OR_RETURN(acknowledged,
                            stored_results(table_client, stored.first_unacknowledged, id.first_unacknowledged));
    for (const StoredResult& dropped : acknowledged) {
      next.results = next.results > 0 ? next.results - 1 : 0;
      next.result_bytes -= dropped.bytes;
    }
    if (next.result_bytes < 0) return Status::corruption("exactly-once record of client " + std::to_string(id.client) +
                                                         " counts fewer bytes than it holds");
  }
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> recorded, stored_result(table_client, id.sequence));
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
  MAYFLY_ASSIGN_OR_RETURN(std::optional<ClientRecord> record, stored_record(client));
  if (!record) {
    return Status::corruption("exactly-once activity entry of client " + std::to_string(client) +
                              " without a record");
  }
  MAYFLY_ASSIGN_OR_RETURN(std::vector<StoredResult> results, all_stored_results(client));
  int64_t bytes = 0;
  for (const StoredResult& result : results) {
    batch.Delete(result_key(client, result.sequence));
    bytes += result.bytes;
  }
  totals_->result_bytes -= bytes;
  batch.Delete(client_key(client));
  batch.Delete(activity_key(activity_bucket(record->last_active_micros), client));
  totals_->clients = totals_->clients > 0 ? totals_->clients - 1 : 0;
  if (record->owner != 0) {
    MAYFLY_ASSIGN_OR_RETURN(DedupTotals * share, key_totals(record->owner));
    share->clients -= share->clients > 0 ? 1 : 0;
    share->result_bytes -= bytes;
    keys_changed_.insert(record->owner);
  }
  if (totals_->result_bytes < 0) return Status::corruption("exactly-once totals count fewer bytes than they hold");
  totals_changed_ = true;
  return Status::ok();
}

Status DedupApply::expire_idle(leveldb::WriteBatch& batch) {
  // Entries of minutes before the one the window began in: those clients were idle for at least the window.
  MAYFLY_ASSIGN_OR_RETURN(std::vector<uint64_t> idle, idle_clients(activity_bucket(ts_ - kDedupWindowMicros)));
  if (!idle.empty()) MAYFLY_RETURN_IF_ERROR(load_totals());
  for (uint64_t client : idle) MAYFLY_RETURN_IF_ERROR(forget(client, batch));
  return Status::ok();
}

Status DedupApply::finish(const OpResult* executed, uint64_t index, leveldb::WriteBatch& batch) {
  if (id_) {
    const uint64_t client = table_client_;
    for (const StoredResult& dropped : acknowledged_) {
      batch.Delete(result_key(client, dropped.sequence));
      totals_->result_bytes -= dropped.bytes;
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
      recorded_bytes_ = bytes;
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
        MAYFLY_ASSIGN_OR_RETURN(std::optional<uint64_t> oldest, least_recently_active());
        if (oldest) {
          MAYFLY_RETURN_IF_ERROR(forget(*oldest, batch));
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

void DedupApply::committed() {
  // A mirror not loaded was not read by this apply, so the apply changed nothing in the table.
  if (mirror_ == nullptr || !mirror_->loaded_) return;
  DedupMirror& mirror = *mirror_;
  for (uint64_t gone : forgotten_) {
    auto found = mirror.clients_.find(gone);
    MAYFLY_ASSERT_MSG(found != mirror.clients_.end(), "forgot client %llu the mirror does not hold",
                      static_cast<unsigned long long>(gone));
    mirror.activity_.erase({found->second.activity_bucket, gone});
    mirror.clients_.erase(found);
  }
  if (id_) {
    auto [entry, added] = mirror.clients_.try_emplace(table_client_);
    DedupMirror::Client& client = entry->second;
    MAYFLY_ASSERT_MSG(added == !stored_, "client %llu is %s the mirror, but the table %s it",
                      static_cast<unsigned long long>(table_client_), added ? "new to" : "in",
                      stored_ ? "holds" : "does not hold");
    const int64_t bucket = activity_bucket(ts_);
    if (added || client.activity_bucket != bucket) {
      if (!added) mirror.activity_.erase({client.activity_bucket, table_client_});
      mirror.activity_.emplace(bucket, table_client_);
      client.activity_bucket = bucket;
    }
    client.loaded = true;
    client.record = record_;
    for (const StoredResult& dropped : acknowledged_) client.results.erase(dropped.sequence);
    if (recorded_bytes_) client.results[id_->sequence] = *recorded_bytes_;
  }
  for (uint64_t owner : keys_changed_) {
    const DedupTotals& share = keys_.at(owner);
    if (share.clients == 0 && share.result_bytes == 0) {
      mirror.shares_.erase(owner);
    } else {
      mirror.shares_[owner] = share;
    }
  }
  if (totals_) mirror.totals_ = *totals_;
}

// ---- the table in memory ----------------------------------------------------------------------------------------

void DedupMirror::drop() {
  loaded_ = false;
  totals_ = DedupTotals{};
  shares_.clear();
  clients_.clear();
  activity_.clear();
}

size_t DedupMirror::loaded_clients() const {
  size_t loaded = 0;
  for (const auto& [id, client] : clients_) loaded += client.loaded ? 1 : 0;
  return loaded;
}

Status DedupMirror::load(leveldb::DB* db, ApplyReads* reads) {
  if (loaded_) return Status::ok();
  // Once per mirror: the grouped applies' writes first, so the scan sees the whole table as stored.
  if (reads != nullptr) MAYFLY_RETURN_IF_ERROR(reads->before_scan());
  drop();
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  const std::string activity = activity_prefix();
  for (it->Seek(activity); it->Valid() && it->key().starts_with(activity); it->Next()) {
    Result<ActivityEntry> entry = decode_activity_key(it->key());
    if (!entry.is_ok()) {
      drop();
      return entry.status();
    }
    auto [client, added] = clients_.try_emplace(entry->client);
    if (!added) {
      drop();
      return Status::corruption("exactly-once client " + std::to_string(entry->client) +
                                " has two activity entries");
    }
    client->second.activity_bucket = entry->bucket;
    activity_.emplace(entry->bucket, entry->client);
  }
  const std::string totals = totals_key();
  Status status = Status::ok();
  for (it->Seek(totals); status.is_ok() && it->Valid() && it->key().starts_with(totals); it->Next()) {
    const std::optional<std::string> value(it->value().ToString());
    if (it->key().size() == 1) {
      Result<DedupTotals> decoded = decode_totals(value);
      if (decoded.is_ok()) totals_ = *decoded;
      status = decoded.status();
    } else if (it->key().size() == 9) {
      codec::Reader reader(std::string_view(it->key().data() + 1, 8));
      uint64_t owner = 0;
      Result<DedupTotals> decoded = reader.get_u64_be(owner) ? decode_key_totals(value, owner)
                                                             : Result<DedupTotals>(Status::corruption(
                                                                   "undecodable exactly-once totals key"));
      if (decoded.is_ok()) shares_.emplace(owner, *decoded);
      status = decoded.status();
    } else {
      status = Status::corruption("undecodable exactly-once totals key");
    }
  }
  if (status.is_ok()) status = from_leveldb(it->status(), "load the exactly-once table");
  if (!status.is_ok()) {
    drop();
    return status;
  }
  loaded_ = true;
  return Status::ok();
}

Result<DedupMirror::Client*> DedupMirror::find(leveldb::DB* db, ApplyReads* reads, uint64_t client) {
  MAYFLY_RETURN_IF_ERROR(load(db, reads));
  auto found = clients_.find(client);
  if (found == clients_.end()) return static_cast<Client*>(nullptr);
  Client& entry = found->second;
  if (entry.loaded) return &entry;
  // First touch of this client: its record (through the group, which holds nothing of it) and its outcomes.
  Result<std::optional<std::string>> raw =
      reads != nullptr ? reads->get(client_key(client)) : storage::get(db, client_key(client));
  MAYFLY_RETURN_IF_ERROR(raw.status());
  if (!raw->has_value()) {
    return Status::corruption("exactly-once activity entry of client " + std::to_string(client) +
                              " without a record");
  }
  MAYFLY_ASSIGN_OR_RETURN(DedupApply::ClientRecord record, DedupApply::decode_record(**raw, client));
  if (activity_bucket(record.last_active_micros) != entry.activity_bucket) {
    return Status::corruption("exactly-once record of client " + std::to_string(client) +
                              " is indexed under another minute than its last activity");
  }
  // Straight from LevelDB, without writing the open group: the client has not changed since the index was loaded
  // (every change goes through the mirror, and this client is not loaded), so the group holds none of its keys.
  std::map<uint64_t, int64_t> results;
  const std::string prefix = result_prefix(client);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    MAYFLY_ASSIGN_OR_RETURN(uint64_t sequence, decode_result_key(it->key(), client));
    results.emplace(sequence, static_cast<int64_t>(it->key().size() + it->value().size()));
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "load exactly-once outcomes"));
  entry.record = record;
  entry.results = std::move(results);
  entry.loaded = true;
  return &entry;
}

}  // namespace mayfly::storage
