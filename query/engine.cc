#include "query/engine.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>
#include <vector>

#include "common/codec.h"
#include "common/work_budget.h"
#include "storage/json.h"

namespace mayfly::query {
namespace {

namespace bj = boost::json;

constexpr int64_t kTokenVersion = 1;

// ---- paths and plans ---------------------------------------------------------------------------------------

// The property names of a path rooted at the FROM alias (c.a["b"] -> {a, b}); nullopt for anything else.
std::optional<std::vector<std::string>> path_of(const Expr& expr) {
  if (expr.kind == ExprKind::kRoot) return std::vector<std::string>{};
  if (expr.kind == ExprKind::kProperty) {
    std::optional<std::vector<std::string>> base = path_of(*expr.args[0]);
    if (!base) return std::nullopt;
    base->push_back(expr.name);
    return base;
  }
  return std::nullopt;
}

void conjuncts(const Expr& expr, std::vector<const Expr*>& out) {
  if (expr.kind == ExprKind::kBinary && expr.op == Op::kAnd) {
    conjuncts(*expr.args[0], out);
    conjuncts(*expr.args[1], out);
    return;
  }
  out.push_back(&expr);
}

// The constant an equality compares a path with: a literal or a parameter.
const bj::value* constant_of(const Expr& expr, const Evaluator& evaluator) {
  if (expr.kind == ExprKind::kLiteral && !expr.undefined_literal) return &expr.literal;
  if (expr.kind == ExprKind::kParameter) {
    auto it = evaluator.parameters().find(expr.name);
    if (it != evaluator.parameters().end()) return &it->second;
  }
  return nullptr;
}

bool is_ts_path(const Expr& expr) {
  std::optional<std::vector<std::string>> path = path_of(expr);
  return path && path->size() == 1 && (*path)[0] == "_ts";
}

// ---- continuation tokens -----------------------------------------------------------------------------------


using SortKeys = std::vector<std::optional<bj::value>>;

struct Token {
  char mode = 'k';            // k: key order, t: _ts index, s: scan + sort
  std::string position;       // raw position bytes
  SortKeys keys;              // mode s: the last row's sort values
  int64_t offset_left = 0;
  int64_t limit_left = -1;    // -1: no TOP/LIMIT
};

std::string encode_token(const Token& token, std::string_view fingerprint) {
  bj::object object;
  object["v"] = kTokenVersion;
  object["f"] = bj::string(fingerprint);
  object["m"] = bj::string(std::string(1, token.mode));
  object["p"] = bj::string(codec::hex_encode(token.position));
  if (token.mode == 's') {
    bj::array keys;
    for (const std::optional<bj::value>& key : token.keys) {
      bj::array wrapped;
      if (key) wrapped.push_back(*key);
      keys.push_back(std::move(wrapped));
    }
    object["k"] = std::move(keys);
  }
  object["o"] = token.offset_left;
  object["l"] = token.limit_left;
  // Hex of compact JSON: opaque to users, readable when debugging, safe in any shell or URL.
  return codec::hex_encode(json::to_json(bj::value(std::move(object))));
}

Result<Token> decode_token(std::string_view text, std::string_view fingerprint, size_t order_keys) {
  const Status malformed = Status::invalid_argument("continuation token is malformed");
  std::optional<std::string> raw = codec::hex_decode(text);
  if (!raw) return malformed;
  Result<bj::value> parsed = json::parse(*raw);
  if (!parsed.is_ok() || !parsed->is_object()) return malformed;
  const bj::object& object = parsed->get_object();
  const bj::value* version = object.if_contains("v");
  const bj::value* owner = object.if_contains("f");
  const bj::value* mode = object.if_contains("m");
  const bj::value* position = object.if_contains("p");
  const bj::value* offset = object.if_contains("o");
  const bj::value* limit = object.if_contains("l");
  if (version == nullptr || !version->is_int64() || version->get_int64() != kTokenVersion || owner == nullptr ||
      !owner->is_string() || mode == nullptr || !mode->is_string() || mode->get_string().size() != 1 ||
      position == nullptr || !position->is_string() || offset == nullptr || !offset->is_int64() ||
      limit == nullptr || !limit->is_int64()) {
    return malformed;
  }
  if (owner->get_string() != fingerprint) {
    return Status::invalid_argument(
        "continuation token belongs to a different query (text, parameters, container and partition key must be "
        "the same as for the first page)");
  }
  Token token;
  token.mode = mode->get_string()[0];
  std::optional<std::string> bytes = codec::hex_decode(position->get_string());
  if (!bytes) return malformed;
  token.position = std::move(*bytes);
  token.offset_left = offset->get_int64();
  token.limit_left = limit->get_int64();
  if (token.offset_left < 0 || token.limit_left < -1) return malformed;
  if (token.mode == 's') {
    const bj::value* keys = object.if_contains("k");
    if (keys == nullptr || !keys->is_array() || keys->get_array().size() != order_keys) return malformed;
    for (const bj::value& key : keys->get_array()) {
      if (!key.is_array() || key.get_array().size() > 1) return malformed;
      token.keys.push_back(key.get_array().empty() ? std::nullopt : std::optional<bj::value>(key.get_array()[0]));
    }
  } else if (token.mode != 'k' && token.mode != 't') {
    return malformed;
  }
  return token;
}

// ---- rows --------------------------------------------------------------------------------------------------

// Appends one result to the page body.
void append_row(const bj::value& row, std::string& body, int64_t& rows) {
  if (rows > 0) body.push_back(',');
  json::write_json(row, body);
  ++rows;
}

struct SortedRow {
  SortKeys keys;
  std::string position;
  bj::value document;
  size_t bytes = 0;  // json_memory_bytes(document)
};

int compare_sorted(const SortKeys& a_keys, std::string_view a_position, const SortKeys& b_keys,
                   std::string_view b_position, const std::vector<OrderKey>& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    const bj::value* a = a_keys[i] ? &*a_keys[i] : nullptr;
    const bj::value* b = b_keys[i] ? &*b_keys[i] : nullptr;
    int c = order_compare(a, b);
    if (order[i].descending) c = -c;
    if (c != 0) return c;
  }
  const int c = a_position.compare(b_position);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

SortKeys sort_keys_of(const Evaluator& evaluator, const SourceItem& item) {
  SortKeys keys;
  for (const OrderKey& key : evaluator.query().order_by) {
    if (is_ts_path(*key.expr)) {
      // ORDER BY c._ts orders by the exact last-modified time (µs): items written in the same second come out in
      // write order, exactly as the `_ts` index walks them.
      keys.emplace_back(bj::value(item.write_ts_micros));
      continue;
    }
    Val value = evaluator.eval(*key.expr, item.document);
    keys.push_back(value.defined() ? std::optional<bj::value>(std::move(value).take()) : std::nullopt);
  }
  return keys;
}

bool refers_to_item(const Expr& expr) {
  if (expr.kind == ExprKind::kRoot) return true;
  return std::any_of(expr.args.begin(), expr.args.end(), [](const ExprPtr& arg) { return refers_to_item(*arg); });
}

Status too_much_work(size_t limit) {
  return Status::invalid_argument(
      "the query needs to examine more than " + std::to_string(limit) +
      " items in one request (aggregates, GROUP BY and ORDER BY on a property other than _ts read the whole "
      "partition or container); filter on the partition key, or ORDER BY c._ts");
}

// ---- the access paths --------------------------------------------------------------------------------------

struct PageState {
  int64_t offset_left = 0;
  int64_t limit_left = -1;
};

Result<Page> run_aggregate(const Evaluator& evaluator, ItemSource& source, const EngineLimits& limits) {
  const Query& query = evaluator.query();
  struct Group {
    std::vector<std::optional<bj::value>> key;
    bj::value first;
    std::vector<Accumulator> accumulators;
  };
  std::map<std::string, Group> groups;
  Page page;
  page.stats.full_scan = true;
  bool over_limit = false;
  bool too_many_groups = false;
  // Without WHERE, GROUP BY or a reference to the item in any aggregate (COUNT(1)), the documents are not needed.
  bool with_documents = query.where != nullptr || !query.group_by.empty();
  for (const Expr* aggregate : evaluator.aggregates()) with_documents = with_documents || refers_to_item(*aggregate);
  size_t group_bytes = 0;  // the groups' keys and first documents in memory
  bool too_many_bytes = false;
  Status status = source.scan(ScanOrder::kKey, "", with_documents, [&](SourceItem& item) {
    if (static_cast<size_t>(page.stats.items_examined) >= limits.max_items_examined_per_request) {
      over_limit = true;
      return false;
    }
    if (!charge_work(kStepsPerItem)) return false;
    ++page.stats.items_examined;
    if (!evaluator.matches(item.document)) return true;
    std::string key_text;
    std::vector<std::optional<bj::value>> key;
    for (const ExprPtr& group_expr : query.group_by) {
      Val value = evaluator.eval(*group_expr, item.document);
      key_text += group_key_text(value.ptr());
      key_text.push_back('\x1f');
      key.push_back(value.defined() ? std::optional<bj::value>(std::move(value).take()) : std::nullopt);
    }
    auto it = groups.find(key_text);
    if (it == groups.end()) {
      if (groups.size() >= limits.max_groups) {
        too_many_groups = true;
        return false;
      }
      group_bytes += key_text.size() + json_memory_bytes(item.document);
      if (group_bytes > limits.max_group_bytes) {
        too_many_bytes = true;
        return false;
      }
      Group group;
      group.key = std::move(key);
      group.first = item.document;
      for (const Expr* aggregate : evaluator.aggregates()) group.accumulators.emplace_back(aggregate->aggregate);
      it = groups.emplace(std::move(key_text), std::move(group)).first;
    }
    const std::vector<const Expr*>& aggregates = evaluator.aggregates();
    for (size_t i = 0; i < aggregates.size(); ++i) {
      const Expr& argument = *aggregates[i]->args[0];
      it->second.accumulators[i].add(evaluator.eval(argument, item.document));
    }
    return true;
  });
  MAYFLY_RETURN_IF_ERROR(status);
  MAYFLY_RETURN_IF_ERROR(work_status());
  if (over_limit) return too_much_work(limits.max_items_examined_per_request);
  if (too_many_groups) {
    return Status::invalid_argument("GROUP BY makes more than " + std::to_string(limits.max_groups) +
                                    " groups; filter the items first");
  }
  if (too_many_bytes) {
    note_work_refusal("group_bytes");
    return Status::invalid_argument("GROUP BY would hold more than " + std::to_string(limits.max_group_bytes) +
                                    " bytes of groups (each keeps its key and one item) in memory; filter the items "
                                    "first, or group by fewer or smaller values");
  }
  // Without GROUP BY an aggregate query has exactly one group, even over no items (COUNT = 0).
  if (query.group_by.empty() && groups.empty()) {
    Group group;
    group.first = bj::object();
    for (const Expr* aggregate : evaluator.aggregates()) group.accumulators.emplace_back(aggregate->aggregate);
    groups.emplace("", std::move(group));
  }
  std::vector<Group*> ordered;
  for (auto& [text, group] : groups) ordered.push_back(&group);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Group* a, const Group* b) {
    for (size_t i = 0; i < a->key.size(); ++i) {
      const int c = order_compare(a->key[i] ? &*a->key[i] : nullptr, b->key[i] ? &*b->key[i] : nullptr);
      if (c != 0) return c < 0;
    }
    return false;
  });
  int64_t skip = evaluator.offset().value_or(0);
  int64_t take = evaluator.top() ? *evaluator.top() : evaluator.limit().value_or(-1);
  page.body = "[";
  for (Group* group : ordered) {
    if (take == 0) break;
    if (skip > 0) {
      --skip;
      continue;
    }
    std::vector<Val> results;
    for (const Accumulator& accumulator : group->accumulators) results.push_back(accumulator.result());
    std::optional<bj::value> row = evaluator.project_group(group->first, results);
    if (take > 0) --take;
    if (row) append_row(*row, page.body, page.stats.rows);
  }
  page.body.push_back(']');
  return page;
}

