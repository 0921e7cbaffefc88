#include "storage/patch.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "storage/json.h"

namespace mayfly::json {
namespace {

__extension__ typedef __int128 Int128;  // exact sums of two int64/uint64 values

enum class OpKind { kAdd, kSet, kReplace, kRemove, kIncr, kMove };

// One parsed operation. `segments` are the path's reference tokens, unescaped.
struct PatchOp {
  size_t number = 0;  // 1-based position in the patch
  OpKind kind = OpKind::kAdd;
  std::string name;  // "add", "set", ...
  std::string path;  // as written
  std::vector<std::string> segments;
  boost::json::value value;
  std::string from;  // move: the source path as written, and its segments
  std::vector<std::string> from_segments;
};

// An array segment: a position, or "-" (one past the end).
struct ArrayIndex {
  bool append = false;
  size_t index = 0;
};

constexpr std::array<std::string_view, 5> kSystemProperties = {"_ts", "_etag", "_rid", "_self", "_attachments"};

Status error(size_t number, std::string_view reason) {
  return Status::invalid_argument("patch operation " + std::to_string(number) + ": " + std::string(reason));
}

Status op_error(const PatchOp& op, std::string_view reason) {
  return Status::invalid_argument("patch operation " + std::to_string(op.number) + " (" + op.name + " " + op.path +
                                  "): " + std::string(reason));
}

std::string kind_name(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null: return "null";
    case boost::json::kind::bool_: return "a boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_: return "a number";
    case boost::json::kind::string: return "a string";
    case boost::json::kind::array: return "an array";
    case boost::json::kind::object: return "an object";
  }
  return "unknown";
}

std::optional<OpKind> parse_kind(std::string_view name) {
  if (name == "add") return OpKind::kAdd;
  if (name == "set") return OpKind::kSet;
  if (name == "replace") return OpKind::kReplace;
  if (name == "remove") return OpKind::kRemove;
  if (name == "incr") return OpKind::kIncr;
  if (name == "move") return OpKind::kMove;
  return std::nullopt;
}

// RFC 6901 unescaping of one reference token: "~0" is '~', "~1" is '/'; any other '~' is an error.
Result<std::string> unescape_segment(std::string_view raw) {
  std::string segment;
  segment.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '~') {
      segment.push_back(raw[i]);
    } else if (i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
      segment.push_back(raw[++i] == '0' ? '~' : '/');
    } else {
      return Status::invalid_argument("'~' must be followed by 0 or 1 (write ~0 for '~' and ~1 for '/')");
    }
  }
  return segment;
}

// Splits a JSON Pointer into unescaped segments. The reason (without operation context) on failure.
Result<std::vector<std::string>> split_path(std::string_view path) {
  if (path.empty() || path == "/") {
    return Status::invalid_argument("the document root cannot be patched; name a property, e.g. /status");
  }
  if (path[0] != '/') {
    return Status::invalid_argument("a path must start with '/', e.g. /" + std::string(path));
  }
  std::vector<std::string> segments;
  std::string_view rest = path.substr(1);
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view raw = rest.substr(0, slash);
    if (raw.empty()) return Status::invalid_argument("the path has an empty segment");
    MAYFLY_ASSIGN_OR_RETURN(std::string segment, unescape_segment(raw));
    segments.push_back(std::move(segment));
    if (slash == std::string_view::npos) return segments;
    rest = rest.substr(slash + 1);
  }
}

// The path as written, cut after its first `count` segments ("/a/b/c", 2 → "/a/b").
std::string path_prefix(std::string_view path, size_t count) {
  size_t end = 0;
  for (size_t i = 0; i < count; ++i) {
    end = path.find('/', end + 1);
    if (end == std::string_view::npos) return std::string(path);
  }
  return std::string(path.substr(0, end));
}

// Rejects paths into system properties, and paths equal to, above or below an immutable path.
Status check_patchable(const PatchOp& op, const std::vector<std::string>& immutable_paths) {
  for (std::string_view system : kSystemProperties) {
    if (op.segments[0] == system) {
      return op_error(op, "/" + std::string(system) + " is a system property and cannot be patched");
    }
  }
  for (const std::string& immutable : immutable_paths) {
    const std::vector<std::string> protected_segments = partition_key_path_segments(immutable);
    if (protected_segments.empty()) continue;  // never: immutable paths are validated when their container is made
    const size_t common = std::min(protected_segments.size(), op.segments.size());
    bool overlaps = true;
    for (size_t i = 0; i < common && overlaps; ++i) overlaps = op.segments[i] == protected_segments[i];
    if (!overlaps) continue;
    const std::string what = immutable == "/id" ? "the id" : "the partition key " + immutable;
    if (op.segments.size() == protected_segments.size()) return op_error(op, what + " cannot be changed by patch");
    return op_error(op, "this would change " + what + ", which cannot be changed by patch");
  }
  return Status::ok();
}

