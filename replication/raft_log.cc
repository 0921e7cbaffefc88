#include "replication/raft_log.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/assert.h"

namespace mayfly::replication {
namespace {

std::string range_text(LogIndex low, LogIndex high) {
  return "[" + std::to_string(low.value()) + ", " + std::to_string(high.value()) + ")";
}

}  // namespace

RaftLog::RaftLog(const LogStorage& storage, LogIndex committed, LogIndex applied)
    : storage_(storage), unstable_offset_(storage.last_index().next()), committed_(committed), applied_(applied) {
  MAYFLY_ASSERT(applied_ <= committed_);
  MAYFLY_ASSERT(committed_ <= last_index());
  last_ts_micros_ = ts_at(last_index());
}

LogIndex RaftLog::first_index() const {
  if (pending_snapshot_) return pending_snapshot_->metadata.index.next();
  return storage_.first_index();
}

Term RaftLog::last_term() const {
  const std::optional<Term> last = term(last_index());
  MAYFLY_ASSERT_MSG(last.has_value(), "the last entry's term must be known");
  return *last;
}

std::optional<Term> RaftLog::term(LogIndex index) const {
  if (pending_snapshot_) {
    const SnapshotMetadata& snapshot = pending_snapshot_->metadata;
    if (index == snapshot.index) return snapshot.term;
    if (index < snapshot.index) return std::nullopt;
  }
  if (index >= unstable_offset_) {
    const uint64_t offset = index.value() - unstable_offset_.value();
    if (offset < unstable_.size()) return unstable_[offset].term;
    return std::nullopt;
  }
  if (index.next() < storage_.first_index()) return std::nullopt;  // compacted
  Result<Term> stored = storage_.term(index);
  if (!stored.is_ok()) storage_read_failed(stored.status(), "Raft log term of entry " + std::to_string(index.value()));
  return *stored;
}

bool RaftLog::match_term(LogIndex index, Term term) const {
  const std::optional<Term> actual = this->term(index);
  return actual.has_value() && *actual == term;
}

bool RaftLog::is_up_to_date(LogIndex index, Term term) const {
  const Term last = last_term();
  return term > last || (term == last && index >= last_index());
}

std::vector<Entry> RaftLog::slice(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  MAYFLY_ASSERT_MSG(first_index() <= low && low < high && high <= last_index().next(),
                    "slice [%llu, %llu) outside [%llu, %llu]", static_cast<unsigned long long>(low.value()),
                    static_cast<unsigned long long>(high.value()),
                    static_cast<unsigned long long>(first_index().value()),
                    static_cast<unsigned long long>(last_index().value()));
  std::vector<Entry> out;
  uint64_t total_bytes = 0;
  if (low < unstable_offset_) {
    const LogIndex stored_high = std::min(high, unstable_offset_);
    Result<std::vector<Entry>> stored = storage_.entries(low, stored_high, max_bytes);
    if (!stored.is_ok()) storage_read_failed(stored.status(), "Raft log entries " + range_text(low, stored_high));
    out = std::move(stored).value();
    MAYFLY_ASSERT(!out.empty() && out.front().index == low);
    for (const Entry& entry : out) total_bytes += entry.size_bytes();
    if (out.back().index.next() < stored_high) return out;  // the byte limit stopped storage
  }
  for (uint64_t i = std::max(low, unstable_offset_).value(); i < high.value(); ++i) {
    const Entry& entry = unstable_[i - unstable_offset_.value()];
    if (!out.empty() && total_bytes + entry.size_bytes() > max_bytes) break;
    total_bytes += entry.size_bytes();
    out.push_back(entry);
  }
  return out;
}

LogIndex RaftLog::find_conflict(const std::vector<Entry>& entries) const {
  for (const Entry& entry : entries) {
    if (!match_term(entry.index, entry.term)) return entry.index;
  }
  return LogIndex(0);
}

LogIndex RaftLog::find_conflict_by_term(LogIndex index, Term term) const {
  index = std::min(index, last_index());
  while (index > LogIndex(0)) {
    const std::optional<Term> actual = this->term(index);
    if (!actual.has_value() || *actual <= term) break;  // compacted entries are committed, so they match
    index = index.prev();
  }
  return index;
}

void RaftLog::append(std::vector<Entry> entries) {
  if (entries.empty()) return;
  const LogIndex after = entries.front().index;
  MAYFLY_ASSERT_MSG(after > committed_, "append at %llu would overwrite committed %llu",
                    static_cast<unsigned long long>(after.value()),
                    static_cast<unsigned long long>(committed_.value()));
  MAYFLY_ASSERT(after <= last_index().next());
  last_ts_micros_ = entries.back().ts_micros;
  if (after == last_index().next()) {
    for (Entry& entry : entries) unstable_.push_back(std::move(entry));
  } else if (after <= unstable_offset_) {
    // Replaces persisted entries too: Ready::entries tells the driver to truncate from `after`.
    unstable_offset_ = after;
    unstable_ = std::move(entries);
  } else {
    unstable_.resize(after.value() - unstable_offset_.value());
    for (Entry& entry : entries) unstable_.push_back(std::move(entry));
  }
}

void RaftLog::restore(Snapshot snapshot) {
  MAYFLY_ASSERT(snapshot.metadata.index > committed_);
  committed_ = snapshot.metadata.index;
  unstable_offset_ = snapshot.metadata.index.next();
  unstable_.clear();
  last_ts_micros_ = snapshot.metadata.ts_micros;
  pending_snapshot_ = std::move(snapshot);
}

void RaftLog::commit_to(LogIndex index) {
  if (index <= committed_) return;  // commit never moves back (a stale heartbeat may carry a lower one)
  MAYFLY_ASSERT_MSG(index <= last_index(), "commit %llu past the last index %llu",
                    static_cast<unsigned long long>(index.value()),
                    static_cast<unsigned long long>(last_index().value()));
  committed_ = index;
}

void RaftLog::applied_to(LogIndex index) {
  MAYFLY_ASSERT(index <= committed_);
  MAYFLY_ASSERT(index >= applied_);
  applied_ = index;
}

LogIndex RaftLog::apply_from() const {
  LogIndex from = applied_.next();
  if (pending_snapshot_) from = std::max(from, pending_snapshot_->metadata.index.next());
  return from;
}

bool RaftLog::has_entries_to_apply() const { return apply_from() <= committed_; }

std::vector<Entry> RaftLog::entries_to_apply(uint64_t max_bytes) const {
  if (!has_entries_to_apply()) return {};
  return slice(apply_from(), committed_.next(), max_bytes);
}

void RaftLog::stable_entries_to(LogIndex index, Term term) {
  if (index < unstable_offset_) return;
  const uint64_t offset = index.value() - unstable_offset_.value();
  if (offset >= unstable_.size() || unstable_[offset].term != term) return;  // replaced meanwhile
  unstable_.erase(unstable_.begin(), unstable_.begin() + static_cast<ptrdiff_t>(offset + 1));
  unstable_offset_ = index.next();
}

void RaftLog::stable_snapshot_to(LogIndex index) {
  if (pending_snapshot_ && pending_snapshot_->metadata.index == index) pending_snapshot_.reset();
}

int64_t RaftLog::ts_at(LogIndex index) const {
  if (pending_snapshot_ && index == pending_snapshot_->metadata.index) return pending_snapshot_->metadata.ts_micros;
  if (index >= unstable_offset_) return unstable_[index.value() - unstable_offset_.value()].ts_micros;
  if (index < storage_.first_index()) {
    const SnapshotMetadata snapshot = storage_.snapshot_metadata();
    MAYFLY_ASSERT_MSG(snapshot.index == index, "ts of compacted index %llu is unknown",
                      static_cast<unsigned long long>(index.value()));
    return snapshot.ts_micros;
  }
  Result<std::vector<Entry>> stored = storage_.entries(index, index.next(), 1);
  if (!stored.is_ok()) storage_read_failed(stored.status(), "Raft log time of entry " + std::to_string(index.value()));
  MAYFLY_ASSERT(!stored->empty() && stored->front().index == index);
  return stored->front().ts_micros;
}

void RaftLog::check_invariants() const {
  MAYFLY_ASSERT(applied_ <= committed_);
  MAYFLY_ASSERT(committed_ <= last_index());
  MAYFLY_ASSERT(first_index() <= last_index().next());
  if (pending_snapshot_) {
    MAYFLY_ASSERT(unstable_offset_ == pending_snapshot_->metadata.index.next());
    MAYFLY_ASSERT(pending_snapshot_->staged ? pending_snapshot_->data.empty()
                                            : pending_snapshot_->metadata.size_bytes == pending_snapshot_->data.size());
  } else {
    MAYFLY_ASSERT(unstable_offset_ <= storage_.last_index().next());
  }
  const std::optional<Term> before = term(unstable_offset_.prev());
  Term previous_term = before.value_or(Term(0));
  int64_t previous_ts = unstable_.empty() ? 0 : ts_at(unstable_offset_.prev());
  for (size_t i = 0; i < unstable_.size(); ++i) {
    const Entry& entry = unstable_[i];
    MAYFLY_ASSERT(entry.index.value() == unstable_offset_.value() + i);
    MAYFLY_ASSERT_MSG(entry.term >= previous_term, "terms must not decrease along the log");
    MAYFLY_ASSERT_MSG(entry.ts_micros > previous_ts,
                      "ts must increase strictly along the log (index %llu)",
                      static_cast<unsigned long long>(entry.index.value()));
    previous_term = entry.term;
    previous_ts = entry.ts_micros;
  }
  MAYFLY_ASSERT_MSG(last_ts_micros_ == ts_at(last_index()), "cached last ts is stale");
}

}  // namespace mayfly::replication
