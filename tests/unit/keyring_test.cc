// The keys file and the cluster secret file (node/keyring.h): parsing errors name the line, never the secret; files
// readable by others are refused; a changed file is re-read and a broken one keeps what was loaded. And the gateway's
// replay cache (node/replay_cache.h).
#include "node/keyring.h"
#include "node/replay_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mayfly::node {
namespace {

namespace fs = std::filesystem;

TEST(Keyring, ComplianceIsBesideTheOtherRolesAndAdminImpliesIt) {
  Result<std::vector<ClientKey>> keys = parse_keys("compliance cccccccccccccccccccc legal\n", "keys");
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  EXPECT_EQ((*keys)[0].role, Role::kCompliance);
  EXPECT_EQ(role_name(Role::kCompliance), "compliance");
  // Compliance reads and holds; it does not write or administer. Readwrite does not hold. Admin does everything.
  EXPECT_TRUE(role_allows(Role::kCompliance, Role::kReadOnly));
  EXPECT_TRUE(role_allows(Role::kCompliance, Role::kCompliance));
  EXPECT_FALSE(role_allows(Role::kCompliance, Role::kReadWrite));
  EXPECT_FALSE(role_allows(Role::kCompliance, Role::kAdmin));
  EXPECT_FALSE(role_allows(Role::kReadWrite, Role::kCompliance));
  EXPECT_FALSE(role_allows(Role::kReadOnly, Role::kCompliance));
  EXPECT_TRUE(role_allows(Role::kReadWrite, Role::kReadOnly));
  EXPECT_FALSE(role_allows(Role::kReadOnly, Role::kReadWrite));
  for (Role need : {Role::kReadOnly, Role::kReadWrite, Role::kCompliance, Role::kAdmin}) {
    EXPECT_TRUE(role_allows(Role::kAdmin, need));
    EXPECT_FALSE(role_allows(Role::kNone, need));
  }
}

TEST(Keyring, KeysParseWithRolesAndErrorsNameTheLineNotTheKey) {
  Result<std::vector<ClientKey>> keys =
      parse_keys("# comment\n\nadmin  aaaaaaaaaaaaaaaaaaaa ops\nreadonly bbbbbbbbbbbbbbbbbbbb\n", "keys");
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].role, Role::kAdmin);
  EXPECT_EQ((*keys)[0].name, "ops");
  EXPECT_EQ((*keys)[1].role, Role::kReadOnly);
  Result<std::vector<ClientKey>> short_key = parse_keys("admin short-secret\n", "keys");
  ASSERT_FALSE(short_key.is_ok());
  EXPECT_NE(short_key.status().message().find("keys line 1"), std::string::npos);
  EXPECT_EQ(short_key.status().message().find("short-secret"), std::string::npos) << "the key is echoed";
  EXPECT_FALSE(parse_keys("owner aaaaaaaaaaaaaaaaaaaa\n", "keys").is_ok());
  EXPECT_FALSE(parse_keys("admin aaaaaaaaaaaaaaaaaaaa a\nreadonly aaaaaaaaaaaaaaaaaaaa b\n", "keys").is_ok());
  // A line written the wrong way round (KEY ROLE), or a key alone: the first field is not echoed, it is the key.
  for (const char* line : {"swapped-key-0123456789abcdef admin\n", "lonely-key-0123456789abcdef\n"}) {
    Result<std::vector<ClientKey>> swapped = parse_keys(std::string("admin aaaaaaaaaaaaaaaaaaaa\n") + line, "keys");
    ASSERT_FALSE(swapped.is_ok()) << line;
    EXPECT_NE(swapped.status().message().find("keys line 2"), std::string::npos) << swapped.status().message();
    EXPECT_EQ(swapped.status().message().find("-key-0123456789abcdef"), std::string::npos)
        << "the key is echoed: " << swapped.status().message();
  }
}

