// `mayfly item import/export` without a server: JSONL parsing (blank lines, CRLF, a BOM, bad and overlong lines), the
// failure summary, the progress lines, and the export line format that import reads back.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "client/cli_export.h"
#include "client/cli_import.h"

namespace mayfly::client {
namespace {

TEST(JsonlReader, LinesBlankLinesCrLfBomAndErrors) {
  std::istringstream in(
      "\xEF\xBB\xBF{\"id\":\"a\"}\n"
      "\n"
      "   \r\n"
      "{\"id\":\"b\", \"n\": 1.50}\r\n"
      "[1,2]\n"
      "{\"id\": \n"
      "{\"id\":\"c\"}");  // no final newline
  JsonlReader reader(in);
  auto a = reader.next();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->line_number, 1u);
  EXPECT_EQ(a->text, "{\"id\":\"a\"}");
  EXPECT_EQ(a->error, "");
  EXPECT_EQ(a->bytes, 14u);  // BOM and newline included
  auto b = reader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->line_number, 4u);  // blank lines skipped, still counted
  EXPECT_EQ(b->text, "{\"id\":\"b\", \"n\": 1.50}");
  EXPECT_EQ(b->error, "");
  auto array = reader.next();
  ASSERT_TRUE(array.has_value());
  EXPECT_EQ(array->line_number, 5u);
  EXPECT_NE(array->error.find("not a JSON object"), std::string::npos);
  auto broken = reader.next();
  ASSERT_TRUE(broken.has_value());
  EXPECT_EQ(broken->line_number, 6u);
  EXPECT_NE(broken->error.find("not JSON"), std::string::npos);
  auto c = reader.next();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->line_number, 7u);
  EXPECT_EQ(c->text, "{\"id\":\"c\"}");
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_FALSE(reader.failed());
}

TEST(JsonlReader, AnOverlongLineIsReportedNotHeld) {
  std::istringstream in("{\"id\":\"" + std::string(100, 'x') + "\"}\n{\"id\":\"ok\"}\n");
  JsonlReader reader(in, 32);
  auto long_line = reader.next();
  ASSERT_TRUE(long_line.has_value());
  EXPECT_NE(long_line->error.find("longer than 32 bytes"), std::string::npos);
  EXPECT_TRUE(long_line->text.empty());
  EXPECT_EQ(long_line->bytes, 110u);
  auto next = reader.next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->line_number, 2u);
  EXPECT_EQ(next->text, "{\"id\":\"ok\"}");
}

TEST(ImportTally, FailuresCountedByStatusWithTheFirstExamples) {
  ImportTally tally;
  tally.succeeded(10);
  tally.succeeded(10);
  tally.failed(3, 10, "409", "item 'a' already exists");
  tally.failed(5, 10, "invalid", "not JSON");
  tally.failed(9, 10, "409", "item 'b' already exists");
  EXPECT_EQ(tally.succeeded_count(), 2u);
  EXPECT_EQ(tally.failed_count(), 3u);
  EXPECT_EQ(tally.done_bytes(), 50u);
  EXPECT_EQ(tally.failures_by_status().at("409"), 2u);
  EXPECT_EQ(tally.failures_by_status().at("invalid"), 1u);
  ASSERT_EQ(tally.failure_examples().size(), 3u);
  EXPECT_EQ(tally.failure_examples()[0], "line 3: 409 conflict: item 'a' already exists");
  EXPECT_EQ(tally.summary_json(2.0), R"({"imported":2,"failed":3,"failuresByStatus":{"409":2,"invalid":1},"seconds":2.000})");
  EXPECT_EQ(tally.summary_text(5.0), "imported 2 items in 5.0 s (1 items/s); 3 failed: 409 conflict ×2, invalid ×1\n");

  ImportTally clean;
  clean.succeeded(1);
  EXPECT_EQ(clean.summary_text(1.0), "imported 1 item in 1.0 s (1 items/s); none failed\n");
  for (int i = 0; i < 20; ++i) clean.failed(i, 1, "429", "throttled");
  EXPECT_EQ(clean.failure_examples().size(), kImportFailureExamples);
}

TEST(ImportProgressLine, BarRateEtaAndFailures) {
  const ImportProgress half{.items = 1200, .failed = 2, .done_bytes = 500, .total_bytes = 1000, .seconds = 3.0};
  EXPECT_EQ(progress_bar_line(half), "[############------------]  50%  1200 items  400 items/s  ETA 0:03  2 failed");
  EXPECT_EQ(progress_plain_line(half), "import: 1200 items (50%), 400 items/s, ETA 3 s, 2 failed");
  // Standard input: no size, so no bar, percentage or ETA.
  const ImportProgress unknown{.items = 10, .failed = 0, .done_bytes = 500, .total_bytes = 0, .seconds = 2.0};
  EXPECT_EQ(progress_bar_line(unknown), "10 items  5 items/s");
  EXPECT_EQ(progress_plain_line(unknown), "import: 10 items, 5 items/s, 0 failed");
}

TEST(ExportLine, CompactKeepsNumbersAndStripsSystemPropertiesOnRequest) {
  const std::string item = R"({"id": "a", "n": 1.50, "nested": {"_ts": 1}, "_rid": "1.2", "_etag": "\"3\"", "_ts": 17})";
  EXPECT_EQ(export_line(item, false), R"({"id":"a","n":1.50,"nested":{"_ts":1},"_rid":"1.2","_etag":"\"3\"","_ts":17})");
  EXPECT_EQ(export_line(item, true), R"({"id":"a","n":1.50,"nested":{"_ts":1}})");
  // What export writes, import reads as one item per line.
  std::istringstream in(export_line(item, false) + "\n" + export_line(item, true) + "\n");
  JsonlReader reader(in);
  for (int i = 0; i < 2; ++i) {
    auto line = reader.next();
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(line->error, "");
  }
  EXPECT_FALSE(reader.next().has_value());
}

}  // namespace
}  // namespace mayfly::client
