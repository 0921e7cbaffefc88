// The TTL forecast (docs/ttl.md, "Forecast"): StoreReader::forecast_expiry's buckets and backlog equal a
// naive count over the stored item records (ttl::alive at each bucket's edges) on a real LevelDB, across random items
// (own ttl, inherited defaultTtl, -1), policy changes that leave watermark-killed items behind, TTL off, items
// exactly on bucket edges, and partly collected backlogs; the entry cap answers "truncated"; and the projection's
// arithmetic (ttl::project_backlog) on cases worked by hand and against a second-by-second simulation.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "storage/layout.h"
#include "tests/unit/store_fixture.h"
#include "ttl/forecast.h"
#include "ttl/ttl.h"

namespace mayfly::storage::testing {
namespace {

constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 3600 * kSecond;

class TtlForecast : public StoreFixture {
 protected:
  // The naive count: every stored item of db/c, judged by ttl::alive under the container's state at `now`.
  struct Naive {
    ttl::ExpiryHistogram histogram;
    int64_t backlog_items = 0, backlog_bytes = 0;
  };
  Naive naive(const std::vector<std::string>& ids, int64_t now) {
    Naive out;
    std::optional<ContainerRecord> record = store_->reader().container_record("db", "c");
    EXPECT_TRUE(record.has_value());
    for (const std::string& id : ids) {
      const std::string key = item_key(record->crid, "\"p\"", id);
      Result<std::optional<std::string>> raw = store_->reader().get_raw(key, nullptr);
      EXPECT_TRUE(raw.is_ok());
      if (!raw->has_value()) continue;  // collected (or never written)
      Result<ItemRecord> item = decode_item(**raw);
      EXPECT_TRUE(item.is_ok());
      const int64_t bytes = static_cast<int64_t>(key.size() + (*raw)->size());
      auto alive = [&](int64_t at) { return ttl::alive(item->ttl, item->write_ts_micros, record->ttl, at); };
      if (!alive(now)) {
        // Dead already but still stored: backlog — unless it never expires (-1 items are in no index).
        out.backlog_items += 1;
        out.backlog_bytes += bytes;
        continue;
      }
      for (int i = 0; i < ttl::kForecastMinutes; ++i) {
        if (alive(now + i * kMinute) && !alive(now + (i + 1) * kMinute)) {
          out.histogram.minutes[i].items += 1;
          out.histogram.minutes[i].bytes += bytes;
        }
      }
      for (int j = 0; j < ttl::kForecastHours; ++j) {
        if (alive(now + j * kHour) && !alive(now + (j + 1) * kHour)) {
          out.histogram.hours[j].items += 1;
          out.histogram.hours[j].bytes += bytes;
        }
      }
    }
    return out;
  }

