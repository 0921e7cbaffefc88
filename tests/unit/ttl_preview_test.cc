// StoreReader::preview_default_ttl (the dry-run and the guard of a defaultTtl change, docs/ttl.md, "Containers"): its
// figures equal what applying the change then does, item by item, on a real LevelDB; expired items and other
// containers are not counted.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "storage/json.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

constexpr int64_t kHour = 3600 * kSecond;

class TtlPreview : public StoreFixture {
 protected:
  OpResult create(const std::string& body, int64_t ts) {
    return apply(item_command(CommandType::kCreateItem, "db", "c", body), ts);
  }
  // How many of `ids` a point read finds at `now`.
  int64_t alive(const std::vector<std::string>& ids, int64_t now) {
    int64_t count = 0;
    for (const std::string& id : ids) count += read("\"p\"", id, now).http_status() == 200 ? 1 : 0;
    return count;
  }
};

TEST_F(TtlPreview, FiguresEqualWhatTheChangeThenExpires) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 prng(seed);
  make_container("-1");
  // Another container, which must not count.
  ASSERT_EQ(apply(create_container_command("db", "other", "/pk", "1"), kT0).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "other", R"({"id":"o","pk":"p"})"), kT0)
                .http_status(),
            201);
  // Items written over two days, with no ttl (inherit), their own ttl, or -1.
  std::vector<std::string> ids;
  int64_t ts = kT0;
  for (int i = 0; i < 300; ++i) {
    ts += static_cast<int64_t>(prng() % (600 * kSecond));
    const std::string id = "i" + std::to_string(i);
    std::string ttl;
    switch (prng() % 4) {
      case 0: ttl = ",\"ttl\":" + std::to_string(1 + prng() % (3 * 86400)); break;
      case 1: ttl = ",\"ttl\":-1"; break;
      default: break;
    }
    ASSERT_EQ(create("{\"id\":\"" + id + "\",\"pk\":\"p\"" + ttl + "}", ts).http_status(), 201);
    ids.push_back(id);
  }
  int64_t now = ts + kSecond;
  // Each change leaves its watermarks (once expired, always expired): the next preview starts from there.
  for (const std::string policy : {"40000", "86400", "3600", "-1"}) {
    now += kSecond;
    ASSERT_EQ(apply(Command{}, now).http_status(), 200);  // applied time = now
    const int64_t live_before = alive(ids, now);
    Result<boost::json::value> parsed = json::parse(policy);
    ASSERT_TRUE(parsed.is_ok());
    Result<ttl::DefaultTtl> new_policy = ttl::validate_default_ttl(json::ttl_literal(&*parsed));
    ASSERT_TRUE(new_policy.is_ok());
    Result<TtlChangePreview> preview = store_->reader().preview_default_ttl("db", "c", *new_policy);
    ASSERT_TRUE(preview.is_ok()) << preview.status().to_string();
    EXPECT_EQ(preview->at_micros, now);
    EXPECT_EQ(preview->live_items, live_before) << policy;

    // The real change at the same replicated time, then reads: what the preview said, item by item.
    ASSERT_EQ(apply(set_default_ttl_command("db", "c", policy), now).http_status(), 200);
    EXPECT_EQ(live_before - alive(ids, now), preview->at_once_items) << policy;
    EXPECT_EQ(live_before - alive(ids, now + kHour), preview->within_hour_items) << policy;
    EXPECT_EQ(live_before - alive(ids, now + 24 * kHour), preview->within_day_items) << policy;
    EXPECT_LE(preview->at_once_items, preview->within_hour_items);
    EXPECT_LE(preview->within_hour_items, preview->within_day_items);
    EXPECT_GE(preview->at_once_bytes, preview->at_once_items * 20);  // bytes are the records', at least their JSON
  }
}

TEST_F(TtlPreview, ExpiredItemsAndTtlOffAreNotLive) {
  make_container("100");
  ASSERT_EQ(create(R"({"id":"old","pk":"p"})", kT0).http_status(), 201);           // expires at kT0 + 100 s
  ASSERT_EQ(create(R"({"id":"young","pk":"p"})", kT0 + 90 * kSecond).http_status(), 201);
  ASSERT_EQ(create(R"({"id":"own","pk":"p","ttl":5})", kT0 + 90 * kSecond).http_status(), 201);
  const int64_t now = kT0 + 150 * kSecond;  // old and own expired already
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);
  Result<TtlChangePreview> preview = store_->reader().preview_default_ttl("db", "c", ttl::DefaultTtl::of_seconds(10));
  ASSERT_TRUE(preview.is_ok());
  EXPECT_EQ(preview->live_items, 1);     // young
  EXPECT_EQ(preview->at_once_items, 1);  // young: written 60 s ago, 10 s now
  // TTL off: nothing expires, and the own ttl stops counting — but what was expired stays expired.
  Result<TtlChangePreview> off = store_->reader().preview_default_ttl("db", "c", ttl::DefaultTtl::off());
  ASSERT_TRUE(off.is_ok());
  EXPECT_EQ(off->live_items, 1);
  EXPECT_EQ(off->within_day_items, 0);
  // An unknown container: kNotFound.
  EXPECT_EQ(store_->reader().preview_default_ttl("db", "nope", ttl::DefaultTtl::off()).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace mayfly::storage::testing
