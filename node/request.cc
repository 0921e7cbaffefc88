#include "node/request.h"

#include <algorithm>
#include <charconv>

#include "api/codec.h"
#include "common/assert.h"
#include "query/executor.h"
#include "storage/document.h"
#include "storage/feed_range.h"
#include "storage/json.h"


namespace mayfly::node {
namespace {

Result<uint64_t> parse_session_token(const std::string& text) {
  if (text.empty()) return uint64_t{0};
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return Status::invalid_argument("session token '" + text.substr(0, 64) +
                                    "' is not one this cluster issued (expected a log index)");
  }
  return value;
}

void apply_settings(const api::ContainerSettings& settings, storage::Command& command,
                    int64_t default_feed_retention_seconds) {
  using Settings = api::ContainerSettings;
  command.partition_key_path = settings.partition_key_path;
  if (settings.default_ttl == Settings::DefaultTtl::kSet) {
    command.default_ttl_change = storage::DefaultTtlChange::kSet;
    command.default_ttl_json = settings.default_ttl_json;
  } else if (settings.default_ttl == Settings::DefaultTtl::kRemove) {
    command.default_ttl_change = storage::DefaultTtlChange::kRemove;
  }
  if (settings.indexing == Settings::Indexing::kConsistent) command.indexing = ttl::IndexingMode::kConsistent;
  if (settings.indexing == Settings::Indexing::kNone) command.indexing = ttl::IndexingMode::kNone;
  if (settings.throughput == Settings::Throughput::kProvisioned) {
    command.throughput = storage::Throughput{storage::Throughput::Mode::kProvisioned,
                                             static_cast<int64_t>(settings.provisioned_ru_per_second)};
  }
  if (settings.throughput == Settings::Throughput::kServerless) {
    command.throughput = storage::Throughput{storage::Throughput::Mode::kServerless, 0};
  }
  if (settings.change_feed == Settings::ChangeFeed::kOn) {
    const int64_t retention = settings.change_feed_retention_seconds == 0
                                  ? default_feed_retention_seconds
                                  : static_cast<int64_t>(settings.change_feed_retention_seconds);
    command.change_feed = storage::ChangeFeedSettings{true, retention, 0};
  }
  if (settings.change_feed == Settings::ChangeFeed::kOff) command.change_feed = storage::ChangeFeedSettings{};
  if (settings.expiry_warning_seconds) command.expiry_warning_seconds = *settings.expiry_warning_seconds;
}

uint32_t page_items(uint32_t asked) { return asked == 0 ? kDefaultPageItems : asked; }

}  // namespace

Reply throttled_reply(int64_t wait_ms) {
  Reply reply = Reply::error(StatusCode::kThrottled,
                             "request rate is large: the container's provisioned throughput is used up for this "
                             "second; retry after " + std::to_string(wait_ms) + " ms");
  reply.retry_after_ms = static_cast<uint32_t>(wait_ms);
  return reply;
}

Result<int64_t> parse_clock_advance(std::string_view text) {
  const Status invalid = Status::invalid_argument(
      "advance-clock takes a positive duration such as 90s, 1500ms, 30m, 2h or 1d (a bare number is seconds), at "
      "most 2147483647s; got '" + std::string(text.substr(0, 64)) + "'");
  int64_t amount = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [rest, error] = std::from_chars(begin, end, amount);
  if (error != std::errc() || rest == begin || amount <= 0) return invalid;
  const std::string_view unit(rest, static_cast<size_t>(end - rest));
  int64_t micros_per_unit = 0;
  if (unit.empty() || unit == "s") micros_per_unit = 1'000'000;
  else if (unit == "ms") micros_per_unit = 1'000;
  else if (unit == "m") micros_per_unit = 60'000'000;
  else if (unit == "h") micros_per_unit = 3'600'000'000;
  else if (unit == "d") micros_per_unit = 86'400'000'000;
  else return invalid;
  constexpr int64_t kMaxMicros = int64_t{2147483647} * 1'000'000;
  if (amount > kMaxMicros / micros_per_unit) return invalid;
  return amount * micros_per_unit;
}

