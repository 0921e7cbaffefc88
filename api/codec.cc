#include "api/codec.h"

#include <string>
#include <type_traits>

namespace mayfly::api {
namespace {

// The explicit length keeps bytes after an embedded NUL (the node refuses such text instead of seeing it cut short).
kj::StringPtr wire_text(const std::string& value) { return kj::StringPtr(value.c_str(), value.size()); }
std::string text(capnp::Text::Reader reader) { return std::string(reader.cStr(), reader.size()); }

void encode_settings(const ContainerSettings& settings, proto::ContainerSettings::Builder out) {
  out.setPartitionKeyPath(wire_text(settings.partition_key_path));
  switch (settings.default_ttl) {
    case ContainerSettings::DefaultTtl::kUnchanged: out.getDefaultTtl().setUnchanged(); break;
    case ContainerSettings::DefaultTtl::kSet: out.getDefaultTtl().setSet(wire_text(settings.default_ttl_json)); break;
    case ContainerSettings::DefaultTtl::kRemove: out.getDefaultTtl().setRemove(); break;
  }
  switch (settings.indexing) {
    case ContainerSettings::Indexing::kUnchanged: out.getIndexing().setUnchanged(); break;
    case ContainerSettings::Indexing::kConsistent: out.getIndexing().setConsistent(); break;
    case ContainerSettings::Indexing::kNone: out.getIndexing().setNone(); break;
  }
  switch (settings.throughput) {
    case ContainerSettings::Throughput::kUnchanged: out.getThroughput().setUnchanged(); break;
    case ContainerSettings::Throughput::kProvisioned:
      out.getThroughput().setProvisioned(settings.provisioned_ru_per_second);
      break;
    case ContainerSettings::Throughput::kServerless: out.getThroughput().setServerless(); break;
  }
  out.setDryRun(settings.dry_run);
  out.setForce(settings.force);
  switch (settings.change_feed) {
    case ContainerSettings::ChangeFeed::kUnchanged: out.getChangeFeed().setUnchanged(); break;
    case ContainerSettings::ChangeFeed::kOn: out.getChangeFeed().setOn(settings.change_feed_retention_seconds); break;
    case ContainerSettings::ChangeFeed::kOff: out.getChangeFeed().setOff(); break;
  }
  if (settings.expiry_warning_seconds) {
    out.getExpiryWarning().setSet(*settings.expiry_warning_seconds);
  } else {
    out.getExpiryWarning().setUnchanged();
  }
}

ContainerSettings decode_settings(proto::ContainerSettings::Reader in) {
  using Wire = proto::ContainerSettings;
  ContainerSettings settings;
  settings.partition_key_path = text(in.getPartitionKeyPath());
  settings.dry_run = in.getDryRun();
  settings.force = in.getForce();
  switch (in.getDefaultTtl().which()) {
    case Wire::DefaultTtl::SET:
      settings.default_ttl = ContainerSettings::DefaultTtl::kSet;
      settings.default_ttl_json = text(in.getDefaultTtl().getSet());
      break;
    case Wire::DefaultTtl::REMOVE: settings.default_ttl = ContainerSettings::DefaultTtl::kRemove; break;
    default: break;
  }
  switch (in.getIndexing().which()) {
    case Wire::Indexing::CONSISTENT: settings.indexing = ContainerSettings::Indexing::kConsistent; break;
    case Wire::Indexing::NONE: settings.indexing = ContainerSettings::Indexing::kNone; break;
    default: break;
  }
  switch (in.getThroughput().which()) {
    case Wire::Throughput::PROVISIONED:
      settings.throughput = ContainerSettings::Throughput::kProvisioned;
      settings.provisioned_ru_per_second = in.getThroughput().getProvisioned();
      break;
    case Wire::Throughput::SERVERLESS: settings.throughput = ContainerSettings::Throughput::kServerless; break;
    default: break;
  }
  switch (in.getChangeFeed().which()) {
    case Wire::ChangeFeed::ON:
      settings.change_feed = ContainerSettings::ChangeFeed::kOn;
      settings.change_feed_retention_seconds = in.getChangeFeed().getOn();
      break;
    case Wire::ChangeFeed::OFF: settings.change_feed = ContainerSettings::ChangeFeed::kOff; break;
    default: break;
  }
  if (in.getExpiryWarning().isSet()) settings.expiry_warning_seconds = in.getExpiryWarning().getSet();
  return settings;
}

void encode_key(const std::string& partition_key, const std::string& id, proto::ItemKey::Builder out) {
  out.setPartitionKey(wire_text(partition_key));
  out.setId(wire_text(id));
}

void encode_change_feed(const ReadChangeFeed& read, proto::ReadChangeFeed::Builder out) {
  out.setMode(read.mode == ReadChangeFeed::Mode::kLatest ? proto::ReadChangeFeed::Mode::LATEST
                                                         : proto::ReadChangeFeed::Mode::ALL);
  switch (read.from) {
    case ReadChangeFeed::From::kBeginning: out.getFrom().setBeginning(); break;
    case ReadChangeFeed::From::kNow: out.getFrom().setNow(); break;
    case ReadChangeFeed::From::kTime: out.getFrom().setTime(read.time_micros); break;
    case ReadChangeFeed::From::kContinuation: out.getFrom().setContinuation(wire_text(read.continuation)); break;
  }
  out.setOnlyExpirations(read.only_expirations);
  out.setOnlyWarnings(read.only_warnings);
  out.setNoWarnings(read.no_warnings);
  out.setMaxItems(read.max_items);
  out.setWaitMs(read.wait_ms);
  out.setFeedRangeMin(wire_text(read.feed_range_min));
  out.setFeedRangeMax(wire_text(read.feed_range_max));
}

Result<ReadChangeFeed> decode_change_feed(proto::ReadChangeFeed::Reader in) {
  ReadChangeFeed read;
  read.mode = in.getMode() == proto::ReadChangeFeed::Mode::LATEST ? ReadChangeFeed::Mode::kLatest
                                                                  : ReadChangeFeed::Mode::kAll;
  auto from = in.getFrom();
  switch (from.which()) {
    case proto::ReadChangeFeed::From::BEGINNING: read.from = ReadChangeFeed::From::kBeginning; break;
    case proto::ReadChangeFeed::From::NOW: read.from = ReadChangeFeed::From::kNow; break;
    case proto::ReadChangeFeed::From::TIME:
      read.from = ReadChangeFeed::From::kTime;
      read.time_micros = from.getTime();
      break;
    case proto::ReadChangeFeed::From::CONTINUATION:
      read.from = ReadChangeFeed::From::kContinuation;
      read.continuation = text(from.getContinuation());
      break;
    default: return Status::invalid_argument("unknown change feed start (is the client newer than this server?)");
  }
  read.only_expirations = in.getOnlyExpirations();
  read.only_warnings = in.getOnlyWarnings();
  read.no_warnings = in.getNoWarnings();
  read.max_items = in.getMaxItems();
  read.wait_ms = in.getWaitMs();
  read.feed_range_min = text(in.getFeedRangeMin());
  read.feed_range_max = text(in.getFeedRangeMax());
  return read;
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

capnp::MessageSize size_hint(const Request& request) {
  size_t bytes = request.database.size() + request.container.size() + request.options.session_token.size() +
                 request.options.if_match.size() + request.options.continuation.size();
  bytes += std::visit(
      Overloaded{
          [](const CreateItem& op) { return op.body.size(); },
          [](const UpsertItem& op) { return op.body.size(); },
          [](const ReplaceItem& op) { return op.body.size(); },
          [](const ReadItem& op) { return op.partition_key.size() + op.id.size(); },
          [](const DeleteItem& op) { return op.partition_key.size() + op.id.size(); },
          [](const PatchItem& op) {
            return op.partition_key.size() + op.id.size() + op.operations.size() + op.condition.size();
          },
          [](const ListItems& op) { return op.partition_key ? op.partition_key->size() : size_t{0}; },
          [](const Query& op) {
            return op.sql.size() + op.parameters.size() + (op.partition_key ? op.partition_key->size() : 0);
          },
          [](const CreateContainer& op) {
            return op.settings.partition_key_path.size() + op.settings.default_ttl_json.size();
          },
          [](const UpdateContainer& op) {
            return op.settings.partition_key_path.size() + op.settings.default_ttl_json.size();
          },
          [](const AddMember& op) { return op.address.size(); },
          [](const AdvanceClock& op) { return op.duration.size(); },
          [](const ReadChangeFeed& op) { return op.continuation.size(); },
          [](const ExecuteBatch& op) { return op.partition_key.size() + op.operations.size(); },
          [](const DeletePartition& op) { return op.partition_key.size(); },
          [](const SetHold& op) {
            return op.id.size() + op.partition_key.size() + op.item_id.size() + op.reason.size() + op.actor.size();
          },
          [](const ReleaseHold& op) { return op.id.size() + op.reason.size() + op.actor.size(); },
          [](const auto&) { return size_t{0}; },
      },
      request.operation);
  // Each text rounds up to a word with its NUL; the structs and pointers fit in 64 words.
  return capnp::MessageSize{64 + bytes / 8 + 12, 0};
}

// The schema's union and Kind list the operations in the same order.
static_assert(static_cast<size_t>(proto::Request::CREATE_DATABASE) == static_cast<size_t>(Kind::kCreateDatabase));
static_assert(static_cast<size_t>(proto::Request::UPSERT_ITEM) == static_cast<size_t>(Kind::kUpsertItem));
static_assert(static_cast<size_t>(proto::Request::QUERY) == static_cast<size_t>(Kind::kQuery));
static_assert(static_cast<size_t>(proto::Request::ADVANCE_CLOCK) == static_cast<size_t>(Kind::kAdvanceClock));
static_assert(static_cast<size_t>(proto::Request::READ_CHANGE_FEED) == static_cast<size_t>(Kind::kReadChangeFeed));
static_assert(static_cast<size_t>(proto::Request::LIST_OFFERS) == static_cast<size_t>(Kind::kListOffers));
static_assert(static_cast<size_t>(proto::Request::BATCH) == static_cast<size_t>(Kind::kExecuteBatch));
static_assert(static_cast<size_t>(proto::Request::DELETE_PARTITION) == static_cast<size_t>(Kind::kDeletePartition));
static_assert(static_cast<size_t>(proto::Request::SET_HOLD) == static_cast<size_t>(Kind::kSetHold));
static_assert(static_cast<size_t>(proto::Request::RELEASE_HOLD) == static_cast<size_t>(Kind::kReleaseHold));
static_assert(static_cast<size_t>(proto::Request::LIST_HOLDS) == static_cast<size_t>(Kind::kListHolds));
static_assert(static_cast<size_t>(proto::Request::LIST_HOLD_AUDIT) == static_cast<size_t>(Kind::kListHoldAudit));

std::optional<Kind> kind_of(proto::Request::Which which) {
  if (static_cast<size_t>(which) >= kKindCount) return std::nullopt;
  return static_cast<Kind>(which);
}

proto::Consistency to_proto(Consistency consistency) {
  switch (consistency) {
    case Consistency::kStrong: return proto::Consistency::STRONG;
    case Consistency::kBounded: return proto::Consistency::BOUNDED;
    case Consistency::kEventual: return proto::Consistency::EVENTUAL;
    case Consistency::kSession: break;
  }
  return proto::Consistency::SESSION;
}

Consistency from_proto(proto::Consistency consistency) {
  switch (consistency) {
    case proto::Consistency::STRONG: return Consistency::kStrong;
    case proto::Consistency::BOUNDED: return Consistency::kBounded;
    case proto::Consistency::EVENTUAL: return Consistency::kEventual;
    case proto::Consistency::SESSION: break;
  }
  return Consistency::kSession;
}

void encode_request(const Request& request, proto::Request::Builder out) {
  if (request.write_id.has_value()) {
    const WriteId& id = *request.write_id;
    auto wire = out.initWriteId();
    wire.setClient(id.client);
    wire.setSequence(id.sequence);
    wire.setFirstUnacknowledged(id.first_unacknowledged);
    wire.setRetry(id.retry);
    wire.setOwner(id.owner);
  }
  out.setDatabase(wire_text(request.database));
  out.setContainer(wire_text(request.container));
  auto options = out.initOptions();
  options.setConsistency(to_proto(request.options.consistency.value_or(Consistency::kSession)));
  options.setSessionToken(wire_text(request.options.session_token));
  options.setIfMatch(wire_text(request.options.if_match));
  options.setMaxItems(request.options.max_items);
  options.setContinuation(wire_text(request.options.continuation));
  std::visit(Overloaded{
                 [&](const CreateDatabase& op) {
                   out.setCreateDatabase();
                   out.setSharedThroughput(op.shared_ru_per_second);
                 },
                 [&](const DeleteDatabase&) { out.setDeleteDatabase(); },
                 [&](const ListDatabases&) { out.setListDatabases(); },
                 [&](const CreateContainer& op) { encode_settings(op.settings, out.initCreateContainer()); },
                 [&](const UpdateContainer& op) { encode_settings(op.settings, out.initUpdateContainer()); },
                 [&](const GetContainer&) { out.setGetContainer(); },
                 [&](const DeleteContainer&) { out.setDeleteContainer(); },
                 [&](const ListContainers&) { out.setListContainers(); },
                 [&](const CreateItem& op) { out.setCreateItem(wire_text(op.body)); },
                 [&](const UpsertItem& op) { out.setUpsertItem(wire_text(op.body)); },
                 [&](const ReplaceItem& op) { out.setReplaceItem(wire_text(op.body)); },
                 [&](const ReadItem& op) { encode_key(op.partition_key, op.id, out.initReadItem()); },
                 [&](const DeleteItem& op) { encode_key(op.partition_key, op.id, out.initDeleteItem()); },
                 [&](const PatchItem& op) {
                   auto patch = out.initPatchItem();
                   encode_key(op.partition_key, op.id, patch.initKey());
                   patch.setOperations(wire_text(op.operations));
                   patch.setCondition(wire_text(op.condition));
                 },
                 [&](const ListItems& op) {
                   auto list = out.initListItems();
                   if (op.partition_key.has_value()) {
                     list.setPartitionKey(wire_text(*op.partition_key));
                   } else {
                     list.setWholeContainer();
                   }
                 },
                 [&](const ClusterStatus&) { out.setClusterStatus(); },
                 [&](const AddMember& op) {
                   auto member = out.initAddMember();
                   member.setId(op.id);
                   member.setAddress(wire_text(op.address));
                 },
                 [&](const RemoveMember& op) { out.setRemoveMember(op.id); },
                 [&](const TransferLeader& op) { out.setTransferLeader(op.id); },
                 [&](const Query& op) {
                   auto query = out.initQuery();
                   query.setSql(wire_text(op.sql));
                   query.setParameters(wire_text(op.parameters));
                   if (op.partition_key.has_value()) {
                     query.getPartitionKey().setValue(wire_text(*op.partition_key));
                   } else {
                     query.getPartitionKey().setCrossPartition();
                   }
                   query.setEnableScan(op.enable_scan);
                   query.setFeedRangeMin(wire_text(op.feed_range_min));
                   query.setFeedRangeMax(wire_text(op.feed_range_max));
                 },
                 [&](const AdvanceClock& op) { out.setAdvanceClock(wire_text(op.duration)); },
                 [&](const BackupOpen&) { out.setBackupOpen(); },
                 [&](const BackupRead& op) {
                   auto read = out.initBackupRead();
                   read.setBackup(op.backup);
                   read.setOffset(op.offset);
                   read.setMaxBytes(op.max_bytes);
                 },
                 [&](const ContainerForecast&) { out.setContainerForecast(); },
                 [&](const ReadChangeFeed& op) { encode_change_feed(op, out.initReadChangeFeed()); },
                 [&](const UpdateDatabase& op) {
                   out.setUpdateDatabase();
                   out.setSharedThroughput(op.shared_ru_per_second);
                 },
                 [&](const ListOffers&) { out.setListOffers(); },
                 [&](const ExecuteBatch& op) {
                   auto batch = out.initBatch();
                   batch.setPartitionKey(wire_text(op.partition_key));
                   batch.setOperations(wire_text(op.operations));
                 },
                 [&](const DeletePartition& op) { out.setDeletePartition(wire_text(op.partition_key)); },
                 [&](const SetHold& op) {
                   auto hold = out.initSetHold();
                   hold.setId(wire_text(op.id));
                   hold.setScope(op.scope == SetHold::Scope::kItem        ? proto::Hold::Scope::ITEM
                                 : op.scope == SetHold::Scope::kPartition ? proto::Hold::Scope::PARTITION
                                                                          : proto::Hold::Scope::CONTAINER);
                   hold.setPartitionKey(wire_text(op.partition_key));
                   hold.setItemId(wire_text(op.item_id));
                   hold.setReason(wire_text(op.reason));
                   hold.setActor(wire_text(op.actor));
                 },
                 [&](const ReleaseHold& op) {
                   auto release = out.initReleaseHold();
                   release.setId(wire_text(op.id));
                   release.setReason(wire_text(op.reason));
                   release.setActor(wire_text(op.actor));
                 },
                 [&](const ListHolds& op) { out.setListHolds(op.include_released); },
                 [&](const ListHoldAudit&) { out.setListHoldAudit(); },
             },
             request.operation);
}

Result<Request> decode_request(proto::Request::Reader in) {
  Request request;
  request.database = text(in.getDatabase());
  request.container = text(in.getContainer());
  const auto options = in.getOptions();
  request.options.consistency = from_proto(options.getConsistency());
  request.options.session_token = text(options.getSessionToken());
  request.options.if_match = text(options.getIfMatch());
  request.options.max_items = options.getMaxItems();
  request.options.continuation = text(options.getContinuation());
  if (in.hasWriteId()) {
    auto wire = in.getWriteId();
    request.write_id = WriteId{wire.getClient(), wire.getSequence(), wire.getFirstUnacknowledged(), wire.getRetry(),
                               wire.getOwner()};
  }
  auto key = [](proto::ItemKey::Reader wire, auto& op) {
    op.partition_key = text(wire.getPartitionKey());
    op.id = text(wire.getId());
  };
  switch (in.which()) {
    case proto::Request::CREATE_DATABASE: request.operation = CreateDatabase{in.getSharedThroughput()}; break;
    case proto::Request::UPDATE_DATABASE: request.operation = UpdateDatabase{in.getSharedThroughput()}; break;
    case proto::Request::LIST_OFFERS: request.operation = ListOffers{}; break;
    case proto::Request::BATCH:
      request.operation = ExecuteBatch{text(in.getBatch().getPartitionKey()), text(in.getBatch().getOperations())};
      break;
    case proto::Request::DELETE_PARTITION:
      request.operation = DeletePartition{text(in.getDeletePartition())};
      break;
    case proto::Request::SET_HOLD: {
      auto wire = in.getSetHold();
      SetHold hold;
      hold.id = text(wire.getId());
      switch (wire.getScope()) {
        case proto::Hold::Scope::CONTAINER: hold.scope = SetHold::Scope::kContainer; break;
        case proto::Hold::Scope::PARTITION: hold.scope = SetHold::Scope::kPartition; break;
        case proto::Hold::Scope::ITEM: hold.scope = SetHold::Scope::kItem; break;
        default: return Status::invalid_argument("unknown hold scope");
      }
      hold.partition_key = text(wire.getPartitionKey());
      hold.item_id = text(wire.getItemId());
      hold.reason = text(wire.getReason());
      hold.actor = text(wire.getActor());
      request.operation = std::move(hold);
      break;
    }
    case proto::Request::RELEASE_HOLD: {
      auto wire = in.getReleaseHold();
      request.operation = ReleaseHold{text(wire.getId()), text(wire.getReason()), text(wire.getActor())};
      break;
    }
    case proto::Request::LIST_HOLDS: request.operation = ListHolds{in.getListHolds()}; break;
    case proto::Request::LIST_HOLD_AUDIT: request.operation = ListHoldAudit{}; break;
    case proto::Request::DELETE_DATABASE: request.operation = DeleteDatabase{}; break;
    case proto::Request::LIST_DATABASES: request.operation = ListDatabases{}; break;
    case proto::Request::CREATE_CONTAINER:
      request.operation = CreateContainer{decode_settings(in.getCreateContainer())};
      break;
    case proto::Request::UPDATE_CONTAINER:
      request.operation = UpdateContainer{decode_settings(in.getUpdateContainer())};
      break;
    case proto::Request::GET_CONTAINER: request.operation = GetContainer{}; break;
    case proto::Request::DELETE_CONTAINER: request.operation = DeleteContainer{}; break;
    case proto::Request::LIST_CONTAINERS: request.operation = ListContainers{}; break;
    case proto::Request::CREATE_ITEM: request.operation = CreateItem{text(in.getCreateItem())}; break;
    case proto::Request::UPSERT_ITEM: request.operation = UpsertItem{text(in.getUpsertItem())}; break;
    case proto::Request::REPLACE_ITEM: request.operation = ReplaceItem{text(in.getReplaceItem())}; break;
    case proto::Request::READ_ITEM: {
      ReadItem op;
      key(in.getReadItem(), op);
      request.operation = std::move(op);
      break;
    }
    case proto::Request::DELETE_ITEM: {
      DeleteItem op;
      key(in.getDeleteItem(), op);
      request.operation = std::move(op);
      break;
    }
    case proto::Request::PATCH_ITEM: {
      PatchItem op;
      key(in.getPatchItem().getKey(), op);
      op.operations = text(in.getPatchItem().getOperations());
      op.condition = text(in.getPatchItem().getCondition());
      request.operation = std::move(op);
      break;
    }
    case proto::Request::LIST_ITEMS: {
      ListItems op;
      if (in.getListItems().isPartitionKey()) op.partition_key = text(in.getListItems().getPartitionKey());
      request.operation = std::move(op);
      break;
    }
    case proto::Request::CLUSTER_STATUS: request.operation = ClusterStatus{}; break;
    case proto::Request::ADD_MEMBER:
      request.operation = AddMember{in.getAddMember().getId(), text(in.getAddMember().getAddress())};
      break;
    case proto::Request::REMOVE_MEMBER: request.operation = RemoveMember{in.getRemoveMember()}; break;
    case proto::Request::TRANSFER_LEADER: request.operation = TransferLeader{in.getTransferLeader()}; break;
    case proto::Request::QUERY: {
      auto wire = in.getQuery();
      Query op;
      op.sql = text(wire.getSql());
      op.parameters = text(wire.getParameters());
      if (wire.getPartitionKey().isValue()) op.partition_key = text(wire.getPartitionKey().getValue());
      op.enable_scan = wire.getEnableScan();
      op.feed_range_min = text(wire.getFeedRangeMin());
      op.feed_range_max = text(wire.getFeedRangeMax());
      request.operation = std::move(op);
      break;
    }
    case proto::Request::ADVANCE_CLOCK: request.operation = AdvanceClock{text(in.getAdvanceClock())}; break;
    case proto::Request::BACKUP_OPEN: request.operation = BackupOpen{}; break;
    case proto::Request::BACKUP_READ:
      request.operation =
          BackupRead{in.getBackupRead().getBackup(), in.getBackupRead().getOffset(), in.getBackupRead().getMaxBytes()};
      break;
    case proto::Request::CONTAINER_FORECAST: request.operation = ContainerForecast{}; break;
    case proto::Request::READ_CHANGE_FEED: {
      Result<ReadChangeFeed> feed = decode_change_feed(in.getReadChangeFeed());
      if (!feed.is_ok()) return feed.status();
      request.operation = std::move(feed.value());
      break;
    }
    default: return Status::invalid_argument("unknown request type (is the client newer than this server?)");
  }
  return request;
}

}  // namespace mayfly::api
