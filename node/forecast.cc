#include "node/forecast.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "node/collector.h"
#include "storage/json.h"
#include "ttl/request_units.h"

namespace mayfly::node {

namespace {

std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  value = std::round(value * 1000.0) / 1000.0;
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return error == std::errc() ? std::string(buffer, end) : "null";
}

std::string bucket_json(const ttl::ExpiryBucket& bucket) {
  return "{\"items\":" + std::to_string(bucket.items) + ",\"bytes\":" + std::to_string(bucket.bytes) + "}";
}

std::string policy_json(const ttl::DefaultTtl& policy) {
  switch (policy.kind) {
    case ttl::DefaultTtl::Kind::kOff: return "null";
    case ttl::DefaultTtl::Kind::kNoDefault: return "-1";
    case ttl::DefaultTtl::Kind::kSeconds: return std::to_string(policy.seconds);
  }
  return "null";
}

// What one forecast read costs: a scan of that many index entries (query/executor.h query_charge's price of an index
// entry), at least 1 RU.
double forecast_charge(int64_t entries_read) {
  return std::round((1.0 + 0.01 * static_cast<double>(entries_read)) * 100.0) / 100.0;
}

}  // namespace

void ReclaimRate::record_pass(int64_t at_micros, int64_t items, bool saturated) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t span = last_pass_micros_ ? std::max<int64_t>(0, at_micros - *last_pass_micros_)
                                         : settings_.gc_interval_ms * 1000;
  last_pass_micros_ = at_micros;
  if (saturated) saturated_.push_back(Pass{at_micros, items, span});
  while (!saturated_.empty() && saturated_.front().at_micros < at_micros - kWindowMicros) saturated_.pop_front();
}

ReclaimCapacity ReclaimRate::node_capacity() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t items = 0;
    int64_t span = 0;
    for (const Pass& pass : saturated_) {
      if (pass.at_micros < *last_pass_micros_ - kWindowMicros) continue;
      items += pass.items;
      span += pass.span_micros;
    }
    if (span > 0) return {static_cast<double>(items) * 1e6 / static_cast<double>(span), true};
  }
  const double passes_per_second = 1000.0 / static_cast<double>(std::max<int64_t>(1, settings_.gc_interval_ms));
  return {static_cast<double>(settings_.pass_work / kDeleteWork) * passes_per_second, false};
}

ReclaimCapacity ReclaimRate::container_capacity(const storage::ContainerRecord& record, uint64_t average_bytes) const {
  ReclaimCapacity capacity = node_capacity();
  const double passes_per_second = 1000.0 / static_cast<double>(std::max<int64_t>(1, settings_.gc_interval_ms));
  double ceiling = static_cast<double>(settings_.batch_items_max) * passes_per_second;
  if (record.throughput.mode != storage::Throughput::Mode::kServerless) {  // its own RU/s, or its database's
    ceiling = std::min(ceiling, static_cast<double>(record.throughput.request_units_per_second) *
                                    settings_.ru_share / ttl::ttl_delete_charge(average_bytes));
  }
  capacity.items_per_second = std::min(capacity.items_per_second, ceiling);
  return capacity;
}

std::string ContainerForecast::to_json(NodeId node, std::string_view database, std::string_view container) const {
  const ttl::ExpiryHistogram& histogram = figures.histogram;
  ttl::ExpiryBucket day;
  for (const ttl::ExpiryBucket& hour : histogram.hours) {
    day.items += hour.items;
    day.bytes += hour.bytes;
  }
  std::string out = "{\"node\":" + std::to_string(node.value()) + ",\"database\":";
  json::write_json_string(database, out);
  out += ",\"container\":";
  json::write_json_string(container, out);
  out += ",\"appliedIndex\":" + std::to_string(figures.applied_index) +
         ",\"at\":" + std::to_string(figures.at_micros / 1'000'000) +
         ",\"atMicros\":" + std::to_string(figures.at_micros) +
         ",\"defaultTtl\":" + policy_json(figures.container.ttl.policy) +
         ",\"expiring\":{\"hour\":" + bucket_json(histogram.hours[0]) + ",\"day\":" + bucket_json(day) + "}" +
         ",\"backlog\":{\"items\":" + std::to_string(figures.backlog_items) +
         ",\"bytes\":" + std::to_string(figures.backlog_bytes) + "}" +
         ",\"capacity\":{\"itemsPerSecond\":" + number(capacity.items_per_second) + ",\"source\":\"" +
         (capacity.measured ? "measured" : "configured") + "\"}" +
         ",\"projection\":{\"peakItems\":" + number(projection.peak_items) +
         ",\"peakAtSeconds\":" + std::to_string(projection.peak_at_seconds) +
         ",\"drainSeconds\":" + (projection.drain_seconds ? number(*projection.drain_seconds) : "null") + "}" +
         ",\"entriesRead\":" + std::to_string(figures.entries_read) +
         ",\"truncated\":" + (figures.truncated ? "true" : "false") + ",\"minutes\":[";
  for (size_t i = 0; i < histogram.minutes.size(); ++i) out += (i ? "," : "") + bucket_json(histogram.minutes[i]);
  out += "],\"hours\":[";
  for (size_t i = 0; i < histogram.hours.size(); ++i) out += (i ? "," : "") + bucket_json(histogram.hours[i]);
  return out + "]}";
}