Result<api::Request> decode_request(proto::Request::Reader wire) {
  MAYFLY_ASSIGN_OR_RETURN(api::Request request, api::decode_request(wire));
  // The owner is never the sender's to say: the node that authenticated the client sets it (node/rpc_services.cc),
  // and a leader takes a forwarded one only from a peer that proved the cluster secret.
  if (request.write_id.has_value()) request.write_id->owner = 0;
  set_hold_actor(request, "");  // likewise who set or released a hold
  if (Status checked = check_request(request); !checked.is_ok()) return checked;
  return request;
}

uint32_t change_feed_wait_ms(const api::Request& request) {
  const auto* feed = request.as<api::ReadChangeFeed>();
  return feed == nullptr ? 0 : std::min(feed->wait_ms, kMaxChangeFeedWaitMs);
}

void set_hold_actor(api::Request& request, std::string actor) {
  if (auto* set = std::get_if<api::SetHold>(&request.operation)) set->actor = std::move(actor);
  else if (auto* release = std::get_if<api::ReleaseHold>(&request.operation)) release->actor = std::move(actor);
}

Status check_request(const api::Request& request) {
  if ((request.as<api::SetHold>() != nullptr || request.as<api::ReleaseHold>() != nullptr) &&
      (request.database.empty() || request.container.empty())) {
    return Status::invalid_argument("a legal hold is set and released on a container: name its database and container");
  }
  if (request.as<api::ListHolds>() != nullptr && request.database.empty() && !request.container.empty()) {
    return Status::invalid_argument("listing a container's holds needs its database too");
  }
  if (request.as<api::DeletePartition>() != nullptr && (request.database.empty() || request.container.empty())) {
    return Status::invalid_argument("a delete by partition key needs a database and a container");
  }
  if (const auto* batch = request.as<api::ExecuteBatch>()) {
    if (request.database.empty() || request.container.empty()) {
      return Status::invalid_argument("a transactional batch needs a database and a container");
    }
    if (batch->operations.size() > storage::kMaxItemBytes) {
      return Status::too_large("a transactional batch is " + std::to_string(batch->operations.size()) +
                               " bytes; the limit is " + std::to_string(storage::kMaxItemBytes) + " bytes (2 MB)");
    }
  }
  if (Result<uint64_t> token = parse_session_token(request.options.session_token); !token.is_ok()) {
    return token.status();
  }
  if (request.write_id.has_value()) {
    const api::WriteId& id = *request.write_id;
    if (Status valid = storage::validate_write_id(
            storage::WriteId{id.client, id.sequence, id.first_unacknowledged, id.retry, id.owner});
        !valid.is_ok()) {
      return Status::invalid_argument(valid.message());
    }
  }
  if (const auto* feed = request.as<api::ReadChangeFeed>()) {
    if (request.database.empty() || request.container.empty()) {
      return Status::invalid_argument("a change feed read needs a database and a container");
    }
    if (feed->from == api::ReadChangeFeed::From::kContinuation && feed->continuation.empty()) {
      return Status::invalid_argument("an empty change feed continuation");
    }
    if (page_items(feed->max_items) > kMaxChangeFeedPageItems) {
      return Status::invalid_argument("a change feed page holds at most " + std::to_string(kMaxChangeFeedPageItems) +
                                      " changes, got maxItems " + std::to_string(feed->max_items));
    }
  }
  if (const auto* add = request.as<api::AddMember>()) {
    if (add->id == 0 || add->address.find(':') == std::string::npos) {
      return Status::invalid_argument("add-member needs a node id >= 1 and its HOST:PORT");
    }
  }
  if (const auto* advance = request.as<api::AdvanceClock>()) {
    if (Result<int64_t> micros = parse_clock_advance(advance->duration); !micros.is_ok()) return micros.status();
  }
  if (request.as<api::ContainerForecast>() != nullptr && (request.database.empty() || request.container.empty())) {
    return Status::invalid_argument("a forecast needs a database and a container");
  }
  return Status::ok();
}