  void expect_forecast_equals_naive(const std::vector<std::string>& ids, int64_t now, const std::string& when) {
    Result<ExpiryForecast> forecast = store_->reader().forecast_expiry("db", "c", 1'000'000);
    ASSERT_TRUE(forecast.is_ok()) << forecast.status().to_string();
    EXPECT_EQ(forecast->at_micros, now) << when;
    EXPECT_FALSE(forecast->truncated) << when;
    const Naive expected = naive(ids, now);
    for (int i = 0; i < ttl::kForecastMinutes; ++i) {
      EXPECT_EQ(forecast->histogram.minutes[i], expected.histogram.minutes[i])
          << when << ": minute " << i << ": " << forecast->histogram.minutes[i].items << " vs naive "
          << expected.histogram.minutes[i].items;
    }
    for (int j = 0; j < ttl::kForecastHours; ++j) {
      EXPECT_EQ(forecast->histogram.hours[j], expected.histogram.hours[j])
          << when << ": hour " << j << ": " << forecast->histogram.hours[j].items << " vs naive "
          << expected.histogram.hours[j].items;
    }
    EXPECT_EQ(forecast->backlog_items, expected.backlog_items) << when;
    EXPECT_EQ(forecast->backlog_bytes, expected.backlog_bytes) << when;
    int64_t minutes = 0;
    for (const ttl::ExpiryBucket& bucket : forecast->histogram.minutes) minutes += bucket.items;
    EXPECT_EQ(minutes, forecast->histogram.hours[0].items) << when;
  }
};

TEST_F(TtlForecast, BucketsEqualANaiveCountOfTheItems) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 prng(seed);
  make_container("600");
  // Another container's items must not count.
  ASSERT_EQ(apply(create_container_command("db", "other", "/pk", "60"), kT0).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "other", R"({"id":"o","pk":"p"})"), kT0 + kSecond)
                .http_status(),
            201);
  std::vector<std::string> ids;
  int64_t ts = kT0 + 2 * kSecond;
  int next_id = 0;
  // Writes `count` items from `ts` on: inherit, own ttl (minutes to two days), -1; a fraction of a second apart.
  auto write_items = [&](int count) {
    for (int i = 0; i < count; ++i) {
      ts += static_cast<int64_t>(prng() % (20 * kSecond));
      const std::string id = "i" + std::to_string(next_id++);
      std::string ttl;
      switch (prng() % 5) {
        case 0: ttl = ",\"ttl\":" + std::to_string(1 + prng() % 7200); break;
        case 1: ttl = ",\"ttl\":" + std::to_string(1 + prng() % (2 * 86400)); break;
        case 2: ttl = ",\"ttl\":-1"; break;
        default: break;
      }
      const std::string padding(prng() % 200, 'x');  // varied sizes for the byte figures
      ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                   "{\"id\":\"" + id + "\",\"pk\":\"p\",\"pad\":\"" + padding + "\"" + ttl + "}"),
                      ts)
                    .http_status(),
                201);
      ids.push_back(id);
    }
  };
  // Items whose instant lies exactly on a bucket edge of a forecast at whole second `at`: own ttl so that
  // E = at + k min (k = 0: dead at `at`, backlog), and k h.
  auto write_edge_items = [&](int64_t at) {
    ts += kSecond;
    for (int64_t edge : {int64_t{0}, kMinute, 2 * kMinute, 59 * kMinute, kHour, 2 * kHour, 24 * kHour,
                         24 * kHour + kSecond}) {
      const int64_t ttl_seconds = (at + edge) / kSecond - ttl::ts_seconds(ts);
      ASSERT_GT(ttl_seconds, 0);
      const std::string id = "e" + std::to_string(next_id++);
      ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                   "{\"id\":\"" + id + "\",\"pk\":\"p\",\"ttl\":" + std::to_string(ttl_seconds) + "}"),
                      ts)
                    .http_status(),
                201);
      ids.push_back(id);
    }
  };
  write_items(400);
  // A forecast at a whole second, with items exactly on its edges.
  int64_t now = (ts / kSecond + 120) * kSecond;
  write_edge_items(now);
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);  // applied time = now
  expect_forecast_equals_naive(ids, now, "defaultTtl 600");

  // Part of the backlog collected: what is left still counts as backlog, the rest is gone.
  Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", now, 25);
  ASSERT_TRUE(collected.is_ok());
  expect_forecast_equals_naive(ids, now, "defaultTtl 600, 25 collected");

  // A longer default: the inheriting items that had expired stay dead (watermark), the others live longer.
  now += 7 * kSecond + 123'456;  // not a whole second
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "5400"), now).http_status(), 200);
  ts = now;
  write_items(150);
  now = ts + kSecond;
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);
  expect_forecast_equals_naive(ids, now, "defaultTtl 5400 after 600");

  // -1: only items with their own ttl expire; TTL off: nothing (own-ttl items already dead stay dead: watermark).
  now += kSecond;
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "-1"), now).http_status(), 200);
  ts = now;
  write_items(100);
  now = ts + kSecond;
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);
  expect_forecast_equals_naive(ids, now, "defaultTtl -1");
  now += kSecond;
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), now).http_status(), 200);
  ts = now;
  write_items(50);
  now = ts + kSecond;
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);
  expect_forecast_equals_naive(ids, now, "TTL off");
  // On again, short: much of it expires at once (backlog) and the rest within minutes; edges again.
  now += kSecond;
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "900"), now).http_status(), 200);
  ts = now;
  write_items(100);
  now = (ts / kSecond + 30) * kSecond;
  write_edge_items(now);
  ASSERT_EQ(apply(Command{}, now).http_status(), 200);
  expect_forecast_equals_naive(ids, now, "defaultTtl 900 after off");
  // Later, as time passes: the same items, other buckets.
  for (int64_t later : {kMinute, 17 * kMinute + 500'000, 5 * kHour}) {
    ASSERT_EQ(apply(Command{}, now + later).http_status(), 200);
    expect_forecast_equals_naive(ids, now + later, "defaultTtl 900, +" + std::to_string(later / kSecond) + " s");
  }
}

