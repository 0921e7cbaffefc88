// `_expiresAt` (docs/ttl.md, "_expiresAt"): the read-only system property E = _ts + effective TTL (seconds) on every
// item a write, read, read-feed page or query returns when its effective TTL is set; computed at read time (a
// defaultTtl change moves it), usable in WHERE and ORDER BY, and dropped from write bodies like `_ts`. Real LevelDB.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "query/executor.h"
#include "storage/document.h"
#include "tests/unit/query/query_fixture.h"
#include "ttl/ttl.h"

namespace mayfly::query::testing {
namespace {

namespace bj = boost::json;
using storage::CommandType;
using storage::ListRequest;

constexpr int64_t kTs = kT0 + 250'000;  // a write 0.25 s into the second kT0
constexpr int64_t kTsSeconds = kT0 / kSecond;

// The `_expiresAt` of one item body, or nullopt when it has none.
std::optional<int64_t> expires_at(const bj::value& item) {
  const bj::value* found = item.as_object().if_contains("_expiresAt");
  if (found == nullptr) return std::nullopt;
  EXPECT_TRUE(found->is_int64()) << bj::serialize(item);
  return found->is_int64() ? std::optional<int64_t>(found->as_int64()) : std::nullopt;
}
std::optional<int64_t> expires_at(const std::string& body) { return expires_at(bj::parse(body)); }

TEST(ExpiresAtPure, IsTsPlusTheEffectiveTtlInSeconds) {
  using ttl::DefaultTtl;
  using ttl::ItemTtl;
  // Every cell of the effective-TTL matrix (docs/ttl.md §3).
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::inherit(), kTs, DefaultTtl::off()), std::nullopt);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::inherit(), kTs, DefaultTtl::no_default()), std::nullopt);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::inherit(), kTs, DefaultTtl::of_seconds(10)), kTsSeconds + 10);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::never(), kTs, DefaultTtl::of_seconds(10)), std::nullopt);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::never(), kTs, DefaultTtl::off()), std::nullopt);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::of_seconds(7), kTs, DefaultTtl::off()), std::nullopt);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::of_seconds(7), kTs, DefaultTtl::no_default()), kTsSeconds + 7);
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::of_seconds(7), kTs, DefaultTtl::of_seconds(10)), kTsSeconds + 7);
  // The largest ttl: 64-bit, no overflow date.
  EXPECT_EQ(ttl::expires_at_seconds(ItemTtl::of_seconds(ttl::kMaxTtlSeconds), kTs, DefaultTtl::no_default()),
            kTsSeconds + ttl::kMaxTtlSeconds);
  // Exactly the instant the item disappears (ttl::alive): alive a microsecond before E, gone at E.
  const ttl::ContainerTtlState state{DefaultTtl::of_seconds(10)};
  const int64_t e = *ttl::expires_at_seconds(ItemTtl::inherit(), kTs, state.policy) * kSecond;
  EXPECT_TRUE(ttl::alive(ItemTtl::inherit(), kTs, state, e - 1));
  EXPECT_FALSE(ttl::alive(ItemTtl::inherit(), kTs, state, e));
}

class ExpiresAt : public QueryFixture {
 protected:
  // Every path's view of item `id` at `now`: the write result is checked by the caller; here read, list, query.
  struct Views {
    std::optional<int64_t> read, list, query, query_partition;
    bool present_everywhere = true;
  };
  Views views(const std::string& id, int64_t now) {
    Views out;
    const OpResult read_result = read("\"p\"", id, now);
    if (read_result.http_status() != 200) {
      out.present_everywhere = false;
      return out;
    }
    out.read = expires_at(read_result.body);
    ListRequest list;
    list.database = "db";
    list.container = "c";
    const OpResult listed = store_->reader().list_items(list, now);
    EXPECT_EQ(listed.http_status(), 200) << listed.message;
    bool in_list = false;
    for (const bj::value& item : elements(listed.body)) {
      if (item.as_object().at("id").as_string() == id) {
        out.list = expires_at(item);
        in_list = true;
      }
    }
    const std::vector<bj::value> queried =
        elements(body("SELECT * FROM c WHERE c.id = @id", now, "{\"@id\":\"" + id + "\"}"));
    const OpResult in_partition = query("SELECT * FROM c WHERE c.id = @id", now, "{\"@id\":\"" + id + "\"}", "\"p\"");
    EXPECT_EQ(in_partition.http_status(), 200) << in_partition.message;
    const std::vector<bj::value> partition_rows = elements(in_partition.body);
    out.present_everywhere = in_list && queried.size() == 1 && partition_rows.size() == 1;
    if (queried.size() == 1) out.query = expires_at(queried[0]);
    if (partition_rows.size() == 1) out.query_partition = expires_at(partition_rows[0]);
    return out;
  }

  void expect_everywhere(const std::string& id, int64_t now, std::optional<int64_t> expected) {
    const Views seen = views(id, now);
    ASSERT_TRUE(seen.present_everywhere) << id;
    EXPECT_EQ(seen.read, expected) << id << " (read)";
    EXPECT_EQ(seen.list, expected) << id << " (read feed)";
    EXPECT_EQ(seen.query, expected) << id << " (query)";
    EXPECT_EQ(seen.query_partition, expected) << id << " (single-partition query)";
  }
};

