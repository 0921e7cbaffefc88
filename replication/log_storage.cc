#include "replication/log_storage.h"

#include "replication/codec.h"

#include <string>
#include <utility>

namespace mayfly::replication {
namespace {

std::string index_text(LogIndex index) { return std::to_string(index.value()); }

}  // namespace

StorageFailure::StorageFailure(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}

void storage_read_failed(const Status& status, std::string_view operation) {
  MAYFLY_ASSERT_MSG(!status.is_ok() && status.code() != StatusCode::kNotFound, "log storage, %.*s: %s",
                    static_cast<int>(operation.size()), operation.data(), status.to_string().c_str());
  throw StorageFailure(status.with_context(operation));
}

std::vector<Entry> bootstrap_entries(const Membership& membership) {
  std::vector<ConfigChange> changes;
  for (NodeId voter : membership.voters) changes.push_back(ConfigChange{ConfigChangeType::kAddVoter, voter});
  for (NodeId learner : membership.learners) changes.push_back(ConfigChange{ConfigChangeType::kAddLearner, learner});
  std::vector<Entry> entries;
  for (const ConfigChange& change : changes) {
    const uint64_t index = entries.size() + 1;
    entries.push_back(Entry{.term = Term(1),
                            .index = LogIndex(index),
                            .ts_micros = static_cast<int64_t>(index),
                            .type = EntryType::kConfigChange,
                            .data = encode_config_change(change)});
  }
  return entries;
}

HardState bootstrap_hard_state(const Membership& membership) {
  const uint64_t count = membership.voters.size() + membership.learners.size();
  if (count == 0) return HardState{};
  return HardState{Term(1), NodeId(0), LogIndex(count)};
}

MemoryLogStorage::MemoryLogStorage(const Membership& bootstrap) {
  for (Entry& entry : bootstrap_entries(bootstrap)) entries_.push_back(std::move(entry));
  hard_state_ = bootstrap_hard_state(bootstrap);
}

Result<Term> MemoryLogStorage::term(LogIndex index) const {
  if (index == base_index_) return base_term_;
  if (index < base_index_ || index > last_index()) {
    return Status::not_found("term of index " + index_text(index) + " outside [" + index_text(base_index_) + ", " +
                             index_text(last_index()) + "]");
  }
  return entries_[index.value() - first_index().value()].term;
}

Result<std::vector<Entry>> MemoryLogStorage::entries(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  if (low < first_index() || high > last_index().next() || low >= high) {
    return Status::not_found("entries [" + index_text(low) + ", " + index_text(high) + ") outside [" +
                             index_text(first_index()) + ", " + index_text(last_index().next()) + ")");
  }
  std::vector<Entry> out;
  uint64_t total_bytes = 0;
  for (uint64_t i = low.value(); i < high.value(); ++i) {
    const Entry& entry = entries_[i - first_index().value()];
    total_bytes += entry.size_bytes();
    if (!out.empty() && total_bytes > max_bytes) break;
    out.push_back(entry);
  }
  return out;
}

Result<std::string> MemoryLogStorage::read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                                          uint64_t max_bytes) const {
  if (snapshot_index != snapshot_.metadata.index) {
    return Status::not_found("snapshot " + index_text(snapshot_index) + " replaced by " +
                             index_text(snapshot_.metadata.index));
  }
  if (offset > snapshot_.data.size()) return Status::invalid_argument("snapshot chunk offset past the end");
  return snapshot_.data.substr(offset, max_bytes);
}

Status MemoryLogStorage::append(const std::vector<Entry>& entries) {
  if (entries.empty()) return Status::ok();
  const LogIndex first = entries.front().index;
  if (first < first_index() || first > last_index().next()) {
    return Status::invalid_argument("append at " + index_text(first) + " outside [" + index_text(first_index()) +
                                    ", " + index_text(last_index().next()) + "]");
  }
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].index != entries[i - 1].index.next()) return Status::invalid_argument("append: not contiguous");
  }
  entries_.resize(first.value() - first_index().value());  // truncate the conflicting suffix, if any
  entries_.insert(entries_.end(), entries.begin(), entries.end());
  return Status::ok();
}

Status MemoryLogStorage::apply_snapshot(Snapshot snapshot) {
  const SnapshotMetadata& metadata = snapshot.metadata;
  if (metadata.index < snapshot_.metadata.index) return Status::invalid_argument("apply_snapshot: older snapshot");
  if (metadata.size_bytes != snapshot.data.size()) return Status::invalid_argument("apply_snapshot: size mismatch");
  entries_.clear();
  base_index_ = metadata.index;
  base_term_ = metadata.term;
  snapshot_ = std::move(snapshot);
  return Status::ok();
}

Status MemoryLogStorage::create_snapshot(LogIndex index, Membership membership, std::string data) {
  if (index < snapshot_.metadata.index) return Status::invalid_argument("create_snapshot: older than current");
  if (index > last_index() || index < first_index()) {
    return Status::invalid_argument("create_snapshot: index " + index_text(index) + " not in the log");
  }
  const Entry& entry = entries_[index.value() - first_index().value()];
  snapshot_.metadata = SnapshotMetadata{.index = index,
                                        .term = entry.term,
                                        .ts_micros = entry.ts_micros,
                                        .membership = std::move(membership),
                                        .size_bytes = data.size()};
  snapshot_.data = std::move(data);
  return Status::ok();
}

Status MemoryLogStorage::compact(LogIndex index) {
  if (index <= base_index_) return Status::ok();
  if (index > snapshot_.metadata.index) {
    return Status::invalid_argument("compact: index " + index_text(index) + " not covered by the snapshot at " +
                                    index_text(snapshot_.metadata.index));
  }
  const Term new_base_term = entries_[index.value() - first_index().value()].term;
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(index.value() - base_index_.value()));
  base_index_ = index;
  base_term_ = new_base_term;
  return Status::ok();
}

}  // namespace mayfly::replication
