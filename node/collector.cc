#include "node/collector.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "ttl/request_units.h"

namespace mayfly::node {

uint64_t Collector::pass_work(uint64_t batch_items_max) const {
  return std::max(options_.pass_work_max, kVisitWork + batch_items_max * kDeleteWork);
}

Result<int64_t> Collector::run_once(uint64_t batch_items_max) {
  const uint64_t batch = std::max<uint64_t>(1, batch_items_max);
  MAYFLY_ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<storage::ContainerInfo>> list,
                          expiry_.reader().container_list());
  const std::vector<storage::ContainerInfo>& containers = *list;
  // The list is sorted by name (StoreReader::container_list), so the cursor's place is a binary search.
  size_t next = std::lower_bound(containers.begin(), containers.end(), cursor_,
                                 [](const storage::ContainerInfo& info, const std::pair<std::string, std::string>& key) {
                                   return std::tie(info.database, info.container) < std::tie(key.first, key.second);
                                 }) -
                containers.begin();
  const uint64_t budget = pass_work(batch);
  uint64_t work = 0;
  int64_t deleted = 0;
  size_t visits = 0;
  last_pass_saturated_ = false;
  std::optional<size_t> resume;  // the first container after the pass's first that the budget cut short
  // The first container of a pass always gets the whole budget, so a long count or backlog keeps advancing.
  while (visits < containers.size() && work + kVisitWork <= budget) {
    if (next >= containers.size()) next = 0;
    const storage::ContainerInfo& info = containers[next];
    uint64_t spent = 0;
    bool cut_short = false;
    MAYFLY_ASSIGN_OR_RETURN(int64_t items, collect_within(info, budget - work, batch, spent, &cut_short));
    work += spent;
    deleted += items;
    if (cut_short && visits > 0 && !resume) resume = next;
    ++visits;
    ++next;
  }
  // The next pass starts with the first container this one cut short and gives it the whole budget (the pass's
  // first container had it already: the others' turn comes first), else after the last one looked at.
  if (resume) next = *resume;
  if (next >= containers.size()) next = 0;
  if (!containers.empty()) cursor_ = {containers[next].database, containers[next].container};
  last_pass_visits_ = visits;
  last_pass_work_ = work;
  MAYFLY_RETURN_IF_ERROR(expiry_.reclaim_dropped(batch).status());
  // Change feed retention (docs/changefeed.md): node-local like the deletes above, in batches of the same size.
  MAYFLY_RETURN_IF_ERROR(expiry_.trim_change_feed(batch).status());
  return deleted;
}

Result<int64_t> Collector::collect(const storage::ContainerInfo& info, uint64_t max_work, uint64_t* work) {
  uint64_t spent = 0;
  bool cut_short = false;
  Result<int64_t> deleted = collect_within(info, max_work, options_.batch_items_max, spent, &cut_short);
  if (work != nullptr) *work += spent;
  return deleted;
}

Result<int64_t> Collector::collect_within(const storage::ContainerInfo& info, uint64_t max_work,
                                          uint64_t batch_items_max, uint64_t& spent, bool* cut_short) {
  MAYFLY_ASSIGN_OR_RETURN(int64_t expired, collect_expired_within(info, max_work, batch_items_max, spent, cut_short));
  if (info.record.partitions_deleted_through_micros == 0) return expired;  // never a delete by partition key
  MAYFLY_ASSIGN_OR_RETURN(int64_t drained, drain_partitions_within(info, max_work, batch_items_max, spent, cut_short));
  return expired + drained;
}

