#include "api/operation.h"

#include <array>

namespace mayfly::api {
namespace {

struct KindInfo {
  std::string_view name;
  bool write;
  bool read;
  bool node_local;
};

// Indexed by Kind; the names are the schema's.
constexpr std::array<KindInfo, kKindCount> kKinds = {{
    {"createDatabase", true, false, false},
    {"deleteDatabase", true, false, false},
    {"listDatabases", false, true, false},
    {"createContainer", true, false, false},
    {"updateContainer", true, false, false},
    {"getContainer", false, true, false},
    {"deleteContainer", true, false, false},
    {"listContainers", false, true, false},
    {"createItem", true, false, false},
    {"upsertItem", true, false, false},
    {"replaceItem", true, false, false},
    {"readItem", false, true, false},
    {"deleteItem", true, false, false},
    {"patchItem", true, false, false},
    {"listItems", false, true, false},
    {"clusterStatus", false, false, true},
    {"addMember", false, false, false},
    {"removeMember", false, false, false},
    {"transferLeader", false, false, false},
    {"query", false, true, false},
    {"advanceClock", false, false, false},
    {"backupOpen", false, false, true},
    {"backupRead", false, false, true},
    {"containerForecast", false, false, true},
    {"readChangeFeed", false, true, false},
    {"updateDatabase", true, false, false},
    {"listOffers", false, true, false},
    {"batch", true, false, false},
    {"deletePartition", true, false, false},
    {"setHold", true, false, false},
    {"releaseHold", true, false, false},
    {"listHolds", false, true, false},
    {"listHoldAudit", false, true, false},
}};

template <size_t... I>
Operation make_at(size_t index, std::index_sequence<I...>) {
  Operation operation;
  ((index == I ? (operation.template emplace<I>(), 0) : 0), ...);
  return operation;
}

}  // namespace

Operation make_operation(Kind kind) {
  return make_at(static_cast<size_t>(kind), std::make_index_sequence<kKindCount>{});
}

std::string_view kind_name(Kind kind) { return kKinds[static_cast<size_t>(kind)].name; }
bool is_write(Kind kind) { return kKinds[static_cast<size_t>(kind)].write; }
bool changes_state(Kind kind) { return !is_read(kind) && !is_node_local(kind); }
bool is_read(Kind kind) { return kKinds[static_cast<size_t>(kind)].read; }
bool is_node_local(Kind kind) { return kKinds[static_cast<size_t>(kind)].node_local; }

std::string_view consistency_name(Consistency consistency) {
  switch (consistency) {
    case Consistency::kSession: return "session";
    case Consistency::kStrong: return "strong";
    case Consistency::kBounded: return "bounded";
    case Consistency::kEventual: return "eventual";
  }
  return "unknown";
}

}  // namespace mayfly::api
