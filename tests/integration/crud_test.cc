// CRUD and the TTL contract end to end against a real 3-node cluster, through the `mayfly` CLI (a subprocess; its
// one-line JSON parsed with Boost.JSON) and through the client library, on every node; and bad input through the CLI.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;

// One request's outcome, whichever way it was sent.
struct Outcome {
  int status = -1;
  int exit_code = -1;  // the CLI's; -1 for the library
  std::string message;
  boost::json::value body;
  std::string session_token;
  std::string etag;
  uint64_t served_by = 0;
  std::string raw;  // for failure messages
};

std::string ttl_message(const std::string& value) {
  return "The input ttl '" + value +
         "' is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647', or '-1' "
         "which means never expire.";
}
const char* kIndexingNoneMessage =
    "Indexing mode value cannot be 'none' when 'defaultTtl' is specified in the collection";

// Sends Requests to a chosen node. Two implementations: the CLI binary and the client library.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual Outcome run(const Request& request, size_t node) = 0;
};

class LibraryTransport final : public Transport {
 public:
  explicit LibraryTransport(Cluster& cluster) : client_(cluster.client_options()) {}
  std::string name() const override { return "library"; }
  Outcome run(const Request& request, size_t node) override {
    Request pinned = request;
    pinned.endpoint = node;
    const client::Response response = client_.execute(pinned);
    Outcome out;
    out.status = response.status;
    out.message = response.message;
    out.body = response.body.empty() ? boost::json::value(nullptr) : parse_json(response.body);
    out.session_token = response.session_token;
    out.etag = response.etag;
    out.served_by = response.served_by;
    out.raw = "status " + std::to_string(response.status) + " message '" + response.message + "' body " +
              response.body + " servedBy " + std::to_string(response.served_by);
    return out;
  }

 private:
  client::Client client_;
};

// The CLI, pointed at one node only (--endpoints HOST:PORT of that node): writes sent to a follower are forwarded.
class CliTransport final : public Transport {
 public:
  explicit CliTransport(Cluster& cluster) : cluster_(cluster) {}
  std::string name() const override { return "cli"; }

  static std::vector<std::string> args_for(const Request& r) {
    std::vector<std::string> a;
    auto pk = [&] {
      a.push_back("--pk");
      a.push_back(test::partition_key_of(r).value_or("null"));
    };
    auto settings = [&] {
      const client::ContainerSettings& s = test::settings_of(r);
      if (!s.partition_key_path.empty()) a.insert(a.end(), {"--pk", s.partition_key_path});
      if (s.default_ttl == client::ContainerSettings::DefaultTtl::kSet) a.insert(a.end(), {"--default-ttl", s.default_ttl_json});
      if (s.default_ttl == client::ContainerSettings::DefaultTtl::kRemove) a.insert(a.end(), {"--default-ttl", "off"});
      if (s.indexing == client::ContainerSettings::Indexing::kNone) a.insert(a.end(), {"--indexing", "none"});
      if (s.indexing == client::ContainerSettings::Indexing::kConsistent) a.insert(a.end(), {"--indexing", "consistent"});
    };
    switch (r.kind()) {
      case Op::kCreateDatabase: a = {"db", "create", r.database}; break;
      case Op::kDeleteDatabase: a = {"db", "delete", r.database}; break;
      case Op::kListDatabases: a = {"db", "list"}; break;
      case Op::kCreateContainer: a = {"container", "create", r.database, r.container}; settings(); break;
      case Op::kUpdateContainer: a = {"container", "set", r.database, r.container}; settings(); break;
      case Op::kGetContainer: a = {"container", "get", r.database, r.container}; break;
      case Op::kDeleteContainer: a = {"container", "delete", r.database, r.container}; break;
      case Op::kListContainers: a = {"container", "list", r.database}; break;
      case Op::kCreateItem: a = {"item", "create", r.database, r.container, test::body_of(r)}; break;
      case Op::kUpsertItem: a = {"item", "upsert", r.database, r.container, test::body_of(r)}; break;
      case Op::kReplaceItem: a = {"item", "replace", r.database, r.container, test::body_of(r)}; break;
      case Op::kReadItem: a = {"item", "read", r.database, r.container, "--id", test::id_of(r)}; pk(); break;
      case Op::kDeleteItem: a = {"item", "delete", r.database, r.container, "--id", test::id_of(r)}; pk(); break;
      case Op::kPatchItem: a = {"item", "patch", r.database, r.container, "--id", test::id_of(r)}; pk(); a.push_back(test::body_of(r)); break;
      case Op::kListItems:
        a = {"item", "list", r.database, r.container};
        if (test::partition_key_of(r)) pk();
        break;
      default: ADD_FAILURE() << "no CLI form for " << client::kind_name(r.kind());
    }
    if (!r.options.if_match.empty()) a.insert(a.end(), {"--if-match", r.options.if_match});
    if (r.options.consistency) {
      a.insert(a.end(), {"--consistency", std::string(client::consistency_name(*r.options.consistency))});
    }
    if (!r.options.session_token.empty()) a.insert(a.end(), {"--session-token", r.options.session_token});
    return a;
  }