Result<int64_t> Collector::drain_partitions_within(const storage::ContainerInfo& info, uint64_t max_work,
                                                   uint64_t batch_items_max, uint64_t& spent, bool* cut_short) {
  const std::string key = info.database + "/" + info.container;
  double budget = request_units_.collector_budget(key, info.record.throughput);  // what the expired items left
  if (info.record.throughput.mode != storage::Throughput::Mode::kServerless) budget *= options_.ru_share;
  const uint64_t work_left = max_work > spent ? (max_work - spent) / kDeleteWork : 0;
  // Priced at 1 KB an item until the deletes say what they cost (charged below at their real size).
  const uint64_t affordable = std::min(ttl::affordable_deletes(budget, 1024, batch_items_max), work_left);
  if (affordable == 0) {
    // User work wins (or this pass's work is spent): the partitions wait. Only the gauge is brought up to date.
    MAYFLY_ASSIGN_OR_RETURN(storage::PartitionDrain counted, expiry_.drain_deleted_partitions(info.record, 0));
    metrics_.observe_partition_drain(key, 0, 0, counted.pending, work_left == 0 ? "pass_budget" : "no_spare_ru");
    if (counted.pending > 0) {
      last_pass_saturated_ = true;
      *cut_short = true;
    }
    return 0;
  }
  MAYFLY_ASSIGN_OR_RETURN(storage::PartitionDrain drain, expiry_.drain_deleted_partitions(info.record, affordable));
  spent += static_cast<uint64_t>(drain.examined) * kReadWork + static_cast<uint64_t>(drain.items) * kDeleteWork;
  if (drain.more) {
    *cut_short = true;
    last_pass_saturated_ = true;
  }
  if (drain.items > 0) {
    request_units_.collector_spent(
        key, info.record.throughput,
        static_cast<double>(drain.items) *
            ttl::ttl_delete_charge(static_cast<uint64_t>(drain.bytes / drain.items)));
  }
  metrics_.observe_partition_drain(key, drain.items, drain.bytes, drain.pending, "draining");
  return drain.items;
}

Result<int64_t> Collector::collect_expired_within(const storage::ContainerInfo& info, uint64_t max_work,
                                                  uint64_t batch_items_max, uint64_t& spent, bool* cut_short) {
  spent = kVisitWork;
  const std::string key = info.database + "/" + info.container;
  const uint64_t count_limit = max_work > spent ? (max_work - spent) / 2 / kCountWork : 0;
  MAYFLY_ASSIGN_OR_RETURN(storage::Backlog backlog, expiry_.backlog(info.database, info.container, count_limit));
  spent += static_cast<uint64_t>(backlog.entries_read) * kCountWork;
  *cut_short = !backlog.complete;  // the count stopped at its limit
  // Asked even with nothing to delete, so the spare-RU gauge stays current.
  double budget = request_units_.collector_budget(key, info.record.throughput);
  if (info.record.throughput.mode != storage::Throughput::Mode::kServerless) budget *= options_.ru_share;
  // Still counting with nothing counted yet: the average size (the RU price) is unknown; the next visit has it.
  if (backlog.items == 0) return 0;
  const uint64_t work_left = max_work > spent ? (max_work - spent) / kDeleteWork : 0;
  const uint64_t average_bytes = static_cast<uint64_t>(backlog.bytes / backlog.items);
  const uint64_t paid_for = ttl::affordable_deletes(budget, average_bytes, batch_items_max);
  const uint64_t affordable = std::min(paid_for, work_left);
  if (affordable < paid_for && static_cast<uint64_t>(backlog.items) > affordable) *cut_short = true;
  if (affordable == 0) {  // user work wins (or this pass's work is spent); the backlog waits
    last_pass_saturated_ = true;
    return 0;
  }
  const int64_t now = clock_.now_micros();
  const int64_t applied_ts = expiry_.reader().applied().ts_micros;
  MAYFLY_ASSIGN_OR_RETURN(storage::CollectResult collected,
                          expiry_.collect_expired(info.database, info.container, applied_ts, affordable));
  spent += static_cast<uint64_t>(collected.items) * kDeleteWork;
  // Expired items left behind by the budget. Held ones (storage/holds.h) are in the backlog but not collectable: with
  // holds, only a batch that stopped with more to take counts.
  if (collected.more || (collected.items < backlog.items && info.record.active_holds == 0)) last_pass_saturated_ = true;
  if (collected.items == 0) return 0;
  request_units_.collector_spent(
      key, info.record.throughput,
      static_cast<double>(collected.items) *
          ttl::ttl_delete_charge(static_cast<uint64_t>(collected.bytes / collected.items)));
  std::vector<double> lags;
  lags.reserve(collected.expiry_instants_micros.size());
  for (int64_t expiry : collected.expiry_instants_micros) lags.push_back(static_cast<double>(now - expiry) / 1e6);
  metrics_.observe_collected(key, collected.items, collected.bytes, lags);
  return collected.items;
}

}  // namespace mayfly::node