// Key order or the `_ts` index: items come in result order, so a page stops as soon as it is full.
Result<Page> run_streaming(const Evaluator& evaluator, ItemSource& source, ScanOrder order, const Token& start,
                           std::string_view fingerprint, const EngineLimits& limits) {
  Page page;
  page.stats.used_ts_index = order != ScanOrder::kKey;
  page.body = "[";
  PageState state{start.offset_left, start.limit_left};
  std::string last_position = start.position;
  bool stopped = false;
  // A full page looks ahead for one more matching item before it issues a continuation, so the last page of a query
  // ends without one (Cosmos's SDKs take a continuation as "there are more"). The next page resumes after the last
  // row kept, `full_at`, and examines the looked-at items again.
  std::optional<std::string> full_at;
  int64_t counted = 0;  // items that passed WHERE and OFFSET on this page
  Status status = source.scan(order, start.position, true, [&](SourceItem& item) {
    if (static_cast<size_t>(page.stats.items_examined) >= limits.max_items_examined_per_page) {
      stopped = true;  // this item is not consumed: the next page starts with it
      return false;
    }
    if (!charge_work(kStepsPerItem)) return false;
    ++page.stats.items_examined;
    if (full_at) {
      if (!evaluator.matches(item.document)) return true;
      stopped = true;  // there is more: the next page starts after full_at
      return false;
    }
    last_position.assign(item.position);
    if (!evaluator.matches(item.document)) return true;
    if (state.offset_left > 0) {
      --state.offset_left;
      return true;
    }
    std::optional<bj::value> row = evaluator.project(item.document);
    if (row) append_row(*row, page.body, page.stats.rows);
    ++counted;
    if (state.limit_left > 0) --state.limit_left;
    if (state.limit_left == 0) return false;  // TOP / LIMIT reached: the query is done
    if (static_cast<size_t>(counted) >= limits.max_items || page.body.size() >= limits.max_page_bytes) {
      full_at = last_position;
    }
    return true;
  });
  MAYFLY_RETURN_IF_ERROR(status);
  MAYFLY_RETURN_IF_ERROR(work_status());
  page.body.push_back(']');
  if (stopped && state.limit_left != 0) {
    Token next;
    next.mode = order == ScanOrder::kKey ? 'k' : 't';
    next.position = full_at ? *full_at : last_position;
    next.offset_left = state.offset_left;
    next.limit_left = state.limit_left;
    page.continuation = encode_token(next, fingerprint);
  }
  return page;
}

