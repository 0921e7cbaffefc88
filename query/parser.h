// The query parser: text -> query/ast.h, with errors a user can act on.
//
// Every rejection is an InvalidArgument Status whose message says where (line, column and byte offset) and what was
// expected ("syntax error at line 1, column 24 (offset 23): expected an expression, found keyword FROM"); the node
// turns it into a 400. Limits keep hostile text cheap: the text length, the nesting of parentheses / arrays /
// objects / prefix operators, and the depth of the tree (a chain like 1+1+...+1 is a deep tree too), so neither the
// parser nor the evaluator can recurse without bound.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "query/ast.h"

namespace mayfly::query {

struct ParseLimits {
  size_t max_text_bytes = 256 * 1024;
  int max_nesting = 64;      // parentheses, brackets, braces, prefix operators
  int max_tree_depth = 256;  // operators chained in one expression
};

Result<Query> parse_query(std::string_view text, const ParseLimits& limits = {});

// A canonical text of an expression ("c.a[\"b\"]", "(c.x + 1)"): two expressions print the same iff they are the
// same tree. Used to check that GROUP BY projections only use grouped expressions.
std::string canonical_text(const Expr& expr);

}  // namespace mayfly::query