  Outcome run(const Request& request, size_t node) override {
    const CliResult result = cluster_.cli(args_for(request), node);
    Outcome out;
    out.exit_code = result.exit_code;
    out.status = result.status();
    out.message = result.message();
    if (const boost::json::value* body = result.body()) out.body = *body;
    out.session_token = result.session_token();
    out.etag = result.etag();
    if (result.json.is_object()) {
      if (const boost::json::value* v = result.json.as_object().if_contains("servedBy"); v && v->is_number()) {
        out.served_by = v->to_number<uint64_t>();
      }
    }
    out.raw = result.describe();
    // The CLI's exit code follows the status: 0 below 400, 1 from 400 on.
    EXPECT_EQ(result.exit_code, out.status >= 0 && out.status < 400 ? 0 : 1) << out.raw;
    return out;
  }

 private:
  Cluster& cluster_;
};

// ---- small request builders -----------------------------------------------------------------------------------------

Request session_read(Request r, const std::string& token) {
  r.options.consistency = Consistency::kSession;
  r.options.session_token = token;
  return r;
}

int64_t member_int(const boost::json::value& v, const char* key) {
  if (!v.is_object()) return INT64_MIN;
  const boost::json::value* m = v.as_object().if_contains(key);
  return m != nullptr && m->is_int64() ? m->as_int64() : INT64_MIN;
}
std::string member_str(const boost::json::value& v, const char* key) {
  if (!v.is_object()) return "<not an object>";
  const boost::json::value* m = v.as_object().if_contains(key);
  return m != nullptr && m->is_string() ? std::string(m->as_string()) : "<absent>";
}
// The items of a list body: either an array, or an object with an array member.
std::set<std::string> listed_ids(const boost::json::value& body) {
  std::set<std::string> ids;
  const boost::json::array* items = nullptr;
  if (body.is_array()) items = &body.as_array();
  if (body.is_object()) {
    for (const auto& [key, value] : body.as_object()) {
      if (value.is_array()) items = &value.as_array();
    }
  }
  if (items == nullptr) return ids;
  for (const boost::json::value& item : *items) {
    if (item.is_object() && item.as_object().contains("id")) ids.insert(member_str(item, "id"));
  }
  return ids;
}

// ---- the scenario, run through one transport -----------------------------------------------------------------------

