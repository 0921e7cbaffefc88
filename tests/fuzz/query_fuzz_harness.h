// The query fuzz harness, shared by the libFuzzer target (query_fuzzer, built with clang) and the seeded mutation
// test (query_fuzz_test, built with the project's compiler): one input is query text; it is parsed, bound to a
// fixed set of parameters and run over a fixed in-memory set of items, a few pages at a time. Whatever the input,
// this must not crash or hang, and every rejection must be an InvalidArgument (a 400) with a message. Violations
// abort (MAYFLY_ASSERT), which is what libFuzzer reports.
// Only the parser, evaluator and engine are linked (no LevelDB): query/{parser,evaluator,engine}.cc, storage/json.cc.
#pragma once

#include <string_view>

namespace mayfly::query::fuzz {

struct Outcome {
  bool accepted = false;  // parsed and ran
  int pages = 0;
};

Outcome check_query_input(std::string_view text);

}  // namespace mayfly::query::fuzz
