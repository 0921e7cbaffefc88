#include "client/wire.h"

#include <string>

#include "common/assert.h"

namespace mayfly::client {

namespace {

using proto::ContainerSettings;

proto::Consistency to_proto(Consistency consistency) {
  switch (consistency) {
    case Consistency::kSession:
      return proto::Consistency::SESSION;
    case Consistency::kStrong:
      return proto::Consistency::STRONG;
    case Consistency::kBounded:
      return proto::Consistency::BOUNDED;
    case Consistency::kEventual:
      return proto::Consistency::EVENTUAL;
  }
  MAYFLY_UNREACHABLE("consistency %d", static_cast<int>(consistency));
}

Consistency from_proto(proto::Consistency consistency) {
  switch (consistency) {
    case proto::Consistency::SESSION:
      return Consistency::kSession;
    case proto::Consistency::STRONG:
      return Consistency::kStrong;
    case proto::Consistency::BOUNDED:
      return Consistency::kBounded;
    case proto::Consistency::EVENTUAL:
      return Consistency::kEventual;
  }
  return Consistency::kSession;  // a newer peer's value: the schema default
}

// The explicit length keeps bytes after an embedded NUL (the server rejects such text instead of seeing it cut short).
kj::StringPtr wire_text(const std::string& value) { return kj::StringPtr(value.c_str(), value.size()); }

std::string text(capnp::Text::Reader reader) { return std::string(reader.cStr(), reader.size()); }

void encode_settings(const client::ContainerSettings& settings, ContainerSettings::Builder out) {
  out.setPartitionKeyPath(wire_text(settings.partition_key_path));
  switch (settings.default_ttl) {
    case client::ContainerSettings::DefaultTtl::kUnchanged:
      out.getDefaultTtl().setUnchanged();
      break;
    case client::ContainerSettings::DefaultTtl::kSet:
      out.getDefaultTtl().setSet(wire_text(settings.default_ttl_json));
      break;
    case client::ContainerSettings::DefaultTtl::kRemove:
      out.getDefaultTtl().setRemove();
      break;
  }
  switch (settings.indexing) {
    case client::ContainerSettings::Indexing::kUnchanged:
      out.getIndexing().setUnchanged();
      break;
    case client::ContainerSettings::Indexing::kConsistent:
      out.getIndexing().setConsistent();
      break;
    case client::ContainerSettings::Indexing::kNone:
      out.getIndexing().setNone();
      break;
  }
  switch (settings.throughput) {
    case client::ContainerSettings::Throughput::kUnchanged:
      out.getThroughput().setUnchanged();
      break;
    case client::ContainerSettings::Throughput::kProvisioned:
      out.getThroughput().setProvisioned(settings.provisioned_ru_per_second);
      break;
    case client::ContainerSettings::Throughput::kServerless:
      out.getThroughput().setServerless();
      break;
  }
  out.setDryRun(settings.dry_run);
  out.setForce(settings.force);
  switch (settings.change_feed) {
    case client::ContainerSettings::ChangeFeed::kUnchanged:
      out.getChangeFeed().setUnchanged();
      break;
    case client::ContainerSettings::ChangeFeed::kOn:
      out.getChangeFeed().setOn(settings.change_feed_retention_seconds);
      break;
    case client::ContainerSettings::ChangeFeed::kOff:
      out.getChangeFeed().setOff();
      break;
  }
}

void encode_change_feed(const ChangeFeedRead& read, proto::ReadChangeFeed::Builder out) {
  out.setMode(read.mode == ChangeFeedRead::Mode::kLatest ? proto::ReadChangeFeed::Mode::LATEST
                                                         : proto::ReadChangeFeed::Mode::ALL);
  switch (read.from) {
    case ChangeFeedRead::From::kBeginning: out.getFrom().setBeginning(); break;
    case ChangeFeedRead::From::kNow: out.getFrom().setNow(); break;
    case ChangeFeedRead::From::kTime: out.getFrom().setTime(read.time_micros); break;
    case ChangeFeedRead::From::kContinuation: out.getFrom().setContinuation(wire_text(read.continuation)); break;
  }
  out.setOnlyExpirations(read.only_expirations);
  out.setMaxItems(read.max_items);
  out.setWaitMs(read.wait_ms);
}

ChangeFeedRead decode_change_feed(proto::ReadChangeFeed::Reader in) {
  ChangeFeedRead read;
  read.mode = in.getMode() == proto::ReadChangeFeed::Mode::LATEST ? ChangeFeedRead::Mode::kLatest
                                                                  : ChangeFeedRead::Mode::kAll;
  switch (in.getFrom().which()) {
    case proto::ReadChangeFeed::From::BEGINNING: read.from = ChangeFeedRead::From::kBeginning; break;
    case proto::ReadChangeFeed::From::NOW: read.from = ChangeFeedRead::From::kNow; break;
    case proto::ReadChangeFeed::From::TIME:
      read.from = ChangeFeedRead::From::kTime;
      read.time_micros = in.getFrom().getTime();
      break;
    case proto::ReadChangeFeed::From::CONTINUATION:
      read.from = ChangeFeedRead::From::kContinuation;
      read.continuation = text(in.getFrom().getContinuation());
      break;
  }
  read.only_expirations = in.getOnlyExpirations();
  read.max_items = in.getMaxItems();
  read.wait_ms = in.getWaitMs();
  return read;
}

client::ContainerSettings decode_settings(ContainerSettings::Reader in) {
  client::ContainerSettings settings;
  settings.dry_run = in.getDryRun();
  settings.force = in.getForce();
  settings.partition_key_path = text(in.getPartitionKeyPath());
  switch (in.getDefaultTtl().which()) {
    case ContainerSettings::DefaultTtl::SET:
      settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
      settings.default_ttl_json = text(in.getDefaultTtl().getSet());
      break;
    case ContainerSettings::DefaultTtl::REMOVE:
      settings.default_ttl = client::ContainerSettings::DefaultTtl::kRemove;
      break;
    default:
      break;
  }
  switch (in.getIndexing().which()) {
    case ContainerSettings::Indexing::CONSISTENT:
      settings.indexing = client::ContainerSettings::Indexing::kConsistent;
      break;
    case ContainerSettings::Indexing::NONE:
      settings.indexing = client::ContainerSettings::Indexing::kNone;
      break;
    default:
      break;
  }
  switch (in.getThroughput().which()) {
    case ContainerSettings::Throughput::PROVISIONED:
      settings.throughput = client::ContainerSettings::Throughput::kProvisioned;
      settings.provisioned_ru_per_second = in.getThroughput().getProvisioned();
      break;
    case ContainerSettings::Throughput::SERVERLESS:
      settings.throughput = client::ContainerSettings::Throughput::kServerless;
      break;
    default:
      break;
  }
  switch (in.getChangeFeed().which()) {
    case ContainerSettings::ChangeFeed::ON:
      settings.change_feed = client::ContainerSettings::ChangeFeed::kOn;
      settings.change_feed_retention_seconds = in.getChangeFeed().getOn();
      break;
    case ContainerSettings::ChangeFeed::OFF:
      settings.change_feed = client::ContainerSettings::ChangeFeed::kOff;
      break;
    default:
      break;
  }
  return settings;
}

void encode_key(const Request& request, proto::ItemKey::Builder out) {
  out.setPartitionKey(wire_text(request.partition_key.value_or(std::string())));
  out.setId(wire_text(request.id));
}

void decode_key(proto::ItemKey::Reader in, Request& request) {
  request.partition_key = text(in.getPartitionKey());
  request.id = text(in.getId());
}

}  // namespace

void encode_request(const Request& request, Consistency consistency, const std::string& session_token,
                    proto::Request::Builder out, const WriteStamp* stamp) {
  if (stamp != nullptr) {
    auto id = out.initWriteId();
    id.setClient(stamp->client);
    id.setSequence(stamp->sequence);
    id.setFirstUnacknowledged(stamp->first_unacknowledged);
    id.setRetry(stamp->retry);
  }
  out.setDatabase(wire_text(request.database));
  out.setContainer(wire_text(request.container));
  auto options = out.initOptions();
  options.setConsistency(to_proto(consistency));
  options.setSessionToken(wire_text(session_token));
  options.setIfMatch(wire_text(request.options.if_match));
  options.setMaxItems(request.options.max_items);
  options.setContinuation(wire_text(request.options.continuation));
  switch (request.op) {
    case Op::kCreateDatabase:
      out.setCreateDatabase();
      return;
    case Op::kDeleteDatabase:
      out.setDeleteDatabase();
      return;
    case Op::kListDatabases:
      out.setListDatabases();
      return;
    case Op::kCreateContainer:
      encode_settings(request.settings, out.initCreateContainer());
      return;
    case Op::kUpdateContainer:
      encode_settings(request.settings, out.initUpdateContainer());
      return;
    case Op::kGetContainer:
      out.setGetContainer();
      return;
    case Op::kDeleteContainer:
      out.setDeleteContainer();
      return;
    case Op::kListContainers:
      out.setListContainers();
      return;
    case Op::kCreateItem:
      out.setCreateItem(wire_text(request.body));
      return;
    case Op::kUpsertItem:
      out.setUpsertItem(wire_text(request.body));
      return;
    case Op::kReplaceItem:
      out.setReplaceItem(wire_text(request.body));
      return;
    case Op::kReadItem:
      encode_key(request, out.initReadItem());
      return;
    case Op::kDeleteItem:
      encode_key(request, out.initDeleteItem());
      return;
    case Op::kPatchItem: {
      auto patch = out.initPatchItem();
      encode_key(request, patch.initKey());
      patch.setOperations(wire_text(request.body));
      return;
    }
    case Op::kListItems: {
      auto list = out.initListItems();
      if (request.partition_key.has_value()) {
        list.setPartitionKey(wire_text(*request.partition_key));
      } else {
        list.setWholeContainer();
      }
      return;
    }
    case Op::kQuery: {
      auto query = out.initQuery();
      query.setSql(wire_text(request.sql));
      query.setParameters(wire_text(request.parameters_json));
      if (request.partition_key.has_value()) {
        query.getPartitionKey().setValue(wire_text(*request.partition_key));
      } else {
        query.getPartitionKey().setCrossPartition();
      }
      query.setEnableScan(request.enable_scan);
      return;
    }
    case Op::kClusterStatus:
      out.setClusterStatus();
      return;
    case Op::kAddMember: {
      auto member = out.initAddMember();
      member.setId(request.member_id);
      member.setAddress(wire_text(request.member_address));
      return;
    }
    case Op::kRemoveMember:
      out.setRemoveMember(request.member_id);
      return;
    case Op::kTransferLeader:
      out.setTransferLeader(request.member_id);
      return;
    case Op::kAdvanceClock:
      out.setAdvanceClock(wire_text(request.duration));
      return;
    case Op::kBackupOpen:
      out.setBackupOpen();
      return;
    case Op::kBackupRead: {
      auto read = out.initBackupRead();
      read.setBackup(request.backup_id);
      read.setOffset(request.backup_offset);
      read.setMaxBytes(request.backup_max_bytes);
      return;
    }
    case Op::kContainerForecast:
      out.setContainerForecast();
      return;
    case Op::kReadChangeFeed:
      encode_change_feed(request.change_feed, out.initReadChangeFeed());
      return;
  }
  MAYFLY_UNREACHABLE("op %d", static_cast<int>(request.op));
}

Response decode_response(proto::Response::Reader in) {
  Response response;
  response.status = in.getStatus();
  response.substatus = in.getSubstatus();
  response.message = text(in.getMessage());
  response.body = text(in.getBody());
  response.etag = text(in.getEtag());
  response.ts = in.getTs();
  response.request_charge = in.getRequestCharge();
  response.session_token = text(in.getSessionToken());
  response.retry_after_ms = in.getRetryAfterMs();
  response.served_by = in.getServedBy();
  response.leader_hint = in.getLeaderHint();
  response.continuation = text(in.getContinuation());
  if (in.hasData()) {
    auto data = in.getData();
    response.data.assign(reinterpret_cast<const char*>(data.begin()), data.size());
  }
  return response;
}

Request decode_request(proto::Request::Reader in) {
  Request request;
  request.database = text(in.getDatabase());
  request.container = text(in.getContainer());
  const auto options = in.getOptions();
  request.options.consistency = from_proto(options.getConsistency());
  request.options.session_token = text(options.getSessionToken());
  request.options.if_match = text(options.getIfMatch());
  request.options.max_items = options.getMaxItems();
  request.options.continuation = text(options.getContinuation());
  switch (in.which()) {
    case proto::Request::CREATE_DATABASE:
      request.op = Op::kCreateDatabase;
      break;
    case proto::Request::DELETE_DATABASE:
      request.op = Op::kDeleteDatabase;
      break;
    case proto::Request::LIST_DATABASES:
      request.op = Op::kListDatabases;
      break;
    case proto::Request::CREATE_CONTAINER:
      request.op = Op::kCreateContainer;
      request.settings = decode_settings(in.getCreateContainer());
      break;
    case proto::Request::UPDATE_CONTAINER:
      request.op = Op::kUpdateContainer;
      request.settings = decode_settings(in.getUpdateContainer());
      break;
    case proto::Request::GET_CONTAINER:
      request.op = Op::kGetContainer;
      break;
    case proto::Request::DELETE_CONTAINER:
      request.op = Op::kDeleteContainer;
      break;
    case proto::Request::LIST_CONTAINERS:
      request.op = Op::kListContainers;
      break;
    case proto::Request::CREATE_ITEM:
      request.op = Op::kCreateItem;
      request.body = text(in.getCreateItem());
      break;
    case proto::Request::UPSERT_ITEM:
      request.op = Op::kUpsertItem;
      request.body = text(in.getUpsertItem());
      break;
    case proto::Request::REPLACE_ITEM:
      request.op = Op::kReplaceItem;
      request.body = text(in.getReplaceItem());
      break;
    case proto::Request::READ_ITEM:
      request.op = Op::kReadItem;
      decode_key(in.getReadItem(), request);
      break;
    case proto::Request::DELETE_ITEM:
      request.op = Op::kDeleteItem;
      decode_key(in.getDeleteItem(), request);
      break;
    case proto::Request::PATCH_ITEM:
      request.op = Op::kPatchItem;
      decode_key(in.getPatchItem().getKey(), request);
      request.body = text(in.getPatchItem().getOperations());
      break;
    case proto::Request::LIST_ITEMS:
      request.op = Op::kListItems;
      if (in.getListItems().isPartitionKey()) {
        request.partition_key = text(in.getListItems().getPartitionKey());
      }
      break;
    case proto::Request::QUERY: {
      request.op = Op::kQuery;
      auto query = in.getQuery();
      request.sql = text(query.getSql());
      request.parameters_json = text(query.getParameters());
      if (query.getPartitionKey().isValue()) request.partition_key = text(query.getPartitionKey().getValue());
      request.enable_scan = query.getEnableScan();
      break;
    }
    case proto::Request::CLUSTER_STATUS:
      request.op = Op::kClusterStatus;
      break;
    case proto::Request::ADD_MEMBER:
      request.op = Op::kAddMember;
      request.member_id = in.getAddMember().getId();
      request.member_address = text(in.getAddMember().getAddress());
      break;
    case proto::Request::REMOVE_MEMBER:
      request.op = Op::kRemoveMember;
      request.member_id = in.getRemoveMember();
      break;
    case proto::Request::TRANSFER_LEADER:
      request.op = Op::kTransferLeader;
      request.member_id = in.getTransferLeader();
      break;
    case proto::Request::ADVANCE_CLOCK:
      request.op = Op::kAdvanceClock;
      request.duration = text(in.getAdvanceClock());
      break;
    case proto::Request::BACKUP_OPEN:
      request.op = Op::kBackupOpen;
      break;
    case proto::Request::BACKUP_READ:
      request.op = Op::kBackupRead;
      request.backup_id = in.getBackupRead().getBackup();
      request.backup_offset = in.getBackupRead().getOffset();
      request.backup_max_bytes = in.getBackupRead().getMaxBytes();
      break;
    case proto::Request::CONTAINER_FORECAST:
      request.op = Op::kContainerForecast;
      break;
    case proto::Request::READ_CHANGE_FEED:
      request.op = Op::kReadChangeFeed;
      request.change_feed = decode_change_feed(in.getReadChangeFeed());
      break;
  }
  return request;
}

void encode_response(const Response& response, proto::Response::Builder out) {
  out.setStatus(response.status);
  out.setSubstatus(response.substatus);
  out.setMessage(wire_text(response.message));
  out.setBody(wire_text(response.body));
  out.setEtag(wire_text(response.etag));
  out.setTs(response.ts);
  out.setRequestCharge(response.request_charge);
  out.setSessionToken(wire_text(response.session_token));
  out.setRetryAfterMs(response.retry_after_ms);
  out.setServedBy(response.served_by);
  out.setLeaderHint(response.leader_hint);
  out.setContinuation(wire_text(response.continuation));
  if (!response.data.empty()) {
    out.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(response.data.data()), response.data.size()));
  }
}

}  // namespace mayfly::client