TEST_F(TtlForecast, EntryCapAnswersTruncated) {
  make_container("3600");
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                 "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p\"}"),
                    kT0 + i * kSecond)
                  .http_status(),
              201);
  }
  ASSERT_EQ(apply(Command{}, kT0 + 3600 * kSecond + 10 * kSecond).http_status(), 200);  // 10 or 11 expired
  Result<ExpiryForecast> full = store_->reader().forecast_expiry("db", "c", 1000);
  ASSERT_TRUE(full.is_ok());
  EXPECT_FALSE(full->truncated);
  EXPECT_EQ(full->entries_read, 50);
  EXPECT_EQ(full->backlog_items + full->histogram.hours[0].items, 50);
  Result<ExpiryForecast> capped = store_->reader().forecast_expiry("db", "c", 20);
  ASSERT_TRUE(capped.is_ok());
  EXPECT_TRUE(capped->truncated);
  EXPECT_EQ(capped->entries_read, 20);
  EXPECT_EQ(capped->histogram.hours[0].items, 20);  // the next hour is read first
  Result<ExpiryForecast> exact = store_->reader().forecast_expiry("db", "c", 50);
  ASSERT_TRUE(exact.is_ok());
  EXPECT_FALSE(exact->truncated);
  EXPECT_EQ(store_->reader().forecast_expiry("db", "missing", 10).status().code(), StatusCode::kNotFound);
}

// The projection's model, second by second: each minute's items arrive at its start, the collector deletes
// `capacity` a second. Peak and drain as project_backlog defines them.
ttl::BacklogProjection simulate(int64_t backlog, const ttl::ExpiryHistogram& histogram, double capacity) {
  ttl::BacklogProjection out;
  double level = static_cast<double>(backlog);
  std::optional<int64_t> peak_second;
  for (int64_t second = 0; second < 24 * 3600; ++second) {
    const int64_t minute = second / 60;
    if (second % 60 == 0 && minute < 24 * 60) {
      level += minute < 60 ? static_cast<double>(histogram.minutes[minute].items)
                           : static_cast<double>(histogram.hours[minute / 60].items) / 60.0;
      if (level > out.peak_items + 1e-9) {
        out.peak_items = level;
        out.peak_at_seconds = second;
        peak_second = second;
        out.drain_seconds.reset();
      }
    }
    if (peak_second && !out.drain_seconds) {
      if (level <= capacity + 1e-9) {
        out.drain_seconds = static_cast<double>(second - *peak_second) + (capacity > 0 ? level / capacity : 0);
      }
    }
    level = std::max(0.0, level - capacity);
  }
  if (out.peak_items == 0) out.drain_seconds = 0.0;
  return out;
}

