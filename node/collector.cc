#include "node/collector.h"

#include <vector>

#include "ttl/request_units.h"

namespace mayfly::node {

Result<int64_t> Collector::run_once() {
  MAYFLY_ASSIGN_OR_RETURN(std::vector<storage::ContainerInfo> containers, state_.containers());
  int64_t deleted = 0;
  for (const storage::ContainerInfo& info : containers) {
    MAYFLY_ASSIGN_OR_RETURN(int64_t items, collect(info));
    deleted += items;
  }
  MAYFLY_RETURN_IF_ERROR(state_.reclaim_dropped(options_.batch_items_max).status());
  return deleted;
}

Result<int64_t> Collector::collect(const storage::ContainerInfo& info) {
  const std::string key = info.database + "/" + info.container;
  MAYFLY_ASSIGN_OR_RETURN(storage::Backlog backlog, state_.backlog(info.database, info.container));
  // Asked even with nothing to delete, so the spare-RU gauge stays current.
  double budget = request_units_.collector_budget(key, info.record.throughput);
  if (info.record.throughput.mode == storage::Throughput::Mode::kProvisioned) budget *= options_.ru_share;
  if (backlog.items == 0) return 0;
  const uint64_t average_bytes = static_cast<uint64_t>(backlog.bytes / backlog.items);
  const uint64_t affordable = ttl::affordable_deletes(budget, average_bytes, options_.batch_items_max);
  if (affordable == 0) return 0;  // user work wins; the backlog waits
  const int64_t now = clock_.now_micros();
  MAYFLY_ASSIGN_OR_RETURN(storage::CollectResult collected,
                          state_.collect_expired(info.database, info.container, state_.applied().ts_micros,
                                                 affordable));
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