// ORDER BY that no index serves: read every visible item once, keep the best (offset + page size) rows after the
// continuation's position in a bounded heap, sort them.
Result<Page> run_sorted(const Evaluator& evaluator, ItemSource& source, const Token& start, bool resume,
                        std::string_view fingerprint, const EngineLimits& limits) {
  const std::vector<OrderKey>& order = evaluator.query().order_by;
  Page page;
  page.stats.full_scan = true;
  PageState state{start.offset_left, start.limit_left};
  const int64_t page_size = state.limit_left >= 0 ? std::min<int64_t>(state.limit_left, static_cast<int64_t>(limits.max_items))
                                                  : static_cast<int64_t>(limits.max_items);
  if (state.offset_left > static_cast<int64_t>(limits.max_sorted_rows) - page_size) {
    return Status::invalid_argument("OFFSET " + std::to_string(state.offset_left) + " with ORDER BY on a property other "
                                    "than _ts would hold more than " + std::to_string(limits.max_sorted_rows) +
                                    " rows; page with continuation tokens instead");
  }
  size_t keep = static_cast<size_t>(state.offset_left + page_size);
  auto less = [&](const SortedRow& a, const SortedRow& b) {
    return compare_sorted(a.keys, a.position, b.keys, b.position, order) < 0;
  };
  std::vector<SortedRow> heap;  // max-heap by `less`: the worst kept row on top
  size_t heap_bytes = 0;        // the kept rows' documents in memory
  int64_t candidates = 0;
  bool over_limit = false;
  bool too_many_bytes = false;
  Status status = source.scan(ScanOrder::kKey, "", true, [&](SourceItem& item) {
    if (static_cast<size_t>(page.stats.items_examined) >= limits.max_items_examined_per_request) {
      over_limit = true;
      return false;
    }
    if (!charge_work(kStepsPerItem)) return false;
    ++page.stats.items_examined;
    if (!evaluator.matches(item.document)) return true;
    SortKeys keys = sort_keys_of(evaluator, item);
    if (resume && compare_sorted(keys, item.position, start.keys, start.position, order) <= 0) return true;
    ++candidates;
    if (keep == 0) return true;
    if (heap.size() == keep) {
      if (compare_sorted(keys, item.position, heap.front().keys, heap.front().position, order) >= 0) return true;
      std::pop_heap(heap.begin(), heap.end(), less);
      heap_bytes -= heap.back().bytes;
      heap.pop_back();
    }
    const size_t bytes = json_memory_bytes(item.document);
    heap.push_back(SortedRow{std::move(keys), std::string(item.position), std::move(item.document), bytes});
    heap_bytes += bytes;
    std::push_heap(heap.begin(), heap.end(), less);
    // Past max_sorted_bytes the page keeps fewer rows: the worst go (they come on a later page, after the
    // continuation), as long as at least one row past the OFFSET stays.
    while (heap_bytes > limits.max_sorted_bytes && heap.size() > 1) {
      if (heap.size() <= static_cast<size_t>(state.offset_left) + 1) {
        too_many_bytes = true;
        return false;
      }
      std::pop_heap(heap.begin(), heap.end(), less);
      heap_bytes -= heap.back().bytes;
      heap.pop_back();
      keep = heap.size();
    }
    return true;
  });
  MAYFLY_RETURN_IF_ERROR(status);
  MAYFLY_RETURN_IF_ERROR(work_status());
  if (over_limit) return too_much_work(limits.max_items_examined_per_request);
  if (too_many_bytes) {
    note_work_refusal("sort_bytes");
    return Status::invalid_argument("ORDER BY on a property other than _ts would hold more than " +
                                    std::to_string(limits.max_sorted_bytes) + " bytes of items for OFFSET " +
                                    std::to_string(state.offset_left) + "; page with continuation tokens instead, "
                                    "or narrow the query");
  }
  std::sort_heap(heap.begin(), heap.end(), less);
  page.body = "[";
  int64_t consumed = 0;
  const SortedRow* last = nullptr;
  for (const SortedRow& row : heap) {
    ++consumed;
    if (state.offset_left > 0) {
      --state.offset_left;
      last = &row;
      continue;
    }
    std::optional<bj::value> projected = evaluator.project(row.document);
    if (projected) append_row(*projected, page.body, page.stats.rows);
    if (state.limit_left > 0) --state.limit_left;
    last = &row;
    if (page.body.size() >= limits.max_page_bytes) break;
  }
  page.body.push_back(']');
  if (consumed < candidates && state.limit_left != 0 && last != nullptr) {
    Token next;
    next.mode = 's';
    next.position = last->position;
    next.keys = last->keys;
    next.offset_left = state.offset_left;
    next.limit_left = state.limit_left;
    page.continuation = encode_token(next, fingerprint);
  }
  return page;
}

}  // namespace