// Checks "value" against the operation: required (a number for incr), or absent for remove.
Status check_value(const PatchOp& op, const boost::json::object& entry) {
  const bool has_value = entry.contains("value");
  if (op.kind == OpKind::kRemove || op.kind == OpKind::kMove) {
    return has_value ? op_error(op, op.name + " takes no \"value\"; leave it out") : Status::ok();
  }
  if (!has_value) return op_error(op, "a \"value\" is required");
  if (op.kind == OpKind::kIncr && !entry.at("value").is_number()) {
    return op_error(op, "incr needs a numeric \"value\", not " + kind_name(entry.at("value")));
  }
  return Status::ok();
}

// Reads one {"op", "path", "value"} entry, checks its shape, its path and that the path may be patched.
Result<PatchOp> parse_operation(const boost::json::value& entry, size_t number,
                                const std::vector<std::string>& immutable_paths) {
  if (!entry.is_object()) {
    return error(number, "must be an object like {\"op\": \"set\", \"path\": \"/a\", \"value\": 1}, not " +
                             kind_name(entry));
  }
  const boost::json::object& object = entry.get_object();
  for (const auto& member : object) {
    if (member.key() != "op" && member.key() != "path" && member.key() != "value" && member.key() != "from") {
      return error(number, "unknown member \"" + std::string(member.key()) + "\" (expected op, path and value, "
                                                                             "and from for move)");
    }
  }
  const boost::json::value* op_name = object.if_contains("op");
  const boost::json::value* path = object.if_contains("path");
  if (op_name == nullptr || !op_name->is_string()) {
    return error(number, "needs a string \"op\": add, set, replace, remove, incr or move");
  }
  if (path == nullptr || !path->is_string()) return error(number, "needs a string \"path\", e.g. \"/a/b\"");
  PatchOp op;
  op.number = number;
  op.name = op_name->get_string();
  op.path = path->get_string();
  const std::optional<OpKind> kind = parse_kind(op.name);
  if (!kind) return op_error(op, "unknown op; expected add, set, replace, remove, incr or move");
  op.kind = *kind;
  Result<std::vector<std::string>> segments = split_path(op.path);
  if (!segments.is_ok()) return op_error(op, segments.status().message());
  op.segments = std::move(segments).value();
  MAYFLY_RETURN_IF_ERROR(check_value(op, object));
  MAYFLY_RETURN_IF_ERROR(check_patchable(op, immutable_paths));
  const boost::json::value* from = object.if_contains("from");
  if (op.kind != OpKind::kMove && from != nullptr) return op_error(op, "only move takes a \"from\"");
  if (op.kind == OpKind::kMove) {
    if (from == nullptr || !from->is_string()) return op_error(op, "move needs a string \"from\", e.g. \"/a\"");
    op.from = from->get_string();
    Result<std::vector<std::string>> source = split_path(op.from);
    if (!source.is_ok()) return op_error(op, "from: " + source.status().message());
    // The source is removed: it may not be (or hold) the id, the partition key or a system property either.
    PatchOp source_op = op;
    source_op.segments = source.value();
    MAYFLY_RETURN_IF_ERROR(check_patchable(source_op, immutable_paths));
    op.from_segments = std::move(source).value();
    if (op.from_segments.size() < op.segments.size() &&
        std::equal(op.from_segments.begin(), op.from_segments.end(), op.segments.begin())) {
      return op_error(op, "cannot move " + op.from + " into itself");
    }
  }
  if (const boost::json::value* value = object.if_contains("value")) op.value = *value;
  return op;
}