void crud_and_ttl(Cluster& cluster, Transport& t, const std::string& db) {
  SCOPED_TRACE("transport " + t.name() + ", database " + db);
  size_t next_node = 0;
  auto any_node = [&] { return (next_node++ % cluster.size()) + 1; };  // writes go to every node in turn
  std::string token;
  auto write = [&](const Request& r, int expected) {
    const size_t node = any_node();
    Outcome out = t.run(r, node);
    EXPECT_EQ(out.status, expected) << client::kind_name(r.kind()) << " via node " << node << ": " << out.raw;
    if (out.status < 300 && !out.session_token.empty()) token = out.session_token;
    return out;
  };
  // Reads the same thing on every node with the latest session token; all must agree on the status.
  auto read_all = [&](const Request& r, int expected) {
    std::vector<Outcome> outs;
    for (size_t n = 1; n <= cluster.size(); ++n) {
      Outcome out = t.run(session_read(r, token), n);
      EXPECT_EQ(out.status, expected) << client::kind_name(r.kind()) << " on node " << n << ": " << out.raw;
      if (t.name() == "library") {
        EXPECT_EQ(out.served_by, n) << "a pinned read was served elsewhere: " << out.raw;
      }
      outs.push_back(std::move(out));
    }
    return outs;
  };

  // Databases.
  write(db_req(Op::kCreateDatabase, db), 201);
  write(db_req(Op::kCreateDatabase, db), 409);
  for (const Outcome& out : read_all(db_req(Op::kListDatabases, ""), 200)) {
    EXPECT_NE(out.raw.find("\"" + db + "\""), std::string::npos) << out.raw;
  }
  // Containers.
  write(create_container(db, "c", "/pk"), 201);
  write(create_container(db, "c", "/pk"), 409);
  write(create_container(db + "-missing", "c", "/pk"), 404);
  for (const Outcome& out : read_all(container_req(Op::kGetContainer, db, "c"), 200)) {
    EXPECT_NE(out.raw.find("/pk"), std::string::npos) << out.raw;
  }
  read_all(container_req(Op::kGetContainer, db, "nope"), 404);
  for (const Outcome& out : read_all(container_req(Op::kListContainers, db, ""), 200)) {
    EXPECT_NE(out.raw.find("\"c\""), std::string::npos) << out.raw;
  }

  // Items: create; system properties are the server's.
  const int64_t before_s = wall_micros() / 1000000;
  Outcome created = write(item_write(Op::kCreateItem, db, "c", R"({"id":"a","pk":"p1","v":1,"_ts":7,"_etag":"\"x\""})"), 201);
  const int64_t after_s = wall_micros() / 1000000;
  EXPECT_GE(member_int(created.body, "_ts"), before_s - 1) << created.raw;
  EXPECT_LE(member_int(created.body, "_ts"), after_s + 1) << created.raw;
  EXPECT_NE(member_str(created.body, "_etag"), "\"x\"") << created.raw;
  EXPECT_NE(member_str(created.body, "_rid"), "<absent>") << created.raw;
  write(item_write(Op::kCreateItem, db, "c", R"({"id":"a","pk":"p1","v":9})"), 409);
  for (const Outcome& out : read_all(item_key(Op::kReadItem, db, "c", "p1", "a"), 200)) {
    EXPECT_EQ(member_int(out.body, "v"), 1) << out.raw;
    EXPECT_EQ(member_str(out.body, "_etag"), member_str(created.body, "_etag")) << out.raw;
  }
  // Replace: 200 / 404 / 412.
  const std::string etag1 = member_str(created.body, "_etag");
  Outcome replaced = write(item_write(Op::kReplaceItem, db, "c", R"({"id":"a","pk":"p1","v":2})"), 200);
  EXPECT_NE(member_str(replaced.body, "_etag"), etag1) << "the etag must change on every write";
  write(item_write(Op::kReplaceItem, db, "c", R"({"id":"zz","pk":"p1","v":2})"), 404);
  write(item_write(Op::kReplaceItem, db, "c", R"({"id":"a","pk":"p1","v":3})", etag1), 412);
  Outcome replaced2 = write(item_write(Op::kReplaceItem, db, "c", R"({"id":"a","pk":"p1","v":3})",
                                       member_str(replaced.body, "_etag")), 200);
  // Upsert: 201 then 200.
  write(item_write(Op::kUpsertItem, db, "c", R"({"id":"b","pk":"p2","v":1})"), 201);
  write(item_write(Op::kUpsertItem, db, "c", R"({"id":"b","pk":"p2","v":2})"), 200);
  // Patch: 200 / 404 / 412 / 400.
  Request patch = item_key(Op::kPatchItem, db, "c", "p1", "a");
  test::body_of(patch) = R"([{"op":"set","path":"/v","value":5}])";
  Outcome patched = write(patch, 200);
  EXPECT_EQ(member_int(patched.body, "v"), 5) << patched.raw;
  Request patch_missing = patch;
  test::id_of(patch_missing) = "zz";
  write(patch_missing, 404);
  Request patch_stale = patch;
  patch_stale.options.if_match = member_str(replaced2.body, "_etag");
  write(patch_stale, 412);
  Request patch_bad = patch;
  test::body_of(patch_bad) = R"([{"op":"explode","path":"/v"}])";
  Outcome bad_patch = write(patch_bad, 400);
  EXPECT_FALSE(bad_patch.message.empty()) << bad_patch.raw;
  for (const Outcome& out : read_all(item_key(Op::kReadItem, db, "c", "p1", "a"), 200)) {
    EXPECT_EQ(member_int(out.body, "v"), 5) << out.raw;
  }
  // List: the whole container and one partition.
  for (const Outcome& out : read_all(container_req(Op::kListItems, db, "c"), 200)) {
    EXPECT_EQ(listed_ids(out.body), (std::set<std::string>{"a", "b"})) << out.raw;
  }
  Request list_p2 = container_req(Op::kListItems, db, "c");
  test::set_partition_key(list_p2, "\"p2\"");
  for (const Outcome& out : read_all(list_p2, 200)) {
    EXPECT_EQ(listed_ids(out.body), (std::set<std::string>{"b"})) << out.raw;
  }
  // Delete: 204 then 404; gone on every node.
  write(item_key(Op::kDeleteItem, db, "c", "p1", "a"), 204);
  write(item_key(Op::kDeleteItem, db, "c", "p1", "a"), 404);
  read_all(item_key(Op::kReadItem, db, "c", "p1", "a"), 404);
  read_all(item_key(Op::kReadItem, db, "c", "nobody", "nothing"), 404);
  read_all(item_key(Op::kReadItem, db, "nope", "p1", "a"), 404);

  // ttl validation (docs/ttl.md §2): 400 with the exact message, also when the container's TTL is off; nothing written.
  for (const auto& [json, text] : std::vector<std::pair<std::string, std::string>>{
           {"0", "0"}, {"-2", "-2"}, {"2147483648", "2147483648"}, {"1.5", "1.5"}, {"\"5\"", "5"},
           {"true", "true"}, {"{}", "{}"}, {"null", "null"}}) {
    for (Op op : {Op::kCreateItem, Op::kUpsertItem}) {
      Outcome out = write(item_write(op, db, "c", R"({"id":"t","pk":"p","ttl":)" + json + "}"), 400);
      EXPECT_EQ(out.message, ttl_message(text)) << "ttl " << json << ": " << out.raw;
    }
    Outcome out = write(item_write(Op::kReplaceItem, db, "c", R"({"id":"b","pk":"p2","ttl":)" + json + "}"), 400);
    EXPECT_EQ(out.message, ttl_message(text)) << "ttl " << json << ": " << out.raw;
  }
  read_all(item_key(Op::kReadItem, db, "c", "p", "t"), 404);
  write(item_write(Op::kCreateItem, db, "c", R"({"id":"T","pk":"p","TTL":0,"TimeToLive":0})"), 201);
  write(item_write(Op::kCreateItem, db, "c", R"({"id":"max","pk":"p","ttl":2147483647})"), 201);
  // defaultTtl validation.
  for (const std::string bad : {"0", "-2", "2147483648", "1.5", "null"}) {
    Outcome out = write(create_container(db, "bad", "/pk", bad), 400);
    EXPECT_NE(out.message.find("The input defaultTtl '" + bad + "' is invalid"), std::string::npos)
        << "defaultTtl " << bad << ": " << out.raw;
  }
  Outcome none = write(create_container(db, "bad", "/pk", "5", /*indexing_none=*/true), 400);
  EXPECT_EQ(none.message, kIndexingNoneMessage) << none.raw;
  read_all(container_req(Op::kGetContainer, db, "bad"), 404);

  // Expiry on every node, and `defaultTtl off` never resurrects (docs/ttl.md §4, §6).
  write(create_container(db, "e", "/pk", "1"), 201);
  Request to_none = container_req(Op::kUpdateContainer, db, "e");
  test::settings_of(to_none).indexing = client::ContainerSettings::Indexing::kNone;
  Outcome to_none_out = write(to_none, 400);
  EXPECT_EQ(to_none_out.message, kIndexingNoneMessage) << to_none_out.raw;
  Outcome own = write(item_write(Op::kCreateItem, db, "e", R"({"id":"own","pk":"p","ttl":1})"), 201);
  Outcome inherits = write(item_write(Op::kCreateItem, db, "e", R"({"id":"inherits","pk":"p"})"), 201);
  Outcome never = write(item_write(Op::kCreateItem, db, "e", R"({"id":"never","pk":"p","ttl":-1})"), 201);
  EXPECT_EQ(member_int(inherits.body, "ttl"), INT64_MIN) << "an inherited default must not be copied into the item";
  // Each item's own deadline: a second boundary may fall between the two writes, so their _ts can differ.
  for (const auto& [id, written] : {std::pair<std::string, const Outcome*>{"own", &own}, {"inherits", &inherits}}) {
    const int64_t deadline_s = member_int(written->body, "_ts") + 1;
    for (size_t n = 1; n <= cluster.size(); ++n) {
      // A session read: the node has applied the create before it answers, so a 404 can only mean expired (an
      // eventual read on a node that has not applied the create yet would also be a 404, long before the deadline).
      Request read = session_read(item_key(Op::kReadItem, db, "e", "p", id), token);
      Outcome last;
      const bool gone = wait_until(
          [&] {
            last = t.run(read, n);
            if (last.status == 404) {
              // The cluster's clock is this machine's (no skew here): never gone before the deadline.
              EXPECT_GE(wall_micros(), deadline_s * 1000000 - 20000)
                  << id << " was reported gone on node " << n << " before its deadline " << deadline_s;
            }
            return last.status == 404;
          },
          milliseconds(8000), milliseconds(20));
      EXPECT_TRUE(gone) << id << " (ttl 1) still readable on node " << n << " well after its deadline: " << last.raw;
    }
  }
  Request set_off = container_req(Op::kUpdateContainer, db, "e");
  test::settings_of(set_off).default_ttl = client::ContainerSettings::DefaultTtl::kRemove;
  write(set_off, 200);
  read_all(item_key(Op::kReadItem, db, "e", "p", "own"), 404);
  read_all(item_key(Op::kReadItem, db, "e", "p", "inherits"), 404);
  read_all(item_key(Op::kReadItem, db, "e", "p", "never"), 200);
  for (const Outcome& out : read_all(container_req(Op::kListItems, db, "e"), 200)) {
    EXPECT_EQ(listed_ids(out.body), (std::set<std::string>{"never"})) << out.raw;
  }
  // With TTL off, an item with its own ttl no longer expires; the expired ones can be created afresh (201).
  write(item_write(Op::kCreateItem, db, "e", R"({"id":"own","pk":"p","ttl":1})"), 201);
  write(item_write(Op::kCreateItem, db, "e", R"({"id":"inherits","pk":"p"})"), 201);

  // Container and database deletion.
  write(container_req(Op::kDeleteContainer, db, "e"), 204);
  read_all(container_req(Op::kGetContainer, db, "e"), 404);
  write(item_write(Op::kCreateItem, db, "e", R"({"id":"x","pk":"p"})"), 404);
}