uint64_t session_token_of(const api::Request& request) {
  Result<uint64_t> token = parse_session_token(request.options.session_token);
  return token.is_ok() ? token.value() : 0;  // checked at decode: a request made on the node has none or a good one
}

storage::Command to_command(const api::Request& request, int64_t default_feed_retention_seconds) {
  storage::Command command;
  command.database = request.database;
  command.container = request.container;
  if (!request.options.if_match.empty()) command.if_match = request.options.if_match;
  if (request.write_id.has_value()) {
    const api::WriteId& id = *request.write_id;
    command.write_id = storage::WriteId{id.client, id.sequence, id.first_unacknowledged, id.retry, id.owner};
  }
  switch (request.kind()) {
    case api::Kind::kCreateDatabase: {
      command.type = storage::CommandType::kCreateDatabase;
      const uint32_t shared = request.as<api::CreateDatabase>()->shared_ru_per_second;
      if (shared > 0) {
        command.throughput = storage::Throughput{storage::Throughput::Mode::kProvisioned, static_cast<int64_t>(shared)};
      }
      break;
    }
    case api::Kind::kUpdateDatabase:
      command.type = storage::CommandType::kUpdateDatabase;
      command.throughput = storage::Throughput{
          storage::Throughput::Mode::kProvisioned,
          static_cast<int64_t>(request.as<api::UpdateDatabase>()->shared_ru_per_second)};
      break;
    case api::Kind::kDeleteDatabase: command.type = storage::CommandType::kDeleteDatabase; break;
    case api::Kind::kCreateContainer:
      command.type = storage::CommandType::kCreateContainer;
      apply_settings(request.as<api::CreateContainer>()->settings, command, default_feed_retention_seconds);
      break;
    case api::Kind::kUpdateContainer:
      command.type = storage::CommandType::kUpdateContainer;
      apply_settings(request.as<api::UpdateContainer>()->settings, command, default_feed_retention_seconds);
      break;
    case api::Kind::kDeleteContainer: command.type = storage::CommandType::kDeleteContainer; break;
    case api::Kind::kCreateItem:
      command.type = storage::CommandType::kCreateItem;
      command.body = request.as<api::CreateItem>()->body;
      break;
    case api::Kind::kUpsertItem:
      command.type = storage::CommandType::kUpsertItem;
      command.body = request.as<api::UpsertItem>()->body;
      break;
    case api::Kind::kReplaceItem:
      command.type = storage::CommandType::kReplaceItem;
      command.body = request.as<api::ReplaceItem>()->body;
      break;
    case api::Kind::kDeleteItem: {
      const auto& op = *request.as<api::DeleteItem>();
      command.type = storage::CommandType::kDeleteItem;
      command.partition_key_json = op.partition_key;
      command.id = op.id;
      break;
    }
    case api::Kind::kDeletePartition: {
      command.type = storage::CommandType::kDeletePartition;
      command.partition_key_json = request.as<api::DeletePartition>()->partition_key;
      break;
    }
    case api::Kind::kSetHold: {
      const auto& op = *request.as<api::SetHold>();
      command.type = storage::CommandType::kSetHold;
      command.id = op.id;
      command.partition_key_json = op.partition_key;
      command.body = op.reason;
      storage::HoldCommand hold;
      hold.scope = op.scope == api::SetHold::Scope::kItem        ? storage::HoldScope::kItem
                   : op.scope == api::SetHold::Scope::kPartition ? storage::HoldScope::kPartition
                                                                 : storage::HoldScope::kContainer;
      hold.item_id = op.item_id;
      hold.actor = op.actor;
      command.hold = std::move(hold);
      break;
    }
    case api::Kind::kReleaseHold: {
      const auto& op = *request.as<api::ReleaseHold>();
      command.type = storage::CommandType::kReleaseHold;
      command.id = op.id;
      command.body = op.reason;
      command.hold = storage::HoldCommand{.actor = op.actor};
      break;
    }
    case api::Kind::kExecuteBatch: {
      const auto& op = *request.as<api::ExecuteBatch>();
      command.type = storage::CommandType::kBatch;
      command.partition_key_json = op.partition_key;
      command.body = op.operations;
      break;
    }
    case api::Kind::kPatchItem: {
      const auto& op = *request.as<api::PatchItem>();
      command.type = storage::CommandType::kPatchItem;
      command.partition_key_json = op.partition_key;
      command.id = op.id;
      command.body = op.operations;
      break;
    }
    default:
      MAYFLY_UNREACHABLE("to_command of %s, which is not a write", std::string(api::kind_name(request.kind())).c_str());
  }
  return command;
}