// Parses and validates the whole patch body before anything is applied.
Result<std::vector<PatchOp>> parse_operations(std::string_view operations_json,
                                              const std::vector<std::string>& immutable_paths) {
  if (operations_json.size() > kMaxPatchBytes) {
    return Status::invalid_argument("the patch operations are " + std::to_string(operations_json.size()) +
                                    " bytes; the limit is " + std::to_string(kMaxPatchBytes) + " (1 MB)");
  }
  Result<boost::json::value> body = parse(operations_json);
  if (!body.is_ok()) return body.status().with_context("patch operations");
  if (!body->is_array()) {
    return Status::invalid_argument("patch operations must be a JSON array such as [{\"op\": \"set\", \"path\": "
                                    "\"/a\", \"value\": 1}], not " + kind_name(*body));
  }
  const boost::json::array& entries = body->get_array();
  if (entries.empty()) return Status::invalid_argument("a patch needs at least one operation");
  if (entries.size() > kMaxPatchOperations) {
    return Status::invalid_argument("a patch can hold at most " + std::to_string(kMaxPatchOperations) +
                                    " operations; this one has " + std::to_string(entries.size()));
  }
  std::vector<PatchOp> ops;
  for (size_t i = 0; i < entries.size(); ++i) {
    MAYFLY_ASSIGN_OR_RETURN(PatchOp op, parse_operation(entries[i], i + 1, immutable_paths));
    ops.push_back(std::move(op));
  }
  return ops;
}

// An array reference token: "-", or decimal digits without leading zeros (huge values become SIZE_MAX).
Result<ArrayIndex> parse_index(std::string_view segment) {
  if (segment == "-") return ArrayIndex{true, 0};
  const bool digits = std::all_of(segment.begin(), segment.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || (segment.size() > 1 && segment[0] == '0')) {
    return Status::invalid_argument("'" + std::string(segment) +
                                    "' is not an array index (decimal digits without leading zeros, or '-')");
  }
  ArrayIndex index;
  const auto [end, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), index.index);
  if (ec == std::errc::result_out_of_range) index.index = std::numeric_limits<size_t>::max();
  return index;
}

// The value holding the operation's target (all segments but the last); it must exist and be an object or array.
Result<boost::json::value*> resolve_parent(boost::json::value& root, const PatchOp& op) {
  boost::json::value* current = &root;
  for (size_t depth = 0; depth + 1 < op.segments.size(); ++depth) {
    const std::string& segment = op.segments[depth];
    boost::json::value* next = nullptr;
    if (current->is_object()) {
      next = current->get_object().if_contains(segment);
    } else {
      Result<ArrayIndex> index = parse_index(segment);
      if (!index.is_ok()) return op_error(op, index.status().message());
      boost::json::array& array = current->get_array();
      if (!index->append && index->index < array.size()) next = &array[index->index];
    }
    if (next == nullptr) return op_error(op, "the parent " + path_prefix(op.path, depth + 1) + " does not exist");
    if (!next->is_object() && !next->is_array()) {
      return op_error(op, "the parent " + path_prefix(op.path, depth + 1) + " is " + kind_name(*next) +
                              ", not an object or array");
    }
    current = next;
  }
  return current;
}

// current + delta. Integers are exact: int64 when the sum fits; uint64 only when an operand is uint64 (values above
// INT64_MAX); otherwise an error. If either is a double, the sum is a double and must be finite.
Result<boost::json::value> add_numbers(const boost::json::value& current, const boost::json::value& delta) {
  if (current.is_double() || delta.is_double()) {
    const double sum = current.to_number<double>() + delta.to_number<double>();
    if (!std::isfinite(sum)) return Status::invalid_argument("the result of incr is out of the range of a double");
    return boost::json::value(sum);
  }
  const auto widen = [](const boost::json::value& v) -> Int128 {
    return v.is_int64() ? Int128{v.get_int64()} : Int128{v.get_uint64()};
  };
  const Int128 sum = widen(current) + widen(delta);
  if (sum >= std::numeric_limits<int64_t>::min() && sum <= std::numeric_limits<int64_t>::max()) {
    return boost::json::value(static_cast<int64_t>(sum));
  }
  const bool unsigned_involved = current.is_uint64() || delta.is_uint64();  // int64 + int64 stays int64
  if (unsigned_involved && sum >= 0 && sum <= std::numeric_limits<uint64_t>::max()) {
    return boost::json::value(static_cast<uint64_t>(sum));
  }
  return Status::invalid_argument("incr overflows: " + to_json(current) + " + " + to_json(delta) +
                                  " does not fit in a 64-bit integer");
}

// incr on an existing value: it must be a number; it is replaced by the sum.
Status increment(boost::json::value& target, const PatchOp& op) {
  if (!target.is_number()) return op_error(op, "incr needs the target to be a number, but it is " + kind_name(target));
  Result<boost::json::value> sum = add_numbers(target, op.value);
  if (!sum.is_ok()) return op_error(op, sum.status().message());
  target = std::move(sum).value();
  return Status::ok();
}

