// Evaluating query expressions against one item, with Cosmos DB's semantics:
//
//  - A property that is absent, an index out of range, or an operation on the wrong types is *undefined* (not an
//    error, not null). Comparisons involving undefined, or between different types (1 = "1"), are undefined; a WHERE
//    keeps an item only when its condition is exactly true. AND/OR are three-valued (false AND undefined = false,
//    true OR undefined = true). SELECT VALUE of undefined yields no result; an undefined property is left out of a
//    projected object.
//  - Numbers are compared and computed as numbers whatever their JSON form (1 = 1.0); arithmetic results that are
//    integral print as integers, like Cosmos (4 / 2 = 2).
//  - The total order used by ORDER BY, MIN/MAX and group keys: undefined < null < false < true < numbers < strings
//    (ordinal, by UTF-8 bytes) < arrays < objects.
// Thread-safety: an Evaluator is immutable after create(); eval() may run on several threads at once.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "query/ast.h"

namespace mayfly::query {

// A value during evaluation: undefined, or a JSON value that is either borrowed (from the item or the query, which
// outlive the evaluation) or owned (computed).
class Val {
 public:
  Val() = default;  // undefined
  static Val ref(const boost::json::value& value) {
    Val out;
    out.ref_ = &value;
    return out;
  }
  static Val own(boost::json::value value) {
    Val out;
    out.owned_ = std::move(value);
    out.is_owned_ = true;
    return out;
  }
  bool defined() const { return ref_ != nullptr || is_owned_; }
  const boost::json::value& get() const { return ref_ != nullptr ? *ref_ : owned_; }
  const boost::json::value* ptr() const { return defined() ? &get() : nullptr; }
  bool is_owned() const { return is_owned_; }
  boost::json::value take() && { return ref_ != nullptr ? boost::json::value(*ref_) : std::move(owned_); }

 private:
  const boost::json::value* ref_ = nullptr;
  boost::json::value owned_;
  bool is_owned_ = false;
};

using Parameters = std::map<std::string, boost::json::value, std::less<>>;  // "@name" -> value

// The total order described above; nullptr is undefined. Returns <0, 0, >0.
int order_compare(const boost::json::value* a, const boost::json::value* b);
// Deep equality with numbers compared by value and object members in any order.
bool json_equal(const boost::json::value& a, const boost::json::value& b);
// A number as Cosmos prints it: integral values that fit exactly become integers.
boost::json::value number_value(double value);
// An order-preserving-enough text key for grouping (1 and 1.0 group together; undefined has its own key).
std::string group_key_text(const boost::json::value* value);

// SQL LIKE (see evaluator.cc): linear in text and pattern except for segments with '_', whose attempts are charged
// to the thread's work budget (common/work_budget.h); false once that budget stops the read.
bool like_match(std::string_view text, std::string_view pattern, std::optional<char> escape);
// The first occurrence of `needle` in `text` at or after `from` (npos when none), in O(text + needle) steps charged
// to the thread's work budget; npos too once that budget stops the read.
size_t find_substring(std::string_view text, std::string_view needle, size_t from = 0);

// The running state of one aggregate over the items of a group.
class Accumulator {
 public:
  explicit Accumulator(Aggregate aggregate) : aggregate_(aggregate) {}
  void add(const Val& value);
  Val result() const;

 private:
  Aggregate aggregate_;
  int64_t count_ = 0;
  double sum_ = 0;
  bool invalid_ = false;  // SUM/AVG saw a non-number, MIN/MAX an array or object: the result is undefined
  std::optional<boost::json::value> best_;
};

class Evaluator {
 public:
  // Checks that every parameter the query uses is given, and that TOP / OFFSET / LIMIT parameters are non-negative
  // integers. InvalidArgument (a 400) otherwise. `query` must outlive the Evaluator.
  static Result<Evaluator> create(const Query& query, Parameters parameters);

  const Query& query() const { return *query_; }
  std::optional<int64_t> top() const { return top_; }
  std::optional<int64_t> offset() const { return offset_; }
  std::optional<int64_t> limit() const { return limit_; }
  const Parameters& parameters() const { return parameters_; }

  // One expression; `aggregates` holds the results of the query's aggregates (by aggregate_slot) when projecting a
  // group, nullptr otherwise.
  Val eval(const Expr& expr, const boost::json::value& item, const std::vector<Val>* aggregates = nullptr) const;
  // WHERE: true only when the condition is exactly true (no WHERE: always).
  bool matches(const boost::json::value& item) const;
  // The SELECT of a non-aggregate query for one item; nullopt when SELECT VALUE is undefined.
  std::optional<boost::json::value> project(const boost::json::value& item) const;
  // The SELECT of an aggregate query for a group whose first item is `first` (its non-aggregate parts are grouped
  // expressions, equal on every item of the group).
  std::optional<boost::json::value> project_group(const boost::json::value& first,
                                                  const std::vector<Val>& aggregate_results) const;

  // The aggregate calls of the SELECT list, in slot order.
  const std::vector<const Expr*>& aggregates() const { return aggregate_exprs_; }

 private:
  Evaluator() = default;
  std::optional<boost::json::value> project_with(const boost::json::value& item,
                                                 const std::vector<Val>* aggregates) const;
  Val eval_call(const Expr& expr, const boost::json::value& item, const std::vector<Val>* aggregates) const;

  const Query* query_ = nullptr;
  Parameters parameters_;
  std::optional<int64_t> top_, offset_, limit_;
  std::vector<const Expr*> aggregate_exprs_;
  std::unordered_map<const Expr*, size_t> aggregate_slots_;
};

}  // namespace mayfly::query
