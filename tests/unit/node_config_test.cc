// mayflyd's flags: parsing, range checks with a usage error (exit 2), and the address a node reports for itself.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "node/config.h"
#include "node/request.h"

namespace mayfly::node {
namespace {

ParsedFlags parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mayflyd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return parse_flags(static_cast<int>(argv.size()), argv.data());
}

const std::vector<std::string> kBase = {"--id", "2", "--listen", "0.0.0.0:7100", "--data", "/tmp/x",
                                        "--peers", "1=mayfly1:7100,2=mayfly2:7100,3=mayfly3:7100", "--insecure"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> args = kBase;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(NodeConfig, ClockIsRealOrVirtual) {
  EXPECT_FALSE(parse(kBase).config.virtual_clock);
  EXPECT_FALSE(parse(with({"--clock", "real"})).config.virtual_clock);
  const ParsedFlags virtual_clock = parse(with({"--clock", "virtual"}));
  EXPECT_EQ(virtual_clock.exit_code, -1) << virtual_clock.output;
  EXPECT_TRUE(virtual_clock.config.virtual_clock);
  const ParsedFlags bad = parse(with({"--clock", "fake"}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--clock"), std::string::npos) << bad.output;
}

TEST(NodeConfig, ADataDirectoryKeepsItsClockMode) {
  const std::string dir = std::filesystem::temp_directory_path() / ("mayfly-clock-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A new store records its mode; the same mode is accepted again, the other one refused with the fix.
  ASSERT_TRUE(check_data_clock_mode(dir, true, true).is_ok());
  EXPECT_TRUE(check_data_clock_mode(dir, true, false).is_ok());
  const Status refused = check_data_clock_mode(dir, false, false);
  EXPECT_EQ(refused.code(), StatusCode::kPreconditionFailed);
  EXPECT_NE(refused.message().find("created with --clock virtual"), std::string::npos) << refused.message();
  // A store from before the file existed ran on the real clock.
  std::filesystem::remove(dir + "/clock");
  EXPECT_EQ(check_data_clock_mode(dir, true, false).code(), StatusCode::kPreconditionFailed);
  EXPECT_TRUE(check_data_clock_mode(dir, false, false).is_ok());
  // A file that says something else is corruption, not a guess.
  { std::ofstream(dir + "/clock") << "sundial\n"; }
  EXPECT_EQ(check_data_clock_mode(dir, false, false).code(), StatusCode::kCorruption);
  std::filesystem::remove_all(dir);
}

TEST(AdvanceClock, DurationsArePositiveWithAUnitAndBounded) {
  EXPECT_EQ(*parse_clock_advance("90s"), 90'000'000);
  EXPECT_EQ(*parse_clock_advance("90"), 90'000'000);
  EXPECT_EQ(*parse_clock_advance("1500ms"), 1'500'000);
  EXPECT_EQ(*parse_clock_advance("30m"), 1'800'000'000);
  EXPECT_EQ(*parse_clock_advance("2h"), 7'200'000'000);
  EXPECT_EQ(*parse_clock_advance("1d"), 86'400'000'000);
  EXPECT_EQ(*parse_clock_advance("2147483647s"), int64_t{2147483647} * 1'000'000);
  EXPECT_EQ(*parse_clock_advance("24855d"), int64_t{24855} * 86'400'000'000);  // just under the bound
  for (const char* bad : {"", "0", "0s", "-1", "-5s", "+5s", "abc", "5x", "1.5s", "s", "90 s", " 90s", "2147483648s",
                          "24856d", "99999999999999999999"}) {
    const Result<int64_t> parsed = parse_clock_advance(bad);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    if (!parsed.is_ok()) {
      EXPECT_NE(parsed.status().message().find("positive duration"), std::string::npos);
    }
  }
}

TEST(NodeConfig, AWildcardListenerAdvertisesItsPeersEntry) {
  const ParsedFlags parsed = parse(kBase);
  ASSERT_LT(parsed.exit_code, 0) << parsed.output;
  EXPECT_EQ(advertised_address(parsed.config), "mayfly2:7100")
      << "0.0.0.0 is no address a client can follow from a cluster status";
}

TEST(NodeConfig, AdvertiseWinsAndASpecificListenerIsItsOwnAddress) {
  EXPECT_EQ(advertised_address(parse(with({"--advertise", "db2.example:7100"})).config), "db2.example:7100");
  const ParsedFlags specific =
      parse({"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers", "1=127.0.0.1:7101"});
  ASSERT_LT(specific.exit_code, 0) << specific.output;
  EXPECT_EQ(advertised_address(specific.config), "127.0.0.1:7101");
}

TEST(NodeConfig, CollectorFlagsAreRangeChecked) {
  const ParsedFlags ok = parse(with({"--gc-ru-share", "0.5", "--gc-batch-items-max", "5000", "--gc-interval-ms", "50"}));
  ASSERT_LT(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.config.gc_ru_share, 0.5);
  EXPECT_EQ(ok.config.gc_batch_items_max, 5000u);
  EXPECT_EQ(ok.config.gc_interval_ms, 50);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--gc-ru-share", "1.5"}, {"--gc-ru-share", "-0.1"}, {"--gc-batch-items-max", "0"},
           {"--gc-interval-ms", "0"}}) {
    const ParsedFlags parsed = parse(with(bad));
    EXPECT_EQ(parsed.exit_code, 2) << bad[0] << " " << bad[1] << " must be a usage error";
    EXPECT_NE(parsed.output.find(bad[0]), std::string::npos) << parsed.output;
  }
}

TEST(NodeConfig, CompactionFlagsAreRangeChecked) {
  const ParsedFlags defaults = parse(with({}));
  ASSERT_LT(defaults.exit_code, 0) << defaults.output;
  EXPECT_EQ(defaults.config.gc_compact_interval_ms, 5000);
  EXPECT_EQ(defaults.config.gc_compact_min_deletes, 10'000u);
  const ParsedFlags ok = parse(with({"--gc-compact-interval-ms", "0", "--gc-compact-min-deletes", "500"}));
  ASSERT_LT(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.config.gc_compact_interval_ms, 0);  // off
  EXPECT_EQ(ok.config.gc_compact_min_deletes, 500u);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--gc-compact-interval-ms", "-1"}, {"--gc-compact-interval-ms", "86400001"},
           {"--gc-compact-min-deletes", "0"}}) {
    const ParsedFlags parsed = parse(with(bad));
    EXPECT_EQ(parsed.exit_code, 2) << bad[0] << " " << bad[1] << " must be a usage error";
    EXPECT_NE(parsed.output.find(bad[0]), std::string::npos) << parsed.output;
  }
}

TEST(NodeConfig, StoreMemoryFlagsHaveDefaultsAndAreRangeChecked) {
  const ParsedFlags defaults = parse(with({}));
  ASSERT_LT(defaults.exit_code, 0) << defaults.output;
  EXPECT_EQ(defaults.config.block_cache_mb, 64u);
  EXPECT_EQ(defaults.config.max_open_tables, 990);
  EXPECT_EQ(defaults.config.table_block_kb, 16u);
  const ParsedFlags ok = parse(with({"--block-cache-mb", "8", "--max-open-tables", "200", "--table-block-kb", "4"}));
  ASSERT_LT(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.config.block_cache_mb, 8u);
  EXPECT_EQ(ok.config.max_open_tables, 200);
  EXPECT_EQ(ok.config.table_block_kb, 4u);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--block-cache-mb", "0"}, {"--max-open-tables", "10"}, {"--max-open-tables", "100001"},
           {"--table-block-kb", "0"}, {"--table-block-kb", "2048"}}) {
    const ParsedFlags parsed = parse(with(bad));
    EXPECT_EQ(parsed.exit_code, 2) << bad[0] << " " << bad[1] << " must be a usage error";
    EXPECT_NE(parsed.output.find(bad[0]), std::string::npos) << parsed.output;
  }
}

// deploy/mayflyd.example.conf is read by the same parser: a key that is not a flag, or a value out of range, fails.
TEST(NodeConfig, TheExampleConfigFileParses) {
  const ParsedFlags parsed = parse({"--config", MAYFLY_EXAMPLE_CONF, "--insecure"});
  ASSERT_LT(parsed.exit_code, 0) << parsed.output;
  EXPECT_EQ(parsed.config.id.value(), 1u);
  EXPECT_EQ(parsed.config.checkpoint_interval_entries, 20000u);
  EXPECT_EQ(parsed.config.table_block_kb, 16u);
  // And a key that is not a flag is refused, so the file cannot drift from the flags unnoticed.
  const std::string bad = "/tmp/mayfly-node-config-test-" + std::to_string(getpid()) + ".conf";
  {
    std::ofstream out(bad);
    out << "id = 1\nlisten = \"127.0.0.1:7100\"\npeers = \"1=127.0.0.1:7100\"\ndata = \"/tmp/x\"\n"
        << "block-cache-megabytes = 8\n";
  }
  const ParsedFlags refused = parse({"--config", bad});
  std::filesystem::remove(bad);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("block-cache-megabytes"), std::string::npos) << refused.output;
}

TEST(NodeConfig, RunningOpenOnANonLoopbackAddressNeedsInsecure) {
  const std::vector<std::string> open = {"--id", "1", "--listen", "0.0.0.0:7100", "--data", "/tmp/x", "--peers",
                                         "1=mayfly1:7100"};
  const ParsedFlags refused = parse(open);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("--keys-file"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--insecure"), std::string::npos) << refused.output;
  // Keys without a cluster secret are still open to peers.
  std::vector<std::string> keys_only = open;
  keys_only.insert(keys_only.end(), {"--keys-file", "/etc/mayfly/keys"});
  const ParsedFlags peers_open = parse(keys_only);
  EXPECT_EQ(peers_open.exit_code, 2);
  EXPECT_NE(peers_open.output.find("--cluster-secret-file"), std::string::npos) << peers_open.output;
  std::vector<std::string> both = keys_only;
  both.insert(both.end(), {"--cluster-secret-file", "/etc/mayfly/secret"});
  EXPECT_LT(parse(both).exit_code, 0) << parse(both).output;
  // Keys without a cluster secret: refused on loopback too (any local process could use the peer API around them),
  // and with --insecure.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers",
                                 "1=127.0.0.1:7101", "--keys-file", "/etc/mayfly/keys"},
        std::vector<std::string>{"--id", "1", "--listen", "0.0.0.0:7101", "--data", "/tmp/x", "--peers",
                                 "1=mayfly1:7101", "--keys-file", "/etc/mayfly/keys", "--insecure"}}) {
    const ParsedFlags keys_no_secret = parse(flags);
    EXPECT_EQ(keys_no_secret.exit_code, 2) << keys_no_secret.output;
    EXPECT_NE(keys_no_secret.output.find("--cluster-secret-file"), std::string::npos) << keys_no_secret.output;
  }
  // Loopback addresses may run open (a development machine).
  EXPECT_LT(parse({"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers", "1=127.0.0.1:7101"})
                .exit_code,
            0);
  EXPECT_TRUE(is_loopback_listen("localhost:1"));
  EXPECT_TRUE(is_loopback_listen("[::1]:1"));
  EXPECT_FALSE(is_loopback_listen("10.0.0.1:1"));
  EXPECT_FALSE(is_loopback_listen("[::]:1"));
}

TEST(NodeConfig, TlsFlagsGoTogether) {
  const ParsedFlags none = parse(kBase);
  ASSERT_LT(none.exit_code, 0) << none.output;
  EXPECT_FALSE(none.config.tls());
  const ParsedFlags all = parse(with({"--tls-cert", "n.crt", "--tls-key", "n.key", "--tls-ca", "ca.crt"}));
  ASSERT_LT(all.exit_code, 0) << all.output;
  EXPECT_TRUE(all.config.tls());
  EXPECT_EQ(all.config.tls_cert_file, "n.crt");
  EXPECT_EQ(all.config.tls_key_file, "n.key");
  EXPECT_EQ(all.config.tls_ca_file, "ca.crt");
  for (const std::vector<std::string>& partial :
       {std::vector<std::string>{"--tls-cert", "n.crt"}, std::vector<std::string>{"--tls-cert", "n.crt", "--tls-key", "n.key"},
        std::vector<std::string>{"--tls-ca", "ca.crt"}, std::vector<std::string>{"--tls-key", "n.key", "--tls-ca", "ca.crt"}}) {
    const ParsedFlags refused = parse(with(partial));
    EXPECT_EQ(refused.exit_code, 2) << partial.front();
    EXPECT_NE(refused.output.find("all three"), std::string::npos) << refused.output;
  }
}

TEST(NodeConfig, ConnectionLimitsAreRangeChecked) {
  EXPECT_EQ(parse(with({"--max-connections", "0"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--handshake-timeout-ms", "10"})).exit_code, 2);
  const ParsedFlags ok = parse(with({"--max-connections", "64", "--handshake-timeout-ms", "2000"}));
  ASSERT_LT(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.config.max_connections, 64);
  EXPECT_EQ(ok.config.handshake_timeout_ms, 2000);
}

TEST(NodeConfig, BudgetsPerKeyAndPerConnectionHaveDefaultsAndAreRangeChecked) {
  const NodeConfig defaults = parse(kBase).config;
  EXPECT_EQ(defaults.max_pending_per_key, 2048);
  EXPECT_EQ(defaults.max_pending_per_connection, 1024);
  EXPECT_EQ(defaults.max_parked_reads, 1024);
  EXPECT_EQ(defaults.max_connections_per_key, 256);
  EXPECT_EQ(defaults.reserved_peer_connections, 16);
  EXPECT_EQ(defaults.peer_reserve(), 16);
  for (const char* flag : {"--max-pending-per-key", "--max-pending-per-connection", "--max-parked-reads",
                           "--max-connections-per-key"}) {
    for (const char* bad : {"0", "-1", "1000001"}) {
      const ParsedFlags parsed = parse(with({flag, bad}));
      EXPECT_EQ(parsed.exit_code, 2) << flag << " " << bad;
      EXPECT_NE(parsed.output.find(flag), std::string::npos) << parsed.output;
    }
  }
  EXPECT_EQ(parse(with({"--reserved-peer-connections", "-1"})).exit_code, 2);
  // The reserve is at most half of --max-connections: a small node still admits clients.
  const ParsedFlags small = parse(with({"--max-connections", "8", "--reserved-peer-connections", "100"}));
  ASSERT_LT(small.exit_code, 0) << small.output;
  EXPECT_EQ(small.config.peer_reserve(), 4);
  const ParsedFlags none = parse(with({"--reserved-peer-connections", "0", "--max-parked-reads", "2"}));
  ASSERT_LT(none.exit_code, 0) << none.output;
  EXPECT_EQ(none.config.peer_reserve(), 0);
  EXPECT_EQ(none.config.max_parked_reads, 2);
}

TEST(NodeConfig, MaxClockOffsetDefaultsTo500MsAndIsRangeChecked) {
  EXPECT_EQ(parse(kBase).config.max_clock_offset_ms, 500);
  const ParsedFlags ok = parse(with({"--max-clock-offset", "250"}));
  ASSERT_LT(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.config.max_clock_offset_ms, 250);
  for (const char* bad : {"0", "-1", "86400001"}) {
    const ParsedFlags parsed = parse(with({"--max-clock-offset", bad}));
    EXPECT_EQ(parsed.exit_code, 2) << bad << " must be a usage error";
    EXPECT_NE(parsed.output.find("--max-clock-offset"), std::string::npos) << parsed.output;
  }
}

TEST(NodeConfig, TheEmulatorKeyOnlyOnALoopbackGateway) {
  const ParsedFlags loopback = parse(with({"--http", "127.0.0.1:8081", "--emulator-key"}));
  ASSERT_LT(loopback.exit_code, 0) << loopback.output;
  EXPECT_TRUE(loopback.config.http_emulator_key);
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--emulator-key"},
                                                                 {"--http", "0.0.0.0:8081", "--emulator-key"},
                                                                 {"--http", "10.0.0.1:8081", "--emulator-key"}}) {
    const ParsedFlags refused = parse(with(extra));
    EXPECT_EQ(refused.exit_code, 2) << extra.back();
    EXPECT_NE(refused.output.find("--emulator-key"), std::string::npos) << refused.output;
  }
}

TEST(NodeConfig, GatewayBoundsAreChecked) {
  EXPECT_EQ(parse(with({"--http", "8081"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--http", "127.0.0.1:8081", "--http-max-connections", "0"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--http", "127.0.0.1:8081", "--http-max-header-bytes", "10"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--http", "127.0.0.1:8081", "--http-max-body-bytes", "100"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--http", "127.0.0.1:8081", "--http-idle-timeout-ms", "0"})).exit_code, 2);
  EXPECT_EQ(parse(with({"--http", "127.0.0.1:8081", "--http-threads", "0"})).exit_code, 2);
  // Plain HTTP off loopback needs --insecure even with keys (a signature does not cover the body); HTTPS does not.
  const std::vector<std::string> keyed = {"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers",
                                          "1=127.0.0.1:7101", "--keys-file", "/k", "--cluster-secret-file", "/s"};
  std::vector<std::string> plain = keyed;
  plain.insert(plain.end(), {"--http", "0.0.0.0:8081"});
  const ParsedFlags plain_refused = parse(plain);
  EXPECT_EQ(plain_refused.exit_code, 2);
  EXPECT_NE(plain_refused.output.find("TLS"), std::string::npos) << plain_refused.output;
  EXPECT_NE(plain_refused.output.find("--insecure"), std::string::npos) << plain_refused.output;
  std::vector<std::string> plain_insecure = plain;
  plain_insecure.push_back("--insecure");
  EXPECT_LT(parse(plain_insecure).exit_code, 0) << parse(plain_insecure).output;
  std::vector<std::string> https = plain;
  https.insert(https.end(), {"--tls-cert", "/c", "--tls-key", "/k", "--tls-ca", "/ca"});
  EXPECT_LT(parse(https).exit_code, 0) << parse(https).output;
  std::vector<std::string> plain_loopback = keyed;
  plain_loopback.insert(plain_loopback.end(), {"--http", "127.0.0.1:8081"});
  EXPECT_LT(parse(plain_loopback).exit_code, 0) << parse(plain_loopback).output;
  // Open (no keys) on a non-loopback gateway needs --insecure, like the RPC port.
  const ParsedFlags open = parse({"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers",
                                  "1=127.0.0.1:7101", "--http", "0.0.0.0:8081"});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.output.find("--keys-file"), std::string::npos) << open.output;
}

}  // namespace
}  // namespace mayfly::node