Result<ContainerForecast> forecast_container(const storage::StoreReader& state, const ReclaimRate& rate,
                                             std::string_view database, std::string_view container,
                                             size_t max_entries) {
  ContainerForecast forecast;
  MAYFLY_ASSIGN_OR_RETURN(forecast.figures, state.forecast_expiry(database, container, max_entries));
  // The RU price of a delete depends on the item's size: the average of what is counted (backlog first).
  int64_t items = forecast.figures.backlog_items;
  int64_t bytes = forecast.figures.backlog_bytes;
  if (items == 0) {
    for (const ttl::ExpiryBucket& hour : forecast.figures.histogram.hours) {
      items += hour.items;
      bytes += hour.bytes;
    }
  }
  const uint64_t average_bytes = items > 0 ? static_cast<uint64_t>(bytes / items) : 0;
  forecast.capacity = rate.container_capacity(forecast.figures.container, average_bytes);
  forecast.projection = ttl::project_backlog(forecast.figures.backlog_items, forecast.figures.histogram,
                                             forecast.capacity.items_per_second);
  return forecast;
}

Reply forecast_reply(const storage::StoreReader& state, const ReclaimRate& rate, const api::Request& operation,
                     size_t max_entries, NodeId self) {
  const std::string& database = operation.database;
  const std::string& container = operation.container;
  Result<ContainerForecast> forecast = forecast_container(state, rate, database, container, max_entries);
  if (!forecast.is_ok()) {
    if (forecast.status().code() == StatusCode::kNotFound) {
      Reply missing{state.read_container(database, container)};
      missing.request_charge = ttl::kFailedRequestCharge;
      return missing;
    }
    Reply failed = Reply::error(StatusCode::kUnavailable, "could not read the forecast on node " +
                                                              std::to_string(self.value()) + ": " +
                                                              forecast.status().to_string());
    failed.request_charge = ttl::kFailedRequestCharge;
    return failed;
  }
  Reply reply;
  reply.result.body = forecast->to_json(self, database, container);
  reply.session_token = forecast->figures.applied_index;
  reply.request_charge = forecast_charge(forecast->figures.entries_read);
  return reply;
}

std::vector<metrics::ChangeFeedFigures> changefeed_figures(const storage::StoreReader& state,
                                                        const storage::ChangeFeedReader& feed) {
  std::vector<metrics::ChangeFeedFigures> out;
  Result<std::shared_ptr<const std::vector<storage::ContainerInfo>>> list = state.container_list();
  if (!list.is_ok()) return out;
  for (const storage::ContainerInfo& info : **list) {
    if (!info.record.change_feed.enabled) continue;
    Result<storage::ChangeFeedUsage> usage = feed.usage(info.record);
    if (!usage.is_ok()) continue;
    metrics::ChangeFeedFigures figures;
    figures.container = info.database + "/" + info.container;
    figures.approximate_bytes = static_cast<double>(usage->approximate_bytes);
    figures.oldest_position = static_cast<double>(usage->oldest_index);
    figures.oldest_age_seconds =
        static_cast<double>(std::max<int64_t>(0, usage->applied_ts_micros - usage->oldest_ts_micros)) / 1e6;
    out.push_back(std::move(figures));
  }
  return out;
}

std::vector<metrics::ForecastFigures> forecast_figures(const storage::StoreReader& state, const ReclaimRate& rate,
                                                       size_t max_entries, const std::atomic<bool>* cancel) {
  std::vector<metrics::ForecastFigures> out;
  Result<std::shared_ptr<const std::vector<storage::ContainerInfo>>> list = state.container_list();
  if (!list.is_ok()) return out;
  for (const storage::ContainerInfo& info : **list) {
    if (cancel != nullptr && cancel->load()) break;
    Result<ContainerForecast> forecast =
        forecast_container(state, rate, info.database, info.container, max_entries);
    if (!forecast.is_ok()) continue;  // dropped meanwhile (or unreadable: the next refresh tries again)
    metrics::ForecastFigures figures;
    figures.container = info.database + "/" + info.container;
    figures.expiring_hour_items = forecast->figures.histogram.hours[0].items;
    for (const ttl::ExpiryBucket& hour : forecast->figures.histogram.hours) figures.expiring_day_items += hour.items;
    figures.backlog_peak_items = forecast->projection.peak_items;
    figures.drain_seconds =
        std::min(kDrainNeverSeconds, forecast->projection.drain_seconds.value_or(kDrainNeverSeconds));
    figures.capacity_items_per_second = forecast->capacity.items_per_second;
    figures.truncated = forecast->figures.truncated;
    out.push_back(std::move(figures));
  }
  return out;
}

}  // namespace mayfly::node