storage::ChangeFeedRequest change_feed_request(const api::Request& request) {
  const api::ReadChangeFeed& wire = *request.as<api::ReadChangeFeed>();
  storage::ChangeFeedRequest feed;
  feed.database = request.database;
  feed.container = request.container;
  feed.mode = wire.mode == api::ReadChangeFeed::Mode::kLatest ? storage::ChangeFeedMode::kLatest
                                                              : storage::ChangeFeedMode::kAll;
  switch (wire.from) {
    case api::ReadChangeFeed::From::kBeginning: feed.from.kind = storage::ChangeFeedFrom::Kind::kBeginning; break;
    case api::ReadChangeFeed::From::kNow: feed.from.kind = storage::ChangeFeedFrom::Kind::kNow; break;
    case api::ReadChangeFeed::From::kTime:
      feed.from.kind = storage::ChangeFeedFrom::Kind::kTime;
      feed.from.ts_micros = wire.time_micros;
      break;
    case api::ReadChangeFeed::From::kContinuation:
      feed.from.kind = storage::ChangeFeedFrom::Kind::kContinuation;
      feed.from.continuation = wire.continuation;
      break;
  }
  feed.only_expirations = wire.only_expirations;
  feed.only_warnings = wire.only_warnings;
  feed.warnings = !wire.no_warnings;
  feed.max_changes = page_items(wire.max_items);
  feed.feed_range_min = wire.feed_range_min;
  feed.feed_range_max = wire.feed_range_max;
  return feed;
}

void encode_reply(const Reply& reply, proto::Response::Builder response) {
  const storage::OpResult& result = reply.result;
  response.setStatus(static_cast<uint16_t>(result.http_status()));
  response.setSubstatus(static_cast<uint32_t>(result.substatus));
  response.setMessage(result.message);
  response.setBody(result.body);
  response.setEtag(result.etag);
  response.setTs(result.ts_micros / kMicrosPerSecond);
  response.setRequestCharge(reply.request_charge);
  response.setSessionToken(reply.session_token == 0 ? std::string() : std::to_string(reply.session_token));
  response.setRetryAfterMs(reply.retry_after_ms);
  response.setServedBy(reply.served_by.value());
  response.setLeaderHint(reply.leader_hint.value());
  response.setContinuation(result.continuation);
  if (!reply.data.empty()) {
    response.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(reply.data.data()), reply.data.size()));
  }
}

capnp::MessageSize reply_size_hint(const Reply& reply) {
  const storage::OpResult& result = reply.result;
  const size_t bytes = result.message.size() + result.body.size() + result.etag.size() + result.continuation.size() +
                       reply.data.size();
  return capnp::MessageSize{64 + bytes / 8 + 8, 0};
}

Reply decode_reply(proto::Response::Reader response) {
  Reply reply;
  if (std::optional<HttpAnswer> answer = from_http_status(response.getStatus())) {
    reply.result.code = answer->code;
    reply.result.done = answer->done;
  } else {
    reply.result.code = StatusCode::kInternal;
  }
  reply.result.substatus = static_cast<int>(response.getSubstatus());
  reply.result.message = response.getMessage();
  reply.result.body = response.getBody();
  reply.result.etag = response.getEtag();
  reply.result.ts_micros = response.getTs() * kMicrosPerSecond;
  reply.result.continuation = response.getContinuation();
  reply.request_charge = response.getRequestCharge();
  const kj::StringPtr token = response.getSessionToken();
  uint64_t value = 0;
  std::from_chars(token.begin(), token.end(), value);
  reply.session_token = value;
  reply.retry_after_ms = response.getRetryAfterMs();
  reply.served_by = NodeId(response.getServedBy());
  reply.leader_hint = NodeId(response.getLeaderHint());
  return reply;
}