TEST(IntegrationCrud, CrudAndTtlContractThroughCliAndLibraryOnEveryNode) {
  Cluster cluster({.name = "crud"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  {
    LibraryTransport library(cluster);
    crud_and_ttl(cluster, library, "dlib");
  }
  CliTransport cli(cluster);
  crud_and_ttl(cluster, cli, "dcli");

  // CLI exit codes: 0 ok, 1 request failed, 2 usage (nothing sent).
  EXPECT_EQ(cluster.cli({"db", "list"}).exit_code, 0);
  EXPECT_EQ(cluster.cli({"item", "read", "dcli", "c", "--pk", "p1", "--id", "nothing"}).exit_code, 1);
  for (const std::vector<std::string>& usage :
       {std::vector<std::string>{"frobnicate"}, {"item", "read", "dcli", "c", "--id", "x"},
        {"item", "read", "dcli", "c", "--pk", "p"}, {"db"}, {"--consistency", "sometimes", "db", "list"}}) {
    const CliResult r = cluster.cli(usage);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_FALSE(r.err.empty()) << "a usage error must say what is wrong: " << r.describe();
  }
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.running(n)) << "node " << n << " died";
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// Bad input through the CLI: a clear 4xx (or exit 2 for usage) with a message, and the nodes keep serving.
TEST(IntegrationCrud, BadInputThroughTheCliIsAClear4xxAndNodesKeepServing) {
  Cluster cluster({.name = "badinput"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  ASSERT_EQ(cluster.cli({"db", "create", "d"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "d", "c", "--pk", "/pk"}).status(), 201);

  int good = 0;
  auto then_a_write_succeeds = [&](const std::string& after) {
    const std::string json = R"({"id":"ok)" + std::to_string(++good) + R"(","pk":"p"})";
    const CliResult r = cluster.cli({"item", "create", "d", "c", json}, (good % cluster.size()) + 1);
    EXPECT_EQ(r.status(), 201) << "after " << after << ": " << r.describe();
  };
  auto expect_4xx = [&](const std::string& what, const std::vector<std::string>& args, int status,
                        const std::string& message_part) {
    const CliResult r = cluster.cli(args);
    EXPECT_EQ(r.status(), status) << what << ": " << r.describe();
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.describe();
    EXPECT_NE(r.message().find(message_part), std::string::npos)
        << what << ": the message should mention '" << message_part << "': " << r.describe();
    then_a_write_succeeds(what);
  };
  auto expect_usage = [&](const std::string& what, const std::vector<std::string>& args) {
    const CliResult r = cluster.cli(args);
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.describe();
    EXPECT_FALSE(r.err.empty()) << what << ": " << r.describe();
    then_a_write_succeeds(what);
  };

  expect_4xx("malformed JSON", {"item", "create", "d", "c", R"({"id":"m","pk":)"}, 400, "JSON");
  expect_4xx("not an object", {"item", "create", "d", "c", "[1,2]"}, 400, "object");
  expect_4xx("missing id", {"item", "create", "d", "c", R"({"pk":"p"})"}, 400, "id");
  expect_4xx("bad id", {"item", "create", "d", "c", R"({"id":"a/b","pk":"p"})"}, 400, "id");
  expect_4xx("bad ttl", {"item", "create", "d", "c", R"({"id":"t","pk":"p","ttl":"soon"})"}, 400,
             ttl_message("soon"));
  expect_4xx("unknown database", {"item", "create", "nodb", "c", R"({"id":"u","pk":"p"})"}, 404, "nodb");
  expect_4xx("unknown container", {"item", "create", "d", "noc", R"({"id":"u","pk":"p"})"}, 404, "noc");
  expect_4xx("unknown container (read)", {"item", "read", "d", "noc", "--pk", "p", "--id", "u"}, 404, "noc");
  expect_4xx("bad defaultTtl", {"container", "create", "d", "c2", "--pk", "/pk", "--default-ttl", "0"}, 400,
             "defaultTtl");
  expect_4xx("bad patch", {"item", "patch", "d", "c", "--pk", "p", "--id", "ok1", "{\"op\":"}, 400, "JSON");
  // Conditional patch: a condition that is not FROM ... WHERE, and one that is false for the item.
  const std::string set_x = R"([{"op":"set","path":"/x","value":1}])";
  expect_4xx("bad patch condition",
             {"item", "patch", "d", "c", "--pk", "p", "--id", "ok1", "--condition", "where c.x = 1", set_x}, 400,
             "FROM c WHERE");
  expect_4xx("false patch condition",
             {"item", "patch", "d", "c", "--pk", "p", "--id", "ok1", "--condition", "from c where c.x = 1", set_x},
             412, "condition");
  // A partition key that does not match the item's, and one of a type a partition key cannot have.
  expect_4xx("bad --pk (object)", {"item", "read", "d", "c", "--pk", R"({"a":1})", "--id", "ok1"}, 400,
             "partition key");
  // A 3 MB item: 413 (items are limited to 2 MB).
  const std::string big = R"({"id":"big","pk":"p","blob":")" + std::string(3 << 20, 'x') + "\"}";
  const std::string big_file = cluster.write_file("big.json", big);
  expect_4xx("3 MB item", {"item", "create", "d", "c", "@" + big_file}, 413, "");
  expect_4xx("3 MB item (upsert)", {"item", "upsert", "d", "c", "@" + big_file}, 413, "");

  expect_usage("unknown command", {"frobnicate", "now"});
  expect_usage("missing --pk", {"item", "read", "d", "c", "--id", "x"});
  expect_usage("bad --consistency", {"--consistency", "sometimes", "item", "read", "d", "c", "--pk", "p", "--id", "x"});
  expect_usage("unreadable @file", {"item", "create", "d", "c", "@/nonexistent/item.json"});
  expect_usage("bad --endpoints", {"--endpoints", "nowhere", "db", "list"});

  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.running(n)) << "node " << n << " died";
  // Every good write is on every node.
  const CliResult listed = cluster.cli({"item", "list", "d", "c", "--consistency", "strong"});
  ASSERT_EQ(listed.status(), 200) << listed.describe();
  for (int i = 1; i <= good; ++i) {
    EXPECT_NE(listed.out.find("\"ok" + std::to_string(i) + "\""), std::string::npos) << "ok" << i << " missing";
  }
  EXPECT_EQ(listed.out.find("\"big\""), std::string::npos) << "a rejected item was written";
}

}  // namespace
}  // namespace mayfly::it
