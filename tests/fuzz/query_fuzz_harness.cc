#include "tests/fuzz/query_fuzz_harness.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/assert.h"
#include "query/engine.h"
#include "query/parser.h"
#include "storage/json.h"

namespace mayfly::query::fuzz {
namespace {

// Items as a read returns them, with positions in key order and distinct write times.
struct MemoryItem {
  std::string position;
  int64_t write_ts_micros;
  boost::json::value document;
};

const std::vector<MemoryItem>& items() {
  static const std::vector<MemoryItem> all = [] {
    const char* documents[] = {
        R"({"id":"a","pk":"p","n":1,"s":"apple","arr":[1,"x",null,{"k":[2]}],"o":{"k":1,"l":{"m":true}},"_ts":100})",
        R"({"id":"b","pk":"p","n":2.5,"s":"Ünïcødé 😀","arr":[],"o":{},"ttl":10,"_ts":101})",
        R"({"id":"c","pk":"q","n":null,"s":"","t":false,"_ts":102})",
        R"({"id":"d","pk":"q","n":"7","big":9223372036854775807,"neg":-9223372036854775808,"f":1e308,"_ts":103})",
        R"({"id":"e","pk":3,"n":-0.0,"s":"%_\\","arr":[[[[1]]]],"_ts":104})",
        R"({"id":"f","pk":null,"u":18446744073709551615,"_ts":105})",
    };
    std::vector<MemoryItem> out;
    int64_t ts = 100'000'000;
    for (const char* text : documents) {
      Result<boost::json::value> parsed = json::parse(text);
      MAYFLY_ASSERT(parsed.is_ok());
      out.push_back(MemoryItem{std::string(1, static_cast<char>('a' + out.size())), ts, *parsed});
      ts += 1'000'000;
    }
    return out;
  }();
  return all;
}

class MemorySource final : public ItemSource {
 public:
  explicit MemorySource(bool single) : single_(single) {}
  bool single_partition() const override { return single_; }
  Status scan(ScanOrder order, std::string_view resume_after, bool with_documents,
              const std::function<bool(SourceItem&)>& visit) override {
    std::vector<const MemoryItem*> ordered;
    for (const MemoryItem& item : items()) ordered.push_back(&item);
    if (order == ScanOrder::kTsDescending) std::reverse(ordered.begin(), ordered.end());
    for (const MemoryItem* item : ordered) {
      // Positions are one byte in key and _ts order alike (items are stored in both orders).
      if (!resume_after.empty()) {
        const bool after = order == ScanOrder::kTsDescending ? item->position < resume_after
                                                             : item->position > resume_after;
        if (!after) continue;
      }
      SourceItem source_item{item->position, item->write_ts_micros,
                             with_documents ? item->document : boost::json::value(nullptr)};
      if (!visit(source_item)) break;
    }
    return Status::ok();
  }
  Status lookup(std::string_view id, const std::function<void(SourceItem&)>& visit) override {
    for (const MemoryItem& item : items()) {
      if (item.document.as_object().at("id").as_string() == id) {
        SourceItem source_item{item.position, item.write_ts_micros, item.document};
        visit(source_item);
      }
    }
    return Status::ok();
  }

 private:
  bool single_;
};

void check_rejection(const Status& status, std::string_view text) {
  MAYFLY_ASSERT_MSG(status.code() == StatusCode::kInvalidArgument, "rejection is not a 400: %s for input [%.*s]",
                    status.to_string().c_str(), static_cast<int>(std::min<size_t>(text.size(), 200)), text.data());
  MAYFLY_ASSERT_MSG(!status.message().empty(), "a 400 without a message for input [%.*s]",
                    static_cast<int>(std::min<size_t>(text.size(), 200)), text.data());
}

}  // namespace

Outcome check_query_input(std::string_view text) {
  Outcome outcome;
  Result<Query> parsed = parse_query(text);
  if (!parsed.is_ok()) {
    check_rejection(parsed.status(), text);
    return outcome;
  }
  const Query& query = *parsed;
  for (const Projection& projection : query.projections) (void)canonical_text(*projection.expr);
  Parameters parameters;
  parameters["@a"] = 1;
  parameters["@s"] = "x";
  parameters["@arr"] = boost::json::array{1, "x", nullptr};
  parameters["@n"] = 2;
  Result<Evaluator> evaluator = Evaluator::create(query, parameters);
  if (!evaluator.is_ok()) {
    check_rejection(evaluator.status(), text);
    return outcome;
  }
  const Plan plan = make_plan(*evaluator, "/pk");
  EngineLimits limits;
  limits.max_items = 2;
  limits.max_items_examined_per_page = 4;
  limits.max_groups = 4;
  for (bool single : {false, true}) {
    MemorySource source(single);
    std::string continuation;
    for (int page = 0; page < 8; ++page) {
      Result<Page> ran = run_page(*evaluator, plan, source, continuation, "fuzz", limits);
      if (!ran.is_ok()) {
        check_rejection(ran.status(), text);
        break;
      }
      ++outcome.pages;
      Result<boost::json::value> body = json::parse(ran->body);
      MAYFLY_ASSERT_MSG(body.is_ok() && body->is_array(), "a page is not a JSON array: %s", ran->body.c_str());
      continuation = ran->continuation;
      if (continuation.empty()) break;
    }
  }
  // A continuation of some other query, and garbage, are 400s (or ignored for aggregates), never crashes.
  MemorySource source(false);
  Result<Page> foreign = run_page(*evaluator, plan, source, "7b2276223a317d", "fuzz", limits);
  if (!foreign.is_ok()) check_rejection(foreign.status(), text);
  outcome.accepted = true;
  return outcome;
}

}  // namespace mayfly::query::fuzz