std::string op_name(const api::Request& request) {
  // Writes by the name of the command they become (storage::command_type_name), without building it.
  switch (request.kind()) {
    case api::Kind::kCreateDatabase: return "create_database";
    case api::Kind::kDeleteDatabase: return "delete_database";
    case api::Kind::kUpdateDatabase: return "update_database";
    case api::Kind::kCreateContainer: return "create_container";
    case api::Kind::kUpdateContainer: return "update_container";
    case api::Kind::kDeleteContainer: return "delete_container";
    case api::Kind::kCreateItem: return "create";
    case api::Kind::kUpsertItem: return "upsert";
    case api::Kind::kReplaceItem: return "replace";
    case api::Kind::kDeleteItem: return "delete";
    case api::Kind::kPatchItem: return "patch";
    case api::Kind::kExecuteBatch: return "batch";
    case api::Kind::kDeletePartition: return "delete_partition";
    case api::Kind::kSetHold: return "set_hold";
    case api::Kind::kReleaseHold: return "release_hold";
    case api::Kind::kListHolds: return "list_holds";
    case api::Kind::kListHoldAudit: return "list_hold_audit";
    case api::Kind::kReadItem: return "read";
    case api::Kind::kListItems: return "list";
    case api::Kind::kGetContainer: return "get_container";
    case api::Kind::kListContainers: return "list_containers";
    case api::Kind::kListDatabases: return "list_databases";
    case api::Kind::kListOffers: return "list_offers";
    case api::Kind::kQuery: return "query";
    case api::Kind::kReadChangeFeed: return "change_feed";
    case api::Kind::kClusterStatus: return "cluster_status";
    case api::Kind::kAddMember: return "add_member";
    case api::Kind::kRemoveMember: return "remove_member";
    case api::Kind::kTransferLeader: return "transfer_leader";
    case api::Kind::kAdvanceClock: return "advance_clock";
    case api::Kind::kBackupOpen: return "backup_open";
    case api::Kind::kBackupRead: return "backup_read";
    case api::Kind::kContainerForecast: return "container_forecast";
  }
  return "unknown";
}

storage::OpResult execute_read(const storage::StoreReader& state, const api::Request& request, int64_t now_micros) {
  switch (request.kind()) {
    case api::Kind::kReadItem: {
      const auto& op = *request.as<api::ReadItem>();
      return state.read_item(request.database, request.container, op.partition_key, op.id, now_micros);
    }
    case api::Kind::kListItems: {
      storage::ListRequest list;
      list.database = request.database;
      list.container = request.container;
      list.partition_key_json = request.as<api::ListItems>()->partition_key;
      list.max_items = page_items(request.options.max_items);
      list.continuation = request.options.continuation;
      return state.list_items(list, now_micros);
    }
    case api::Kind::kGetContainer: return state.read_container(request.database, request.container);
    case api::Kind::kListContainers: return state.list_containers(request.database);
    case api::Kind::kListDatabases: return state.list_databases();
    case api::Kind::kListOffers: return state.list_offers();
    case api::Kind::kListHolds:
      return state.list_holds(request.database, request.container, request.as<api::ListHolds>()->include_released);
    case api::Kind::kListHoldAudit:
      return state.list_hold_audit(page_items(request.options.max_items), request.options.continuation);
    case api::Kind::kQuery: {
      const auto& op = *request.as<api::Query>();
      query::QueryRequest query;
      query.database = request.database;
      query.container = request.container;
      query.sql = op.sql;
      query.parameters_json = op.parameters;
      query.partition_key_json = op.partition_key;
      query.enable_scan = op.enable_scan;
      if (!op.feed_range_min.empty() || !op.feed_range_max.empty()) {
        Result<storage::FeedRange> range = storage::parse_feed_range(op.feed_range_min, op.feed_range_max);
        if (!range.is_ok()) return storage::OpResult::error(range.status());
        if (!range->whole()) query.feed_range = std::move(range).value();
      }
      query.max_items = page_items(request.options.max_items);
      query.continuation = request.options.continuation;
      return query::execute_query(state, query, now_micros);
    }
    default: break;
  }
  return storage::OpResult::error(StatusCode::kInvalidArgument, "unknown read");
}