Status apply_to_object(boost::json::object& parent, PatchOp& op) {
  const std::string& key = op.segments.back();
  boost::json::value* target = parent.if_contains(key);
  switch (op.kind) {
    case OpKind::kAdd:
    case OpKind::kSet:
      parent.insert_or_assign(key, std::move(op.value));  // an existing member keeps its position
      return Status::ok();
    case OpKind::kReplace:
      if (target == nullptr) return op_error(op, "the path does not exist");
      *target = std::move(op.value);
      return Status::ok();
    case OpKind::kRemove:
      if (parent.stable_erase(key) == 0) return op_error(op, "the path does not exist");
      return Status::ok();
    case OpKind::kIncr:
      if (target == nullptr) {
        parent.emplace(key, std::move(op.value));
        return Status::ok();
      }
      return increment(*target, op);
    case OpKind::kMove: break;  // apply_operation: a remove, then a set
  }
  return Status::internal("unhandled patch op");
}

Status apply_to_array(boost::json::array& parent, PatchOp& op) {
  Result<ArrayIndex> parsed = parse_index(op.segments.back());
  if (!parsed.is_ok()) return op_error(op, parsed.status().message());
  const ArrayIndex index = parsed.value();
  const size_t size = parent.size();
  const bool appends = op.kind == OpKind::kAdd || op.kind == OpKind::kSet;
  if (index.append && !appends) return op_error(op, "'-' (append) can only be used with add and set");
  const std::string elements = " (the array has " + std::to_string(size) + " elements)";
  if (index.append || (appends && index.index == size)) {
    parent.push_back(std::move(op.value));
    return Status::ok();
  }
  if (index.index >= size) {
    if (!appends) return op_error(op, "the path does not exist" + elements);
    return op_error(op, "index " + op.segments.back() + " is out of range" + elements + "; use 0.." +
                            std::to_string(size) + " or '-'");
  }
  const auto position = parent.begin() + static_cast<std::ptrdiff_t>(index.index);
  switch (op.kind) {
    case OpKind::kAdd: parent.insert(position, std::move(op.value)); break;
    case OpKind::kSet:
    case OpKind::kReplace: parent[index.index] = std::move(op.value); break;
    case OpKind::kRemove: parent.erase(position); break;
    case OpKind::kIncr: return increment(parent[index.index], op);
    case OpKind::kMove: return Status::internal("unhandled patch op");
  }
  return Status::ok();
}

Status apply_operation(boost::json::value& root, PatchOp& op) {
  if (op.kind == OpKind::kMove) {
    // The value at `from` is removed and set at `path` (replacing what is there), as Cosmos DB's move.
    PatchOp source = op;
    source.kind = OpKind::kRemove;
    source.segments = op.from_segments;
    MAYFLY_ASSIGN_OR_RETURN(boost::json::value * from_parent, resolve_parent(root, source));
    boost::json::value moved;
    if (from_parent->is_object()) {
      boost::json::value* found = from_parent->get_object().if_contains(source.segments.back());
      if (found == nullptr) return op_error(op, "the source " + op.from + " does not exist");
      moved = std::move(*found);
    } else {
      Result<ArrayIndex> index = parse_index(source.segments.back());
      boost::json::array& array = from_parent->get_array();
      if (!index.is_ok() || index->append || index->index >= array.size()) {
        return op_error(op, "the source " + op.from + " does not exist");
      }
      moved = array[index->index];
    }
    MAYFLY_RETURN_IF_ERROR(from_parent->is_object() ? apply_to_object(from_parent->get_object(), source)
                                                    : apply_to_array(from_parent->get_array(), source));
    PatchOp target = op;
    target.kind = OpKind::kSet;
    target.value = std::move(moved);
    return apply_operation(root, target);
  }
  MAYFLY_ASSIGN_OR_RETURN(boost::json::value * parent, resolve_parent(root, op));
  if (parent->is_object()) return apply_to_object(parent->get_object(), op);
  return apply_to_array(parent->get_array(), op);
}

}  // namespace

Result<boost::json::object> apply_patch(const boost::json::object& document, std::string_view operations_json,
                                        const std::vector<std::string>& immutable_paths) {
  MAYFLY_ASSIGN_OR_RETURN(std::vector<PatchOp> ops, parse_operations(operations_json, immutable_paths));
  boost::json::value patched(document);  // all operations work on this copy: an error leaves nothing behind
  for (PatchOp& op : ops) MAYFLY_RETURN_IF_ERROR(apply_operation(patched, op));
  return std::move(patched.get_object());
}

}  // namespace mayfly::json
