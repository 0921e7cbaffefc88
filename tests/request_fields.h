// Tests' typed access to the fields several operations of an api::Request share (api/operation.h): the item JSON of
// a create/upsert/replace (a patch's operations), the key of a read/delete/patch, the settings of a container create
// or update. A test that builds a request with a kind it picks at run time (cluster_harness.h's item_write, item_key,
// ...) fills or checks those fields through these instead of switching on the kind itself. Asking a request for a
// field its operation does not have throws std::logic_error (a test failure, not a crash).
// Thread-safety: pure functions over the caller's request.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "api/operation.h"

namespace mayfly::test {

namespace detail {
[[noreturn]] inline void no_field(const api::Request& request, const char* field) {
  throw std::logic_error(std::string("a ") + std::string(api::kind_name(request.kind())) + " request has no " + field);
}
}  // namespace detail

// The request's operation as a T (api::AddMember, api::Query, ...); throws when it is another one.
template <typename T>
T& operation_of(api::Request& request) {
  if (T* op = request.as<T>()) return *op;
  detail::no_field(request, "operation of the kind asked for");
}
template <typename T>
const T& operation_of(const api::Request& request) {
  return operation_of<T>(const_cast<api::Request&>(request));
}

// createItem / upsertItem / replaceItem: the item JSON; patchItem: the JSON array of patch operations.
inline std::string& body_of(api::Request& request) {
  if (auto* op = request.as<api::CreateItem>()) return op->body;
  if (auto* op = request.as<api::UpsertItem>()) return op->body;
  if (auto* op = request.as<api::ReplaceItem>()) return op->body;
  if (auto* op = request.as<api::PatchItem>()) return op->operations;
  detail::no_field(request, "body");
}
inline const std::string& body_of(const api::Request& request) { return body_of(const_cast<api::Request&>(request)); }

// readItem / deleteItem / patchItem: the item id.
inline std::string& id_of(api::Request& request) {
  if (auto* op = request.as<api::ReadItem>()) return op->id;
  if (auto* op = request.as<api::DeleteItem>()) return op->id;
  if (auto* op = request.as<api::PatchItem>()) return op->id;
  detail::no_field(request, "item id");
}
inline const std::string& id_of(const api::Request& request) { return id_of(const_cast<api::Request&>(request)); }

// The partition key value (JSON text) of readItem / deleteItem / patchItem (always set), listItems and query (unset:
// the whole container).
inline std::optional<std::string> partition_key_of(const api::Request& request) {
  if (const auto* op = request.as<api::ReadItem>()) return op->partition_key;
  if (const auto* op = request.as<api::DeleteItem>()) return op->partition_key;
  if (const auto* op = request.as<api::PatchItem>()) return op->partition_key;
  if (const auto* op = request.as<api::ListItems>()) return op->partition_key;
  if (const auto* op = request.as<api::Query>()) return op->partition_key;
  detail::no_field(request, "partition key");
}
// Sets it; for the item operations an unset value is the empty text (as it goes on the wire).
inline void set_partition_key(api::Request& request, std::optional<std::string> value) {
  if (auto* read = request.as<api::ReadItem>()) {
    read->partition_key = value.value_or("");
  } else if (auto* remove = request.as<api::DeleteItem>()) {
    remove->partition_key = value.value_or("");
  } else if (auto* patch = request.as<api::PatchItem>()) {
    patch->partition_key = value.value_or("");
  } else if (auto* list = request.as<api::ListItems>()) {
    list->partition_key = std::move(value);
  } else if (auto* query = request.as<api::Query>()) {
    query->partition_key = std::move(value);
  } else {
    detail::no_field(request, "partition key");
  }
}

// createContainer / updateContainer: the container settings.
inline api::ContainerSettings& settings_of(api::Request& request) {
  if (auto* op = request.as<api::CreateContainer>()) return op->settings;
  if (auto* op = request.as<api::UpdateContainer>()) return op->settings;
  detail::no_field(request, "container settings");
}
inline const api::ContainerSettings& settings_of(const api::Request& request) {
  return settings_of(const_cast<api::Request&>(request));
}

}  // namespace mayfly::test
