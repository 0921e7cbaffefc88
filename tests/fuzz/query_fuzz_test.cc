// The query fuzz harness (query_fuzz_harness.h) driven by seeded mutations, with the project's own compiler: runs
// everywhere, including where clang's libFuzzer is not installed. MAYFLY_FUZZ_SEED, MAYFLY_FUZZ_ITERATIONS.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/prng.h"
#include "tests/env.h"
#include "tests/fuzz/query_fuzz_harness.h"

namespace mayfly::query::fuzz {
namespace {

using testing_env::env_or;

const std::vector<std::string> kSeeds = {
    "SELECT VALUE c.id FROM c WHERE c.n > 1 ORDER BY c._ts DESC",
    "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk",
    "SELECT VALUE {\"a\": c.arr[0], b: [c.n ?? 1, c.s || 'x']} FROM c WHERE c.s LIKE '%a_' ESCAPE '\\\\' "
    "AND c.n IN (1, @a) OFFSET 1 LIMIT 2",
    "SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n) AND NOT (c.t = false OR STARTSWITH(c.s, 'a', true))",
    "SELECT * FROM root r WHERE r.o.l[\"m\"] AND ARRAY_CONTAINS(r.arr, {\"k\":[2]}, true) ORDER BY r.n DESC, r.s",
    "SELECT VALUE (c.n BETWEEN -1 AND 3 ? LOWER(c.s) : UPPER(c.s)) FROM c WHERE c.id = 'a' AND c.pk = 'p'",
    "SELECT c.id, AVG(c.n) AS m, MIN(c.s), MAX(c._ts) FROM c GROUP BY c.id",
};
const std::vector<std::string> kPieces = {
    "(", ")", "[", "]", "{", "}", ",", ".", ":", "?", "??", "'", "\"", "\\", "@", "@a", "-", "+", "*", "/", "%",
    " AND ", " OR ", " NOT ", " IN (", " BETWEEN ", " LIKE ", "COUNT(", "SUM(c.n)", "c.", "c[", "undefined",
    "null", "1e999", "9223372036854775808", "-0", "\xff", "\xc3\xa9", "\x01", " ORDER BY c.", " GROUP BY c.",
    " OFFSET 0 LIMIT ", "TOP 0 ", " DESC", "ABS(", "FLOOR(", "LENGTH(", "--", "\n"};

std::string mutate(Prng& prng, std::string text) {
  const int edits = static_cast<int>(prng.range(1, 2));
  for (int e = 0; e < edits; ++e) {
    const size_t at = text.empty() ? 0 : prng.uniform(text.size() + 1);
    switch (prng.uniform(5)) {
      case 0: text.insert(at, kPieces[prng.uniform(kPieces.size())]); break;
      case 1:
        if (at < text.size()) text.erase(at, prng.range(1, 8));
        break;
      case 2:
        if (at < text.size()) text[at] = static_cast<char>(prng.uniform(256));
        break;
      case 3:  // duplicate a slice: deep nesting, long chains
        if (at < text.size()) {
          const std::string slice = text.substr(at, prng.range(1, 12));
          for (int r = static_cast<int>(prng.range(1, 40)); r > 0; --r) text.insert(at, slice);
        }
        break;
      default: {
        const std::string& other = kSeeds[prng.uniform(kSeeds.size())];
        text.insert(at, other.substr(prng.uniform(other.size()), prng.range(0, 30)));
        break;
      }
    }
  }
  return text;
}

TEST(QueryFuzz, NoCrashNoHangEveryRejectionIsA400WithAMessage) {
  const uint64_t seed = env_or("MAYFLY_FUZZ_SEED", 777);
  const uint64_t iterations = env_or("MAYFLY_FUZZ_ITERATIONS", 20000);
  std::printf("query fuzz: seed %llu, %llu iterations (MAYFLY_FUZZ_SEED / MAYFLY_FUZZ_ITERATIONS)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(iterations));
  Prng prng(seed);
  int accepted = 0, rejected = 0;
  for (const std::string& text : kSeeds) {
    EXPECT_TRUE(check_query_input(text).accepted) << "seed query rejected: " << text;
  }
  for (uint64_t i = 0; i < iterations; ++i) {
    const std::string input = mutate(prng, kSeeds[prng.uniform(kSeeds.size())]);
    (check_query_input(input).accepted ? accepted : rejected)++;  // violations abort inside
  }
  std::printf("query fuzz: %d accepted, %d rejected\n", accepted, rejected);
  EXPECT_GT(accepted, static_cast<int>(iterations / 50));  // enough inputs reach the evaluator and the engine
  EXPECT_GT(rejected, static_cast<int>(iterations / 20));
}

}  // namespace
}  // namespace mayfly::query::fuzz