TEST(BacklogProjection, HandWorkedCases) {
  ttl::ExpiryHistogram none;
  ttl::BacklogProjection p = ttl::project_backlog(0, none, 10);
  EXPECT_EQ(p.peak_items, 0);
  EXPECT_EQ(p.drain_seconds, 0.0);

  p = ttl::project_backlog(600, none, 10);  // 600 items now at 10/s: one minute
  EXPECT_EQ(p.peak_items, 600);
  EXPECT_EQ(p.peak_at_seconds, 0);
  EXPECT_DOUBLE_EQ(*p.drain_seconds, 60);

  ttl::ExpiryHistogram storm;
  storm.minutes[5].items = 1200;  // 1200 items in minute 5 at 600 a minute: 120 s
  storm.hours[0].items = 1200;
  p = ttl::project_backlog(0, storm, 10);
  EXPECT_EQ(p.peak_items, 1200);
  EXPECT_EQ(p.peak_at_seconds, 300);
  EXPECT_DOUBLE_EQ(*p.drain_seconds, 120);
  p = ttl::project_backlog(100, storm, 10);  // the backlog is gone long before minute 5
  EXPECT_EQ(p.peak_items, 1200);
  EXPECT_DOUBLE_EQ(*p.drain_seconds, 120);
  EXPECT_FALSE(ttl::project_backlog(0, storm, 0).drain_seconds.has_value());  // no capacity: never

  ttl::ExpiryHistogram later;
  later.hours[2].items = 3600;  // an even 60 a minute in hour 2, worked off each minute at 1/s
  p = ttl::project_backlog(0, later, 1);
  EXPECT_DOUBLE_EQ(p.peak_items, 60);
  EXPECT_EQ(p.peak_at_seconds, 7200);
  EXPECT_DOUBLE_EQ(*p.drain_seconds, 60);

  EXPECT_FALSE(ttl::project_backlog(1'000'000'000, none, 1).drain_seconds.has_value());  // not within 24 h

  ttl::ExpiryHistogram edges;
  EXPECT_FALSE(edges.add(kT0, kT0, 1));                         // E = now: dead already
  EXPECT_TRUE(edges.add(kT0, kT0 + 1, 1));                      // just after now: minute 0
  EXPECT_TRUE(edges.add(kT0, kT0 + kMinute, 1));                // exactly +1 min: still minute 0
  EXPECT_TRUE(edges.add(kT0, kT0 + kMinute + 1, 1));            // minute 1
  EXPECT_TRUE(edges.add(kT0, kT0 + 24 * kHour, 1));             // the day's last instant: hour 23
  EXPECT_FALSE(edges.add(kT0, kT0 + 24 * kHour + 1, 1));        // beyond the day
  EXPECT_EQ(edges.minutes[0].items, 2);
  EXPECT_EQ(edges.minutes[1].items, 1);
  EXPECT_EQ(edges.hours[0].items, 3);
  EXPECT_EQ(edges.hours[23].items, 1);
}

TEST(BacklogProjection, EqualsASecondBySecondSimulation) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 prng(seed);
  for (int round = 0; round < 200; ++round) {
    ttl::ExpiryHistogram histogram;
    for (int i = 0; i < 60; ++i) {
      if (prng() % 4 == 0) histogram.minutes[i].items = static_cast<int64_t>(prng() % 5000);
      histogram.hours[0].items += histogram.minutes[i].items;
    }
    for (int j = 1; j < 24; ++j) {
      if (prng() % 3 == 0) histogram.hours[j].items = static_cast<int64_t>(prng() % 200'000);
    }
    const int64_t backlog = prng() % 2 == 0 ? 0 : static_cast<int64_t>(prng() % 100'000);
    const double capacity = static_cast<double>(prng() % 200);
    const ttl::BacklogProjection got = ttl::project_backlog(backlog, histogram, capacity);
    const ttl::BacklogProjection want = simulate(backlog, histogram, capacity);
    SCOPED_TRACE("round " + std::to_string(round) + " capacity " + std::to_string(capacity));
    EXPECT_NEAR(got.peak_items, want.peak_items, 1e-6);
    EXPECT_EQ(got.peak_at_seconds, want.peak_at_seconds);
    ASSERT_EQ(got.drain_seconds.has_value(), want.drain_seconds.has_value());
    if (got.drain_seconds) {
      EXPECT_NEAR(*got.drain_seconds, *want.drain_seconds, 1e-6);
    }
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
