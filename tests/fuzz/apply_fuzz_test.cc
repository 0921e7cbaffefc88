// Fuzzing the state machine's input: mutated item JSON, patch operations, partition keys and raw command bytes.
// Whatever arrives, apply must give a clear 4xx or a success — never crash, never a 5xx — and a rejected command
// must leave the replicated state exactly as it was (only the applied index and time move).
//
// Seeded and deterministic: MAYFLY_FUZZ_SEED, MAYFLY_FUZZ_ITERATIONS (smoke default in CI; raise for a long run).
#include <cstdlib>
#include <string>
#include <vector>

#include "common/codec.h"
#include "common/prng.h"
#include "storage/layout.h"
#include "tests/env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using testing_env::env_or;

const std::vector<std::string> kSeeds = {
    R"({"id":"a","pk":"p","ttl":10,"n":{"x":[1,2.5,"s",null,true]}})",
    R"({"id":"b","pk":42,"ttl":-1})",
    R"({"id":"c","pk":null,"_ts":5,"_etag":"x","_rid":"y","TTL":"z"})",
    R"({"id":"d\u0000e","pk":"\ud83d\ude00","a":{"b":{"c":{}}}})",
    R"([{"op":"set","path":"/ttl","value":5},{"op":"incr","path":"/n/x/1","value":1}])",
    R"([{"op":"remove","path":"/a/b"},{"op":"add","path":"/arr/-","value":[1]}])",
};
const std::string kAlphabet = "{}[]\",:0123456789-+.eE truefalsnul\\/u_idpkt#?\x01\xff\xc3\xa9";

std::string mutate(Prng& prng, std::string text) {
  const int edits = static_cast<int>(prng.range(1, 4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = text.empty() ? 0 : prng.uniform(text.size() + 1);
    switch (prng.uniform(5)) {
      case 0:  // insert a character
        text.insert(text.begin() + static_cast<long>(at), kAlphabet[prng.uniform(kAlphabet.size())]);
        break;
      case 1:  // delete a run
        if (!text.empty() && at < text.size()) text.erase(at, prng.range(1, 4));
        break;
      case 2:  // replace a character
        if (at < text.size()) text[at] = kAlphabet[prng.uniform(kAlphabet.size())];
        break;
      case 3:  // duplicate a slice (deep nesting, repeated keys)
        if (!text.empty() && at < text.size()) text.insert(at, text.substr(at, prng.range(1, 20)));
        break;
      default:  // splice in a piece of another seed
        text.insert(at, kSeeds[prng.uniform(kSeeds.size())].substr(0, prng.range(0, 30)));
        break;
    }
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> replicated_without_meta(StateMachine& store) {
  auto dump = store.dump(false);
  EXPECT_TRUE(dump.is_ok());
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [key, value] : *dump) {
    if (key != meta_key()) out.emplace_back(key, value);
  }
  return out;
}

class ApplyFuzz : public StoreFixture {};

TEST_F(ApplyFuzz, BadInputIsA4xxAndChangesNothing) {
  const uint64_t seed = env_or("MAYFLY_FUZZ_SEED", 424242);
  const uint64_t iterations = env_or("MAYFLY_FUZZ_ITERATIONS", 20000);
  std::printf("fuzz: seed %llu, %llu iterations (MAYFLY_FUZZ_SEED / MAYFLY_FUZZ_ITERATIONS)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(iterations));
  Prng prng(seed);
  make_container("100");
  int64_t now = kT0 + kSecond;
  int accepted = 0, rejected = 0;
  for (uint64_t i = 0; i < iterations && !HasFailure(); ++i) {
    Command command;
    const uint64_t kind = prng.uniform(4);
    const std::string input = mutate(prng, kSeeds[prng.uniform(kSeeds.size())]);
    if (kind == 0) {
      command = item_command(prng.chance(1, 2) ? CommandType::kUpsertItem : CommandType::kCreateItem, "db", "c",
                             input);
    } else if (kind == 1) {
      command = target_command(CommandType::kPatchItem, "db", "c", "\"p\"", "a", input);
    } else if (kind == 2) {
      command = target_command(CommandType::kDeleteItem, "db", "c", mutate(prng, "\"p\""), "a");
    } else {
      command = set_default_ttl_command("db", "c", mutate(prng, "100"));
    }
    const auto before = replicated_without_meta(*store_);
    OpResult result;
    if (prng.chance(1, 10)) {  // raw bytes: a mutated encoding of the command
      std::string bytes = mutate(prng, encode_command(command));
      Result<OpResult> applied = store_->apply_encoded(bytes, LogIndex(next_index_++), now);
      ASSERT_TRUE(applied.is_ok()) << applied.status().to_string();
      result = *applied;
    } else {
      result = apply(command, now);
    }
    now += 1000;
    ASSERT_LT(result.http_status(), 500) << "input: " << input << " -> " << result.message << " (seed " << seed << ")";
    if (result.http_status() >= 400) {
      ++rejected;
      ASSERT_FALSE(result.message.empty()) << "a 4xx must say why; input: " << input;
      ASSERT_TRUE(before == replicated_without_meta(*store_)) << "rejected input changed the store: " << input;
    } else {
      ++accepted;
    }
    // The item written by accepted inputs must read back as valid JSON that parses again.
    if (result.http_status() < 300 && !result.body.empty()) {
      OpResult listed = store_->reader().list_items(ListRequest{"db", "c", std::nullopt, kMaxListItems, ""}, now);
      ASSERT_EQ(listed.http_status(), 200) << listed.message;
    }
  }
  std::printf("fuzz: %d accepted, %d rejected\n", accepted, rejected);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace mayfly::storage::testing
