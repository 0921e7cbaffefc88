#include "node/patch_condition.h"

#include <boost/json.hpp>

#include <cctype>
#include <string>

#include "query/evaluator.h"
#include "query/parser.h"

namespace mayfly::node {
namespace {

bool starts_with_word(std::string_view text, std::string_view word) {
  if (text.size() < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != word[i]) return false;
  }
  return text.size() == word.size() || !std::isalnum(static_cast<unsigned char>(text[word.size()]));
}

// The etag a re-sent patch whose condition is false now is pinned to: no item has it.
constexpr std::string_view kNoVersion = "\"filter-predicate-false\"";

Status bad(const std::string& why) {
  return Status::invalid_argument("the patch's condition (filter predicate) " + why +
                                  "; write it as \"FROM c WHERE <condition>\"");
}

Result<query::Query> parse_condition(std::string_view condition) {
  if (condition.size() > kMaxPatchConditionBytes) {
    return bad("is " + std::to_string(condition.size()) + " bytes, more than " +
               std::to_string(kMaxPatchConditionBytes));
  }
  size_t start = 0;
  while (start < condition.size() && std::isspace(static_cast<unsigned char>(condition[start]))) ++start;
  if (!starts_with_word(condition.substr(start), "from")) return bad("must start with FROM");
  Result<query::Query> parsed = query::parse_query("SELECT * " + std::string(condition.substr(start)));
  if (!parsed.is_ok()) return bad("is not valid: " + parsed.status().message());
  const query::Query& query = parsed.value();
  if (!query.order_by.empty() || !query.group_by.empty() || query.offset || query.limit || query.top) {
    return bad("may only filter (no ORDER BY, GROUP BY, OFFSET, LIMIT or TOP)");
  }
  return parsed;
}

}  // namespace

Status validate_patch_condition(std::string_view condition) { return parse_condition(condition).status(); }

Result<bool> patch_condition_holds(std::string_view condition, std::string_view item_json) {
  MAYFLY_ASSIGN_OR_RETURN(query::Query parsed, parse_condition(condition));
  MAYFLY_ASSIGN_OR_RETURN(query::Evaluator evaluator, query::Evaluator::create(parsed, {}));
  boost::system::error_code error;
  const boost::json::value item = boost::json::parse(item_json, error);
  if (error || !item.is_object()) return Status::internal("the item to patch did not read back as a JSON object");
  return evaluator.matches(item);
}

std::optional<storage::OpResult> decide_patch_condition(const storage::StoreReader& reader,
                                                        std::string_view condition, bool resent,
                                                        storage::Command& command) {
  const storage::OpResult current = reader.read_item(command.database, command.container, command.partition_key_json,
                                                     command.id, reader.applied().ts_micros);
  if (!current.ok()) return resent ? std::nullopt : std::optional<storage::OpResult>(current);
  Result<bool> holds = patch_condition_holds(condition, current.body);
  if (!holds.is_ok()) return storage::OpResult::error(holds.status());
  if (!*holds && !resent) {
    return storage::OpResult::error(StatusCode::kPreconditionFailed,
                                    "the patch's condition (filter predicate) is false for the item; nothing was "
                                    "changed");
  }
  if (!command.if_match) command.if_match = *holds ? current.etag : std::string(kNoVersion);
  return std::nullopt;
}

}  // namespace mayfly::node