TEST(ReplayCache, ASignatureIsUsedOnceUntilItsDateLeavesTheWindowAndTheCacheIsBounded) {
  ReplayCache cache;
  EXPECT_EQ(cache.use("sig-a", 1000, 100), ReplayCache::Outcome::kFirstUse);
  EXPECT_EQ(cache.use("sig-b", 1000, 100), ReplayCache::Outcome::kFirstUse);
  EXPECT_EQ(cache.use("sig-a", 1000, 500), ReplayCache::Outcome::kReplayed);
  EXPECT_EQ(cache.use("sig-a", 1000, 1000), ReplayCache::Outcome::kReplayed);  // still inside the window
  // Past its window the date itself is refused (gateway/protocol.h check_signed_date): forgotten.
  EXPECT_EQ(cache.use("sig-c", 2000, 1001), ReplayCache::Outcome::kFirstUse);
  EXPECT_EQ(cache.size(), 1u);
  // Full: refused rather than an unexpired signature forgotten early; room again once they expire.
  for (size_t i = 1; i < ReplayCache::kMaxEntries; ++i) {
    ASSERT_EQ(cache.use("fill-" + std::to_string(i), 3000, 1001), ReplayCache::Outcome::kFirstUse);
  }
  EXPECT_EQ(cache.use("one-more", 3000, 1001), ReplayCache::Outcome::kFull);
  EXPECT_EQ(cache.use("fill-1", 3000, 1001), ReplayCache::Outcome::kReplayed);
  EXPECT_EQ(cache.use("one-more", 3000, 3001), ReplayCache::Outcome::kFirstUse);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ReplayCache, AUseWhoseRequestWasRefusedIsReleasedForTheCorrectedRequest) {
  ReplayCache cache;
  ASSERT_EQ(cache.use("sig-a", 1000, 100), ReplayCache::Outcome::kFirstUse);
  cache.release("sig-a", 1000);  // e.g. a 412 asking for the force header: nothing was done
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.use("sig-a", 1000, 101), ReplayCache::Outcome::kFirstUse);  // the corrected request, same second
  EXPECT_EQ(cache.use("sig-a", 1000, 102), ReplayCache::Outcome::kReplayed);  // and no more once it succeeded
  cache.release("never-used", 1000);  // nothing to release: no effect
  EXPECT_EQ(cache.size(), 1u);
  // The released entry left no expiry record behind: past the window the cache is empty.
  EXPECT_EQ(cache.use("sig-b", 5000, 1001), ReplayCache::Outcome::kFirstUse);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(Keyring, ClusterSecretsAreOnePerLineTheFirstProvesAndTheyAreBounded) {
  Result<std::vector<std::string>> two =
      parse_cluster_secrets("# rotating\nnew-secret-0123456789\n  old-secret-0123456789  \n\n", "secret");
  ASSERT_TRUE(two.is_ok()) << two.status().to_string();
  EXPECT_EQ(*two, (std::vector<std::string>{"new-secret-0123456789", "old-secret-0123456789"}));
  Result<std::vector<std::string>> short_one = parse_cluster_secrets("tooshort\n", "secret");
  ASSERT_FALSE(short_one.is_ok());
  EXPECT_NE(short_one.status().message().find("secret line 1"), std::string::npos);
  EXPECT_EQ(short_one.status().message().find("tooshort"), std::string::npos) << "the secret is echoed";
  EXPECT_FALSE(parse_cluster_secrets("\n# nothing\n", "secret").is_ok());
  EXPECT_FALSE(parse_cluster_secrets("same-secret-0123456789\nsame-secret-0123456789\n", "secret").is_ok());
  std::string five;
  for (int i = 0; i < 5; ++i) five += "secret-number-" + std::to_string(i) + "-0123456789\n";
  EXPECT_FALSE(parse_cluster_secrets(five, "secret").is_ok());
}

TEST(Keyring, ClusterSecretFileIsPrivateAndReloadedWhenItChanges) {
  const fs::path dir = fs::temp_directory_path() / ("mayfly-keyring-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "cluster-secret").string();
  auto write = [&](const std::string& text, fs::perms perms) {
    std::ofstream(path + ".new", std::ios::trunc) << text;
    fs::permissions(path + ".new", perms, fs::perm_options::replace);
    fs::rename(path + ".new", path);
  };
  const fs::perms owner = fs::perms::owner_read | fs::perms::owner_write;
  write("first-secret-0123456789\n", owner | fs::perms::group_read);
  EXPECT_FALSE(ClusterSecrets::load(path).is_ok()) << "a secret file readable by the group was accepted";
  write("first-secret-0123456789\n", owner);
  Result<ClusterSecrets> secrets = ClusterSecrets::load(path);
  ASSERT_TRUE(secrets.is_ok()) << secrets.status().to_string();
  EXPECT_EQ(secrets->proving(), "first-secret-0123456789");
  const uint64_t generation = secrets->generation();
  write("second-secret-0123456789\nfirst-secret-0123456789\n", owner);
  ASSERT_TRUE(secrets->reload_if_changed().is_ok());
  EXPECT_GT(secrets->generation(), generation);
  EXPECT_EQ(secrets->proving(), "second-secret-0123456789");
  EXPECT_EQ(secrets->accepted().size(), 2u);
  write("x\n", owner);  // broken: the old secrets stay
  EXPECT_FALSE(secrets->reload_if_changed().is_ok());
  EXPECT_EQ(secrets->proving(), "second-secret-0123456789");
  Result<ClusterSecrets> none = ClusterSecrets::load("");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(none->proving(), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mayfly::node
