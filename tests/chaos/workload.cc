#include "tests/chaos/workload.h"

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

namespace mayfly::chaos {

int64_t micros_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin).count();
}

uint64_t client_id_for(uint64_t seed, size_t thread) { return (seed % 1000000) * 1000 + thread + 1; }

namespace {

int64_t wall_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t int_member(const boost::json::object& object, const char* key, int64_t fallback) {
  const boost::json::value* value = object.if_contains(key);
  if (value == nullptr) return fallback;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) return static_cast<int64_t>(value->as_uint64());
  return fallback;
}

bool expected_status(OpKind kind, int status) {
  switch (kind) {
    case OpKind::kRead: return status == 200 || status == 404;
    case OpKind::kCreate: return status == 201 || status == 409;
    case OpKind::kUpsert: return status == 200 || status == 201;
    case OpKind::kReplace: return status == 200 || status == 404 || status == 412;
    case OpKind::kDelete: return status == 204 || status == 404;
    case OpKind::kIncr: return status == 200 || status == 404;
    case OpKind::kSetDefaultTtl: return status == 200;
  }
  return false;
}

std::string item_json(const std::string& key, int64_t v, int64_t ttl) {
  std::string json = "{\"id\":\"" + key + "\",\"pk\":\"" + key + "\",\"v\":" + std::to_string(v) + ",\"n\":0";
  if (ttl != kTtlAbsent) json += ",\"ttl\":" + std::to_string(ttl);
  return json + "}";
}

}  // namespace

void classify(Op& op, const client::Response& response) {
  op.status = response.status;
  op.substatus = static_cast<int>(response.substatus);
  op.served_by = response.served_by;
  op.ts = response.ts;
  op.etag = response.etag;
  const bool unknown_outcome =
      (response.status == 503 && (response.substatus == client::kSubstatusServerOutcomeUnknown ||
                                  response.substatus == client::kSubstatusWriteOutcomeUnknown)) ||
      response.status == 408;
  if (op.is_write() && unknown_outcome) {
    op.outcome = Outcome::kUnknown;
    return;
  }
  op.outcome = expected_status(op.kind, response.status) ? Outcome::kOk : Outcome::kFail;
  if (op.kind != OpKind::kRead || op.outcome != Outcome::kOk || response.status != 200) return;
  boost::system::error_code error;
  const boost::json::value body = boost::json::parse(response.body, error);
  if (error || !body.is_object()) {
    op.outcome = Outcome::kFail;
    return;
  }
  const boost::json::object& item = body.as_object();
  op.found = true;
  op.read_v = int_member(item, "v", -1);
  op.read_n = int_member(item, "n", -1);
  op.read_ts = int_member(item, "_ts", -1);
  op.read_ttl = int_member(item, "ttl", kTtlAbsent);
  if (const boost::json::value* etag = item.if_contains("_etag"); etag != nullptr && etag->is_string()) {
    op.etag = std::string(etag->as_string());
  }
}

void Workload::start() {
  for (size_t t = 0; t < options_.threads; ++t) threads_.emplace_back([this, t] { run(t); });
}

