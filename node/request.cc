#include "node/request.h"

#include <charconv>

#include "storage/document.h"
#include "storage/json.h"


namespace mayfly::node {
namespace {

Result<uint64_t> parse_session_token(kj::StringPtr text) {
  if (text.size() == 0) return uint64_t{0};
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.begin(), text.end(), value);
  if (error != std::errc() || end != text.end()) {
    return Status::invalid_argument("session token '" + std::string(text.cStr()) +
                                    "' is not one this cluster issued (expected a log index)");
  }
  return value;
}

Consistency consistency_of(proto::Consistency consistency) {
  switch (consistency) {
    case proto::Consistency::STRONG: return Consistency::kStrong;
    case proto::Consistency::BOUNDED: return Consistency::kBounded;
    case proto::Consistency::EVENTUAL: return Consistency::kEventual;
    case proto::Consistency::SESSION: break;
  }
  return Consistency::kSession;
}

void apply_settings(proto::ContainerSettings::Reader settings, storage::Command& command) {
  command.partition_key_path = settings.getPartitionKeyPath();
  auto ttl = settings.getDefaultTtl();
  if (ttl.isSet()) {
    command.default_ttl_change = storage::DefaultTtlChange::kSet;
    command.default_ttl_json = ttl.getSet();
  } else if (ttl.isRemove()) {
    command.default_ttl_change = storage::DefaultTtlChange::kRemove;
  }
  auto indexing = settings.getIndexing();
  if (indexing.isConsistent()) command.indexing = ttl::IndexingMode::kConsistent;
  if (indexing.isNone()) command.indexing = ttl::IndexingMode::kNone;
  auto throughput = settings.getThroughput();
  if (throughput.isProvisioned()) {
    command.throughput = storage::Throughput{storage::Throughput::Mode::kProvisioned,
                                             static_cast<int64_t>(throughput.getProvisioned())};
  }
  if (throughput.isServerless()) command.throughput = storage::Throughput{storage::Throughput::Mode::kServerless, 0};
  auto feed = settings.getChangeFeed();
  if (feed.isOn()) command.change_feed = storage::ChangeFeedSettings{true, static_cast<int64_t>(feed.getOn()), 0};
  if (feed.isOff()) command.change_feed = storage::ChangeFeedSettings{};
}

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

Result<Operation> decode_request(proto::Request::Reader request) {
  Operation op;
  auto options = request.getOptions();
  op.consistency = consistency_of(options.getConsistency());
  Result<uint64_t> token = parse_session_token(options.getSessionToken());
  if (!token.is_ok()) return token.status();
  op.session_token = token.value();
  storage::Command& command = op.command;
  command.database = request.getDatabase();
  command.container = request.getContainer();
  if (options.getIfMatch().size() > 0) command.if_match = std::string(options.getIfMatch().cStr());
  if (request.hasWriteId()) {
    auto wire = request.getWriteId();
    // The owner is never the client's to say: the node that authenticated it sets it (node/rpc_services.cc).
    storage::WriteId id{wire.getClient(), wire.getSequence(), wire.getFirstUnacknowledged(), wire.getRetry()};
    if (Status valid = storage::validate_write_id(id); !valid.is_ok()) {
      return Status::invalid_argument(valid.message());
    }
    command.write_id = id;
  }
  ReadQuery& read = op.read;
  read.database = command.database;
  read.container = command.container;
  auto read_kind = [&](ReadQuery::Kind kind) {
    op.kind = Operation::Kind::kRead;
    read.kind = kind;
  };
  switch (request.which()) {
    case proto::Request::CREATE_DATABASE: command.type = storage::CommandType::kCreateDatabase; break;
    case proto::Request::DELETE_DATABASE: command.type = storage::CommandType::kDeleteDatabase; break;
    case proto::Request::LIST_DATABASES: read_kind(ReadQuery::Kind::kDatabases); break;
    case proto::Request::CREATE_CONTAINER:
      command.type = storage::CommandType::kCreateContainer;
      apply_settings(request.getCreateContainer(), command);
      break;
    case proto::Request::UPDATE_CONTAINER:
      command.type = storage::CommandType::kUpdateContainer;
      apply_settings(request.getUpdateContainer(), command);
      op.ttl_dry_run = request.getUpdateContainer().getDryRun();
      op.ttl_force = request.getUpdateContainer().getForce();
      break;
    case proto::Request::GET_CONTAINER: read_kind(ReadQuery::Kind::kContainer); break;
    case proto::Request::DELETE_CONTAINER: command.type = storage::CommandType::kDeleteContainer; break;
    case proto::Request::LIST_CONTAINERS: read_kind(ReadQuery::Kind::kContainers); break;
    case proto::Request::CREATE_ITEM:
      command.type = storage::CommandType::kCreateItem;
      command.body = request.getCreateItem();
      break;
    case proto::Request::UPSERT_ITEM:
      command.type = storage::CommandType::kUpsertItem;
      command.body = request.getUpsertItem();
      break;
    case proto::Request::REPLACE_ITEM:
      command.type = storage::CommandType::kReplaceItem;
      command.body = request.getReplaceItem();
      break;
    case proto::Request::READ_ITEM:
      read_kind(ReadQuery::Kind::kItem);
      read.partition_key_json = request.getReadItem().getPartitionKey();
      read.id = request.getReadItem().getId();
      break;
    case proto::Request::DELETE_ITEM:
      command.type = storage::CommandType::kDeleteItem;
      command.partition_key_json = request.getDeleteItem().getPartitionKey();
      command.id = request.getDeleteItem().getId();
      break;
    case proto::Request::PATCH_ITEM:
      command.type = storage::CommandType::kPatchItem;
      command.partition_key_json = request.getPatchItem().getKey().getPartitionKey();
      command.id = request.getPatchItem().getKey().getId();
      command.body = request.getPatchItem().getOperations();
      break;
    case proto::Request::LIST_ITEMS: {
      read_kind(ReadQuery::Kind::kItems);
      read.list.database = command.database;
      read.list.container = command.container;
      if (request.getListItems().isPartitionKey()) {
        read.list.partition_key_json = std::string(request.getListItems().getPartitionKey().cStr());
      }
      read.list.max_items = options.getMaxItems() == 0 ? 100 : options.getMaxItems();
      read.list.continuation = options.getContinuation();
      break;
    }
    case proto::Request::QUERY: {
      read_kind(ReadQuery::Kind::kQuery);
      auto wire = request.getQuery();
      read.query.database = command.database;
      read.query.container = command.container;
      read.query.sql = wire.getSql();
      read.query.parameters_json = wire.getParameters();
      if (wire.getPartitionKey().isValue()) {
        read.query.partition_key_json = std::string(wire.getPartitionKey().getValue().cStr());
      }
      read.query.enable_scan = wire.getEnableScan();
      read.query.max_items = options.getMaxItems() == 0 ? 100 : options.getMaxItems();
      read.query.continuation = options.getContinuation();
      break;
    }
    case proto::Request::READ_CHANGE_FEED: {
      read_kind(ReadQuery::Kind::kChangeFeed);
      auto wire = request.getReadChangeFeed();
      storage::ChangeFeedRequest& feed = read.feed;
      feed.database = command.database;
      feed.container = command.container;
      if (feed.database.empty() || feed.container.empty()) {
        return Status::invalid_argument("a change feed read needs a database and a container");
      }
      feed.mode = wire.getMode() == proto::ReadChangeFeed::Mode::LATEST ? storage::ChangeFeedMode::kLatest
                                                                       : storage::ChangeFeedMode::kAll;
      auto from = wire.getFrom();
      switch (from.which()) {
        case proto::ReadChangeFeed::From::BEGINNING: feed.from.kind = storage::ChangeFeedFrom::Kind::kBeginning; break;
        case proto::ReadChangeFeed::From::NOW: feed.from.kind = storage::ChangeFeedFrom::Kind::kNow; break;
        case proto::ReadChangeFeed::From::TIME:
          feed.from.kind = storage::ChangeFeedFrom::Kind::kTime;
          feed.from.ts_micros = from.getTime();
          break;
        case proto::ReadChangeFeed::From::CONTINUATION:
          feed.from.kind = storage::ChangeFeedFrom::Kind::kContinuation;
          feed.from.continuation = from.getContinuation();
          if (feed.from.continuation.empty()) return Status::invalid_argument("an empty change feed continuation");
          break;
        default:
          return Status::invalid_argument("unknown change feed start (is the client newer than this server?)");
      }
      feed.only_expirations = wire.getOnlyExpirations();
      const uint32_t max_items = wire.getMaxItems() == 0 ? 100 : wire.getMaxItems();
      if (max_items > 1000) {
        return Status::invalid_argument("a change feed page holds at most 1000 changes, got maxItems " +
                                        std::to_string(max_items));
      }
      feed.max_changes = max_items;
      read.feed_wait_ms = std::min(wire.getWaitMs(), kMaxChangeFeedWaitMs);
      break;
    }
    case proto::Request::CLUSTER_STATUS: op.kind = Operation::Kind::kClusterStatus; break;
    case proto::Request::ADD_MEMBER:
      op.kind = Operation::Kind::kAddMember;
      op.member = NodeId(request.getAddMember().getId());
      op.member_address = request.getAddMember().getAddress();
      if (op.member == NodeId(0) || op.member_address.find(':') == std::string::npos) {
        return Status::invalid_argument("add-member needs a node id >= 1 and its HOST:PORT");
      }
      break;
    case proto::Request::REMOVE_MEMBER:
      op.kind = Operation::Kind::kRemoveMember;
      op.member = NodeId(request.getRemoveMember());
      break;
    case proto::Request::TRANSFER_LEADER:
      op.kind = Operation::Kind::kTransferLeader;
      op.member = NodeId(request.getTransferLeader());
      break;
    case proto::Request::ADVANCE_CLOCK: {
      op.kind = Operation::Kind::kAdvanceClock;
      MAYFLY_ASSIGN_OR_RETURN(op.advance_micros, parse_clock_advance(request.getAdvanceClock().cStr()));
      break;
    }
    case proto::Request::BACKUP_OPEN: op.kind = Operation::Kind::kBackupOpen; break;
    case proto::Request::BACKUP_READ:
      op.kind = Operation::Kind::kBackupRead;
      op.backup_id = request.getBackupRead().getBackup();
      op.backup_offset = request.getBackupRead().getOffset();
      op.backup_max_bytes = request.getBackupRead().getMaxBytes();
      break;
    case proto::Request::CONTAINER_FORECAST:
      op.kind = Operation::Kind::kContainerForecast;
      op.read.database = command.database;
      op.read.container = command.container;
      if (op.read.database.empty() || op.read.container.empty()) {
        return Status::invalid_argument("a forecast needs a database and a container");
      }
      break;
    default:
      return Status::invalid_argument("unknown request type (is the client newer than this server?)");
  }
  return op;
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

std::string op_name(const Operation& operation) {
  switch (operation.kind) {
    case Operation::Kind::kWrite: return std::string(storage::command_type_name(operation.command.type));
    case Operation::Kind::kClusterStatus: return "cluster_status";
    case Operation::Kind::kAddMember: return "add_member";
    case Operation::Kind::kRemoveMember: return "remove_member";
    case Operation::Kind::kTransferLeader: return "transfer_leader";
    case Operation::Kind::kAdvanceClock: return "advance_clock";
    case Operation::Kind::kBackupOpen: return "backup_open";
    case Operation::Kind::kBackupRead: return "backup_read";
    case Operation::Kind::kContainerForecast: return "container_forecast";
    case Operation::Kind::kRead: break;
  }
  switch (operation.read.kind) {
    case ReadQuery::Kind::kItem: return "read";
    case ReadQuery::Kind::kItems: return "list";
    case ReadQuery::Kind::kContainer: return "get_container";
    case ReadQuery::Kind::kContainers: return "list_containers";
    case ReadQuery::Kind::kDatabases: return "list_databases";
    case ReadQuery::Kind::kQuery: return "query";
    case ReadQuery::Kind::kChangeFeed: return "change_feed";
  }
  return "unknown";
}

storage::OpResult execute_read(const storage::StoreReader& state, const ReadQuery& query, int64_t now_micros) {
  switch (query.kind) {
    case ReadQuery::Kind::kItem:
      return state.read_item(query.database, query.container, query.partition_key_json, query.id, now_micros);
    case ReadQuery::Kind::kItems: return state.list_items(query.list, now_micros);
    case ReadQuery::Kind::kContainer: return state.read_container(query.database, query.container);
    case ReadQuery::Kind::kContainers: return state.list_containers(query.database);
    case ReadQuery::Kind::kDatabases: return state.list_databases();
    case ReadQuery::Kind::kQuery: return query::execute_query(state, query.query, now_micros);
    case ReadQuery::Kind::kChangeFeed: break;
  }
  return storage::OpResult::error(StatusCode::kInvalidArgument, "unknown read");
}

namespace {

const char* operation_type(storage::ChangeOperation operation) {
  switch (operation) {
    case storage::ChangeOperation::kCreate: return "create";
    case storage::ChangeOperation::kReplace: return "replace";
    case storage::ChangeOperation::kDelete: return "delete";
  }
  return "unknown";
}

// An image as the item API shows it (system properties included); null when there is none.
Status append_image(const std::string& encoded, uint64_t crid, ttl::DefaultTtl policy, std::string& out) {
  if (encoded.empty()) {
    out += "null";
    return Status::ok();
  }
  MAYFLY_ASSIGN_OR_RETURN(storage::ItemRecord record, storage::decode_item(encoded));
  out += storage::render_item(record, crid, policy);
  return Status::ok();
}

}  // namespace

storage::OpResult execute_change_feed(const storage::ChangeFeedReader& feed, const storage::ChangeFeedRequest& request,
                                      bool* caught_up_and_empty) {
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
    body += ",\"lsn\":" + std::to_string(change.position.index);
    body += ",\"ts\":" + std::to_string(ttl::ts_seconds(change.ts_micros));
    body += ",\"tsMicros\":" + std::to_string(change.ts_micros);
    body += ",\"partitionKey\":";
    body += change.partition_key.empty() ? std::string("null") : change.partition_key;
    body += ",\"id\":";
    json::write_json_string(change.id, body);
    body += ",\"current\":";
    if (Status status = append_image(change.image, crid, change.default_ttl, body); !status.is_ok()) {
      return storage::OpResult::error(status);
    }
    body += ",\"previous\":";
    if (Status status = append_image(change.previous, crid, change.default_ttl, body); !status.is_ok()) {
      return storage::OpResult::error(status);
    }
    if (change.ttl_expired) body += ",\"timeToLiveExpired\":true";
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
