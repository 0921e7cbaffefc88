// The syntax tree of Mayfly's query language, a Cosmos DB SQL subset (docs/cosmos.md, "Queries"):
//
//   SELECT [TOP n] [VALUE] <projection> FROM <root> [WHERE <expr>] [GROUP BY <path>, ...]
//          [ORDER BY <path> [ASC|DESC], ...] [OFFSET n LIMIT m]
//
// Built by query/parser.h, checked there (names resolve to the FROM alias, aggregates only where allowed, limits on
// size and nesting), evaluated by query/evaluator.h. Every node remembers where it started in the query text, so
// errors found after parsing can still point at it.
// Thread-safety: immutable values once parsed; share freely between threads.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mayfly::query {

enum class ExprKind : uint8_t {
  kLiteral,    // literal: a JSON value (or undefined when `undefined_literal`)
  kParameter,  // @name; name holds "@name"
  kRoot,       // the FROM alias (the item)
  kProperty,   // args[0].name  or  args[0]["name"]
  kIndex,      // args[0][args[1]]: a computed member name or array index
  kUnary,      // op args[0]
  kBinary,     // args[0] op args[1]
  kBetween,    // args[0] [NOT] BETWEEN args[1] AND args[2]
  kIn,         // args[0] [NOT] IN (args[1..])
  kLike,       // args[0] [NOT] LIKE args[1] [ESCAPE args[2]]
  kTernary,    // args[0] ? args[1] : args[2]
  kCoalesce,   // args[0] ?? args[1]
  kCall,       // function(args...)
  kAggregate,  // COUNT/SUM/MIN/MAX/AVG(args[0])
  kArray,      // [args...]
  kObject,     // {names[i]: args[i], ...}
};

enum class Op : uint8_t {
  kNone,
  // unary
  kNot, kNegate, kPlus,
  // binary
  kAnd, kOr, kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual,
  kAdd, kSubtract, kMultiply, kDivide, kModulo, kConcat,
};

enum class Function : uint8_t {
  kIsDefined, kIsNull, kIsNumber, kIsString, kIsBool, kIsArray, kIsObject,
  kStartsWith, kEndsWith, kContains, kLower, kUpper, kLength, kArrayContains, kArrayLength, kAbs, kFloor,
};

enum class Aggregate : uint8_t { kCount, kSum, kMin, kMax, kAvg };

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  size_t position = 0;  // byte offset in the query text
  Op op = Op::kNone;
  Function function = Function::kIsDefined;
  Aggregate aggregate = Aggregate::kCount;
  bool negated = false;            // NOT BETWEEN / NOT IN / NOT LIKE
  bool undefined_literal = false;  // the literal `undefined`
  std::string name;                // property name, parameter name ("@x"), function name as written
  boost::json::value literal;      // kLiteral
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::string> names;  // kObject member names, parallel to args
};
using ExprPtr = std::unique_ptr<Expr>;

struct Projection {
  ExprPtr expr;
  std::string name;  // the output property: the alias, the last path segment, or "$1", "$2", ...
};

struct OrderKey {
  ExprPtr expr;  // a property path rooted at the FROM alias
  bool descending = false;
};

// A number given as a literal or a parameter (TOP, OFFSET, LIMIT).
struct CountSpec {
  std::optional<int64_t> literal;
  std::string parameter;  // "@name" when not a literal
  size_t position = 0;
};

struct Query {
  bool distinct = false;      // SELECT DISTINCT: each row once (the first occurrence in the result order)
  std::optional<CountSpec> top;
  bool select_value = false;  // SELECT VALUE <expr>
  bool select_star = false;   // SELECT *
  std::vector<Projection> projections;  // one when select_value; empty when select_star
  std::string root;                     // the FROM alias ("c")
  ExprPtr where;                        // nullptr: every item
  std::vector<ExprPtr> group_by;
  std::vector<OrderKey> order_by;
  std::optional<CountSpec> offset;
  std::optional<CountSpec> limit;
  bool has_aggregates = false;  // some projection holds an aggregate
};

}  // namespace mayfly::query