size_t json_memory_bytes(const bj::value& value) {
  // Iterative (documents nest up to the store's depth limit, but a walk needs no stack of its own).
  size_t total = 0;
  std::vector<const bj::value*> pending{&value};
  while (!pending.empty()) {
    const bj::value* at = pending.back();
    pending.pop_back();
    total += sizeof(bj::value);
    if (at->is_string()) {
      total += at->get_string().capacity();
    } else if (at->is_array()) {
      const bj::array& array = at->get_array();
      total += (array.capacity() - array.size()) * sizeof(bj::value);
      for (const bj::value& element : array) pending.push_back(&element);
    } else if (at->is_object()) {
      const bj::object& object = at->get_object();
      total += object.capacity() * (sizeof(bj::key_value_pair) - sizeof(bj::value) + sizeof(void*));
      for (const bj::key_value_pair& member : object) {
        total += member.key().size();
        pending.push_back(&member.value());
      }
    }
  }
  return total;
}

Plan make_plan(const Evaluator& evaluator, std::string_view partition_key_path) {
  const Query& query = evaluator.query();
  Plan plan;
  // One path for a Hash key; a hierarchical key pins a partition only when the filter pins every one of its paths.
  std::vector<std::vector<std::string>> pk_paths;
  for (const std::string& path : json::partition_key_paths(partition_key_path)) {
    pk_paths.push_back(json::partition_key_path_segments(path));
  }
  std::vector<std::optional<bj::value>> pk_values(pk_paths.size());
  if (query.where) {
    std::vector<const Expr*> parts;
    conjuncts(*query.where, parts);
    for (const Expr* part : parts) {
      if (part->kind != ExprKind::kBinary || part->op != Op::kEqual) continue;
      std::optional<std::vector<std::string>> path = path_of(*part->args[0]);
      const bj::value* value = constant_of(*part->args[1], evaluator);
      if (!path || value == nullptr) {
        path = path_of(*part->args[1]);
        value = constant_of(*part->args[0], evaluator);
      }
      if (!path || value == nullptr) continue;
      const bool scalar = value->is_string() || value->is_number() || value->is_bool() || value->is_null();
      for (size_t i = 0; i < pk_paths.size(); ++i) {
        if (*path != pk_paths[i] || !scalar) continue;
        if (pk_values[i] && !json_equal(*pk_values[i], *value)) plan.matches_nothing = true;
        pk_values[i] = *value;
      }
      if (path->size() == 1 && (*path)[0] == "id" && value->is_string()) {
        if (plan.id && *plan.id != value->get_string()) plan.matches_nothing = true;
        plan.id = std::string(value->get_string());
      }
    }
  }
  if (std::all_of(pk_values.begin(), pk_values.end(), [](const auto& value) { return value.has_value(); })) {
    if (pk_values.size() == 1) {
      plan.partition_key = *pk_values[0];
    } else {
      bj::array components;
      for (const auto& value : pk_values) components.push_back(*value);
      plan.partition_key = bj::value(std::move(components));
    }
  }
  if (query.order_by.size() == 1 && is_ts_path(*query.order_by[0].expr)) {
    plan.order_by_ts = true;
    plan.ts_descending = query.order_by[0].descending;
  }
  plan.needs_full_scan = query.has_aggregates || !query.group_by.empty() || (!query.order_by.empty() && !plan.order_by_ts);
  return plan;
}

