// LIKE and CONTAINS in linear time, and the work budget that stops a read (common/work_budget.h): the new LIKE gives
// the same answers as the straightforward backtracking matcher it replaced, on random patterns and texts (seeded),
// and a pathological text and pattern that took the old one minutes are answered at once.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "common/work_budget.h"
#include "query/evaluator.h"

namespace mayfly::query {
namespace {

// The matcher LIKE used before: correct, but O(text * pattern).
bool reference_like(std::string_view text, std::string_view pattern, std::optional<char> escape) {
  auto next_code_point = [](std::string_view s, size_t i) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    return i;
  };
  size_t t = 0, p = 0;
  std::optional<size_t> star_p, star_t;
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (escape && pc == *escape && p + 1 < pattern.size()) {
        if (text[t] == pattern[p + 1]) {
          ++t;
          p += 2;
          continue;
        }
      } else if (pc == '%') {
        star_p = ++p;
        star_t = t;
        continue;
      } else if (pc == '_') {
        t = next_code_point(text, t);
        p = next_code_point(pattern, p);
        continue;
      } else if (pc == text[t]) {
        ++t;
        ++p;
        continue;
      }
    }
    if (!star_p) return false;
    p = *star_p;
    t = next_code_point(text, *star_t);
    star_t = t;
  }
  while (p < pattern.size() && pattern[p] == '%') ++p;
  return p == pattern.size();
}

TEST(Like, SameAnswersAsTheBacktrackingMatcher) {
  std::mt19937 random(20261127);
  const std::vector<std::string> text_alphabet = {"a", "b", "\xC3\xA9", "%"};
  const std::vector<std::string> pattern_alphabet = {"a", "b", "\xC3\xA9", "%", "_", "\\"};
  int matches = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text, pattern;
    const int text_length = static_cast<int>(random() % 9), pattern_length = static_cast<int>(random() % 7);
    for (int i = 0; i < text_length; ++i) text += text_alphabet[random() % text_alphabet.size()];
    for (int i = 0; i < pattern_length; ++i) pattern += pattern_alphabet[random() % pattern_alphabet.size()];
    const std::optional<char> escape = random() % 2 == 0 ? std::optional<char>('\\') : std::nullopt;
    const bool expected = reference_like(text, pattern, escape);
    matches += expected ? 1 : 0;
    ASSERT_EQ(like_match(text, pattern, escape), expected)
        << "text '" << text << "' pattern '" << pattern << "' escape " << (escape ? "\\" : "none");
  }
  EXPECT_GT(matches, 1000);  // the random cases are not all misses
}

TEST(Like, FindSubstringFindsTheFirstOccurrence) {
  std::mt19937 random(7);
  for (int round = 0; round < 20000; ++round) {
    std::string text, needle;
    for (int i = static_cast<int>(random() % 12); i > 0; --i) text += static_cast<char>('a' + random() % 2);
    for (int i = static_cast<int>(random() % 4); i > 0; --i) needle += static_cast<char>('a' + random() % 2);
    const size_t from = random() % (text.size() + 2);
    const size_t expected = from > text.size() ? std::string_view::npos : std::string_view(text).find(needle, from);
    ASSERT_EQ(find_substring(text, needle, from), expected) << text << " / " << needle << " from " << from;
  }
}

TEST(Like, PathologicalInputsAreLinear) {
  // 'a' * 262k against '%' + 'a' * 120k + 'b' + '%' (and CONTAINS of the same): the old matcher compared ~3e10 bytes.
  const std::string text(262144, 'a');
  const std::string needle = std::string(120000, 'a') + "b";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(like_match(text, "%" + needle + "%", std::nullopt));
  EXPECT_FALSE(like_match(text, "%" + needle, std::nullopt));
  EXPECT_EQ(find_substring(text, needle), std::string_view::npos);
  EXPECT_TRUE(like_match(text, "%" + std::string(120000, 'a') + "%", std::nullopt));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST(Like, UnderscoreSegmentsAreChargedAndStopped) {
  // A segment with '_' is tried at each position: quadratic, but every attempt is charged, so a budget ends it.
  const std::string text(200000, 'a');
  const std::string pattern = "%" + std::string(50000, '_') + "b%";
  std::atomic<bool> cancel{false};
  WorkBudget budget(10'000'000, WorkBudget::Clock::time_point::max(), &cancel, nullptr);
  {
    ScopedWorkBudget scoped(budget);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(like_match(text, pattern, std::nullopt));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
  EXPECT_TRUE(budget.stopped());
  EXPECT_TRUE(budget.over_budget());
  EXPECT_EQ(budget.status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkBudget, CancellationAndDeadlineStopTheRead) {
  std::atomic<bool> cancel{false};
  WorkBudget budget(kMaxWorkStepsPerPage, WorkBudget::Clock::time_point::max(), &cancel, nullptr);
  EXPECT_TRUE(budget.charge(10));
  cancel = true;
  bool stopped = false;
  for (int i = 0; i < 100 && !stopped; ++i) stopped = !budget.charge(WorkBudget::kCheckEverySteps / 10);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(budget.status().code(), StatusCode::kUnavailable);

  WorkBudget late(kMaxWorkStepsPerPage, WorkBudget::Clock::now(), nullptr, nullptr);
  EXPECT_FALSE(late.check());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mayfly::query