TEST_F(ExpiresAt, OnEveryPathForEveryInheritanceCaseAndMovedByADefaultTtlChange) {
  make_container("100");
  const OpResult own = create(R"({"id":"own","pk":"p","ttl":30})", kTs);
  const OpResult inherited = create(R"({"id":"inherited","pk":"p"})", kTs);
  const OpResult never = create(R"({"id":"never","pk":"p","ttl":-1})", kTs);
  // The write's answer carries it too.
  EXPECT_EQ(expires_at(own.body), kTsSeconds + 30);
  EXPECT_EQ(expires_at(inherited.body), kTsSeconds + 100);
  EXPECT_EQ(expires_at(never.body), std::nullopt);
  const int64_t now = kTs + kSecond;
  expect_everywhere("own", now, kTsSeconds + 30);
  expect_everywhere("inherited", now, kTsSeconds + 100);
  expect_everywhere("never", now, std::nullopt);

  // defaultTtl 500: the inherited instant moves (computed at read time, not stored); own and never do not.
  ASSERT_EQ(apply(storage::testing::set_default_ttl_command("db", "c", "500"), kTs + 2 * kSecond).http_status(), 200);
  expect_everywhere("inherited", now + 2 * kSecond, kTsSeconds + 500);
  expect_everywhere("own", now + 2 * kSecond, kTsSeconds + 30);
  // -1: on without a default — the inherited item has none, the own ttl still counts.
  ASSERT_EQ(apply(storage::testing::set_default_ttl_command("db", "c", "-1"), kTs + 3 * kSecond).http_status(), 200);
  expect_everywhere("inherited", now + 3 * kSecond, std::nullopt);
  expect_everywhere("own", now + 3 * kSecond, kTsSeconds + 30);
  // TTL off: nothing expires, so nobody has an instant.
  ASSERT_EQ(apply(storage::testing::set_default_ttl_command("db", "c", std::nullopt), kTs + 4 * kSecond).http_status(),
            200);
  expect_everywhere("inherited", now + 4 * kSecond, std::nullopt);
  expect_everywhere("own", now + 4 * kSecond, std::nullopt);
  expect_everywhere("never", now + 4 * kSecond, std::nullopt);
}

TEST_F(ExpiresAt, NoTtlAnywhereMeansNoProperty) {
  make_container(std::nullopt);
  const OpResult plain = create(R"({"id":"plain","pk":"p"})", kTs);
  EXPECT_EQ(expires_at(plain.body), std::nullopt);
  EXPECT_EQ(plain.body.find("_expiresAt"), std::string::npos) << plain.body;
  expect_everywhere("plain", kTs + kSecond, std::nullopt);
}

TEST_F(ExpiresAt, AClientSuppliedValueIsDroppedLikeTs) {
  make_container("100");
  const OpResult created = create(R"({"id":"x","pk":"p","ttl":20,"_expiresAt":1,"_ts":2})", kTs);
  EXPECT_EQ(expires_at(created.body), kTsSeconds + 20);
  expect_everywhere("x", kTs + kSecond, kTsSeconds + 20);
  // No client value is stored: with TTL off the property is gone entirely, not the client's 1.
  const OpResult off_container = [&] {
    EXPECT_EQ(apply(storage::testing::create_container_command("db", "off", "/pk"), kTs).http_status(), 201);
    return apply(storage::testing::item_command(CommandType::kCreateItem, "db", "off",
                                                R"({"id":"y","pk":"p","_expiresAt":123})"),
                 kTs);
  }();
  ASSERT_EQ(off_container.http_status(), 201) << off_container.message;
  EXPECT_EQ(off_container.body.find("_expiresAt"), std::string::npos) << off_container.body;
  // A replace that sends it back changes nothing about it.
  const OpResult replaced = apply(storage::testing::item_command(CommandType::kReplaceItem, "db", "c",
                                                                 R"({"id":"x","pk":"p","_expiresAt":5})"),
                                  kTs + 3 * kSecond);
  ASSERT_EQ(replaced.http_status(), 200) << replaced.message;
  EXPECT_EQ(expires_at(replaced.body), kTsSeconds + 3 + 100);  // no own ttl now: the default, from the new _ts
}

TEST_F(ExpiresAt, UsableInWhereAndOrderBy) {
  make_container("100");
  create(R"({"id":"a","pk":"p","ttl":50})", kTs);
  create(R"({"id":"b","pk":"q","ttl":10})", kTs);
  create(R"({"id":"c","pk":"p"})", kTs);  // +100
  create(R"({"id":"d","pk":"q","ttl":-1})", kTs);
  const int64_t now = kTs + kSecond;
  auto ids = [](const std::string& body) {
    std::string out;
    for (const bj::value& row : elements(body)) out += std::string(row.as_object().at("id").as_string()) + " ";
    return out;
  };
  EXPECT_EQ(ids(body("SELECT * FROM c WHERE c._expiresAt < @t ORDER BY c._expiresAt", now,
                     "{\"@t\":" + std::to_string(kTsSeconds + 60) + "}")),
            "b a ");
  EXPECT_EQ(ids(body("SELECT * FROM c WHERE IS_DEFINED(c._expiresAt) ORDER BY c._expiresAt DESC", now)), "c a b ");
  EXPECT_EQ(ids(body("SELECT * FROM c WHERE NOT IS_DEFINED(c._expiresAt)", now)), "d ");
  const std::vector<bj::value> projected = elements(body("SELECT VALUE c._expiresAt FROM c WHERE c.id = 'a'", now));
  ASSERT_EQ(projected.size(), 1u);
  EXPECT_EQ(projected[0].as_int64(), kTsSeconds + 50);
  // A defaultTtl change moves what the filter sees.
  ASSERT_EQ(apply(storage::testing::set_default_ttl_command("db", "c", "20"), kTs + 2 * kSecond).http_status(), 200);
  EXPECT_EQ(ids(body("SELECT * FROM c WHERE c._expiresAt < @t ORDER BY c._expiresAt", now + 2 * kSecond,
                     "{\"@t\":" + std::to_string(kTsSeconds + 60) + "}")),
            "b c a ");
}

}  // namespace
}  // namespace mayfly::query::testing