void Workload::stop() {
  stopping_ = true;
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void Workload::run(size_t thread) {
  std::mt19937_64 random(options_.seed * 0x9E3779B97F4A7C15ull + thread + 1);
  auto pick = [&random](size_t n) { return static_cast<size_t>(random() % n); };
  client::ClientOptions client_options = options_.client;
  client_options.client_id = client_id_for(options_.seed, thread);
  client_options.exactly_once = options_.exactly_once;
  client_options.jitter_seed = options_.seed + thread;
  client::Client client(client_options);
  std::map<std::string, std::pair<std::string, int64_t>> known_etag;  // key -> (etag, v) last seen by this thread
  int64_t sequence = 0;
  const int64_t version_base = static_cast<int64_t>(thread + 1) * 1'000'000'000;

  for (int64_t count = 0; count < options_.max_ops_per_thread && !stopping_; ++count) {
    Op op;
    op.client = static_cast<int>(thread);
    client::Request request;
    request.database = options_.database;
    request.container = options_.container;
    const size_t roll = pick(100);
    const bool counter = roll >= 88 && !options_.counter_keys.empty();
    op.key = counter ? options_.counter_keys[pick(options_.counter_keys.size())] : options_.keys[pick(options_.keys.size())];
    const std::string partition_key = "\"" + op.key + "\"";  // the key is the item's id and its partition key
    const int64_t v = version_base + ++sequence;
    if (thread == 0 && roll < 2 && !options_.policies.empty()) {
      op.kind = OpKind::kSetDefaultTtl;
      op.key.clear();
      op.default_ttl = options_.policies[pick(options_.policies.size())];
      request = client::Request{};
      request.database = options_.database;
      request.container = options_.container;
      api::UpdateContainer update;
      update.settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
      update.settings.default_ttl_json = std::to_string(op.default_ttl);
      update.settings.force = true;  // the campaign checks policy changes, not the guard against mass expiry
      request.operation = std::move(update);
    } else if (counter || roll >= 80) {  // incr (a fresh v with it, so reads name the version)
      op.kind = OpKind::kIncr;
      op.write_v = v;
      request.operation = api::PatchItem{
          .partition_key = partition_key,
          .id = op.key,
          .operations = "[{\"op\":\"incr\",\"path\":\"/n\",\"value\":1},{\"op\":\"set\",\"path\":\"/v\",\"value\":" +
                        std::to_string(v) + "}]"};
    } else if (roll < 44) {
      op.kind = OpKind::kRead;
      request.operation = api::ReadItem{.partition_key = partition_key, .id = op.key};
      const size_t level = pick(10);
      op.level = level < 5 ? ReadLevel::kStrong
                           : level < 8 ? ReadLevel::kSession : level < 9 ? ReadLevel::kBounded : ReadLevel::kEventual;
      const client::Consistency consistency[] = {client::Consistency::kStrong, client::Consistency::kSession,
                                                 client::Consistency::kBounded, client::Consistency::kEventual};
      request.options.consistency = consistency[static_cast<int>(op.level)];
      if (pick(3) == 0) {  // a node of our choosing: followers must answer strong reads linearizably too
        op.pinned_endpoint = 1 + pick(options_.nodes);
        request.endpoint = op.pinned_endpoint;
      }
    } else if (roll < 74) {
      op.kind = roll < 52 ? OpKind::kCreate : roll < 64 ? OpKind::kUpsert : OpKind::kReplace;
      op.write_v = v;
      op.write_ttl = options_.item_ttls[pick(options_.item_ttls.size())];
      std::string body = item_json(op.key, v, op.write_ttl);
      if (op.kind == OpKind::kCreate) {
        request.operation = api::CreateItem{.body = std::move(body)};
      } else if (op.kind == OpKind::kUpsert) {
        request.operation = api::UpsertItem{.body = std::move(body)};
      } else {
        request.operation = api::ReplaceItem{.body = std::move(body)};
      }
      auto etag = known_etag.find(op.key);
      if (op.kind == OpKind::kReplace && etag != known_etag.end() && pick(4) != 0) {
        request.options.if_match = etag->second.first;
        op.if_match_v = etag->second.second;
      }
    } else {
      op.kind = OpKind::kDelete;
      request.operation = api::DeleteItem{.partition_key = partition_key, .id = op.key};
    }
    op.invoke_wall_us = wall_micros();
    op.invoke_us = micros_since(origin_);
    client::Response response = client.execute(request);
    op.complete_us = micros_since(origin_);
    classify(op, response);
    // Without exactly-once writes, an application that must get its write done sends it again when the outcome is
    // unknown: one logical operation, perhaps applied twice. The checkers must catch that (the mutation check).
    for (int resend = 0; resend < 5 && !options_.exactly_once && op.outcome == Outcome::kUnknown && !stopping_;
         ++resend) {
      // The application's back-off (300 ms doubling, at most 2 s) lets the fault behind the 503 heal.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(300 << resend, 2000)));
      response = client.execute(request);
      op.complete_us = micros_since(origin_);
      ++op.resent;
      classify(op, response);
    }
    if (op.outcome == Outcome::kOk && op.kind == OpKind::kRead && op.found) {
      known_etag[op.key] = {op.etag, op.read_v};
    } else if (op.outcome == Outcome::kOk && op.write_v != 0 && op.status < 300 && !op.etag.empty()) {
      known_etag[op.key] = {op.etag, op.write_v};
    }
    history_.record(std::move(op));
  }
}

}  // namespace mayfly::chaos
