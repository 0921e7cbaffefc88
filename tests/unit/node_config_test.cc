// mayflyd's flags: parsing, range checks with a usage error (exit 2), and the address a node reports for itself.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "node/config.h"

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
  // Open (no keys) on a non-loopback gateway needs --insecure, like the RPC port.
  const ParsedFlags open = parse({"--id", "1", "--listen", "127.0.0.1:7101", "--data", "/tmp/x", "--peers",
                                  "1=127.0.0.1:7101", "--http", "0.0.0.0:8081"});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.output.find("--keys-file"), std::string::npos) << open.output;
}

}  // namespace
}  // namespace mayfly::node