Result<Page> run_page(const Evaluator& evaluator, const Plan& plan, ItemSource& source, std::string_view continuation,
                      std::string_view fingerprint, const EngineLimits& limits) {
  const Query& query = evaluator.query();
  if (limits.max_items == 0) return Status::invalid_argument("max items per page must be at least 1");
  const bool aggregate = query.has_aggregates || !query.group_by.empty();
  if (aggregate) {
    if (!continuation.empty()) {
      return Status::invalid_argument("aggregate and GROUP BY queries return one page; they take no continuation");
    }
    return run_aggregate(evaluator, source, limits);
  }
  Token start;
  start.offset_left = evaluator.offset().value_or(0);
  start.limit_left = evaluator.top() ? *evaluator.top() : evaluator.limit().value_or(-1);
  const bool resume = !continuation.empty();
  const bool sorted = !query.order_by.empty() && !(plan.order_by_ts && !source.single_partition());
  const char mode = sorted ? 's' : !query.order_by.empty() ? 't' : 'k';
  if (resume) {
    MAYFLY_ASSIGN_OR_RETURN(start, decode_token(continuation, fingerprint, query.order_by.size()));
    if (start.mode != mode) return Status::invalid_argument("continuation token belongs to a different query");
  }
  if (start.limit_left == 0) return Page{"[]", "", {}};
  // Point lookup: the partition and the id are pinned, so at most one item can match.
  if (plan.id && source.single_partition() && !plan.matches_nothing) {
    Page page;
    page.stats.used_point_lookup = true;
    page.body = "[";
    if (!resume) {
      MAYFLY_RETURN_IF_ERROR(source.lookup(*plan.id, [&](SourceItem& item) {
        ++page.stats.items_examined;
        if (!evaluator.matches(item.document) || start.offset_left > 0) return;
        if (std::optional<bj::value> row = evaluator.project(item.document)) append_row(*row, page.body, page.stats.rows);
      }));
      MAYFLY_RETURN_IF_ERROR(work_status());
    }
    page.body.push_back(']');
    return page;
  }
  if (plan.matches_nothing) return Page{"[]", "", {}};
  if (query.distinct) {
    // Every row of the query (its own pages, followed here), each once, then OFFSET/LIMIT/TOP: one page, as for
    // aggregates; the distinct rows kept are bounded like ORDER BY's.
    if (resume) return Status::invalid_argument("DISTINCT queries return one page; they take no continuation");
    Token all;
    all.mode = mode;
    EngineLimits inner = limits;
    inner.max_items = limits.max_sorted_rows;
    std::vector<bj::value> rows;
    std::unordered_set<std::string> seen;
    Page page;
    page.stats.full_scan = true;
    bool next = false;
    while (true) {
      Page part;
      if (sorted) {
        MAYFLY_ASSIGN_OR_RETURN(part, run_sorted(evaluator, source, all, next, fingerprint, inner));
      } else {
        ScanOrder order = ScanOrder::kKey;
        if (mode == 't') order = plan.ts_descending ? ScanOrder::kTsDescending : ScanOrder::kTsAscending;
        MAYFLY_ASSIGN_OR_RETURN(part, run_streaming(evaluator, source, order, all, fingerprint, inner));
      }
      page.stats.items_examined += part.stats.items_examined;
      if (static_cast<size_t>(page.stats.items_examined) > limits.max_items_examined_per_request) {
        return Status::invalid_argument("DISTINCT would examine more than " +
                                        std::to_string(limits.max_items_examined_per_request) +
                                        " items; narrow the query with a filter or a partition key");
      }
      Result<bj::value> parsed = json::parse(part.body);
      if (!parsed.is_ok() || !parsed->is_array()) return Status::internal("a page did not parse");
      for (bj::value& row : parsed->get_array()) {
        if (seen.insert(json::to_json(row)).second) rows.push_back(std::move(row));
      }
      if (rows.size() > limits.max_sorted_rows) {
        return Status::invalid_argument("DISTINCT keeps at most " + std::to_string(limits.max_sorted_rows) +
                                        " distinct rows; narrow the query or add TOP");
      }
      if (part.continuation.empty()) break;
      MAYFLY_ASSIGN_OR_RETURN(all, decode_token(part.continuation, fingerprint, query.order_by.size()));
      next = true;
    }
    const size_t skip = std::min(rows.size(), static_cast<size_t>(std::max<int64_t>(0, start.offset_left)));
    size_t take = rows.size() - skip;
    if (start.limit_left >= 0) take = std::min(take, static_cast<size_t>(start.limit_left));
    page.body = "[";
    for (size_t i = skip; i < skip + take; ++i) append_row(rows[i], page.body, page.stats.rows);
    page.body.push_back(']');
    return page;
  }
  if (sorted) return run_sorted(evaluator, source, start, resume, fingerprint, limits);
  ScanOrder order = ScanOrder::kKey;
  if (mode == 't') order = plan.ts_descending ? ScanOrder::kTsDescending : ScanOrder::kTsAscending;
  return run_streaming(evaluator, source, order, start, fingerprint, limits);
}

}  // namespace mayfly::query