namespace {

const char* operation_type(storage::ChangeOperation operation) {
  switch (operation) {
    case storage::ChangeOperation::kCreate: return "create";
    case storage::ChangeOperation::kReplace: return "replace";
    case storage::ChangeOperation::kDelete: return "delete";
    case storage::ChangeOperation::kWarning: return "warning";
  }
  return "unknown";
}

// An image as the item API shows it (system properties included); null when there is none.
Status append_image(const std::string& encoded, std::string_view database, uint64_t crid, ttl::DefaultTtl policy,
                    std::string& out) {
  if (encoded.empty()) {
    out += "null";
    return Status::ok();
  }
  MAYFLY_ASSIGN_OR_RETURN(storage::ItemRecord record, storage::decode_item(encoded));
  out += storage::render_item(record, database, crid, policy);
  return Status::ok();
}

}  // namespace

storage::OpResult execute_change_feed(const storage::ChangeFeedReader& feed, const storage::ChangeFeedRequest& request,
                                      bool* caught_up_and_empty, int64_t* warnings) {
  if (caught_up_and_empty != nullptr) *caught_up_and_empty = false;
  Result<storage::ChangeFeedPage> page = feed.read(request);
  if (!page.is_ok()) return storage::OpResult::error(page.status());
  // The images' _expiresAt use the defaultTtl in force at each change's position; _rid and positions use the
  // container the page read.
  const uint64_t crid = page->crid;
  storage::OpResult result;
  std::string& body = result.body;
  body = "{\"changes\":[";
  bool first = true;
  for (const storage::Change& change : page->changes) {
    if (!first) body += ",";
    first = false;
    body += "{\"operationType\":\"";
    body += operation_type(change.operation);
    body += "\",\"position\":";
    json::write_json_string(storage::change_feed_token(crid, change.position), body);
    // The write's log index; left out when unknown (a latest-version change of an item restored from a backup).
    if (change.position.index != 0) body += ",\"lsn\":" + std::to_string(change.position.index);
    body += ",\"ts\":" + std::to_string(ttl::ts_seconds(change.ts_micros));
    body += ",\"tsMicros\":" + std::to_string(change.ts_micros);
    body += ",\"partitionKey\":";
    body += change.partition_key.empty() ? std::string("null") : change.partition_key;
    body += ",\"id\":";
    json::write_json_string(change.id, body);
    body += ",\"current\":";
    if (Status status = append_image(change.image, request.database, crid, change.default_ttl, body); !status.is_ok()) {
      return storage::OpResult::error(status);
    }
    body += ",\"previous\":";
    if (Status status = append_image(change.previous, request.database, crid, change.default_ttl, body); !status.is_ok()) {
      return storage::OpResult::error(status);
    }
    if (change.ttl_expired) body += ",\"timeToLiveExpired\":true";
    if (change.operation == storage::ChangeOperation::kWarning && warnings != nullptr) *warnings += 1;
    body += "}";
  }
  body += "]";
  // The gateway names the partition key in the Cosmos shape of a delete ({"<property>": value}).
  body += ",\"partitionKeyPath\":";
  json::write_json_string(page->partition_key_path, body);
  body += ",\"continuation\":";
  json::write_json_string(page->continuation, body);
  body += ",\"caughtUp\":";
  body += page->caught_up ? "true" : "false";
  body += "}";
  result.continuation = page->continuation;
  if (caught_up_and_empty != nullptr) *caught_up_and_empty = page->caught_up && page->changes.empty();
  return result;
}

}  // namespace mayfly::node
