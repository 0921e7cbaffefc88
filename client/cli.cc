#include "client/cli.h"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include "client/cli_body.h"
#include "client/cli_text.h"
#include "client/policy.h"

namespace mayfly::client {

namespace {

// Everything the command line can set; each leaf command reads the fields it declared.
struct Arguments {
  std::string endpoints;
  std::string key;
  std::string key_file;
  std::string tls_ca;
  std::string consistency;
  std::string session_token;
  uint32_t timeout_ms = 10000;

  std::string database;
  std::string container;
  std::string document;  // item JSON or patch operations: inline, @file or -
  std::string partition_key_path;
  std::string default_ttl;
  std::string indexing;
  uint32_t throughput = 0;
  bool serverless = false;
  std::string if_match;
  std::optional<std::string> partition_key;
  std::string id;
  uint32_t max_items = 0;
  std::string continuation;
  uint64_t member_id = 0;
  std::string member_address;
  std::string duration;  // cluster advance-clock
  bool dry_run = false;   // container set
  bool force = false;     // container set
  std::string sql;                  // query
  std::vector<std::string> params;  // query: @name=JSON, repeatable
  bool enable_scan = false;         // query
  std::string output;               // -o json|table; empty: by terminal
  std::string file;                 // item import: FILE.jsonl or -
  size_t concurrency = 16;          // item import
  bool create_only = false;         // item import
  bool quiet = false;               // item import / export
  std::string out_path;             // item export
  bool strip_system = false;        // item export
  uint32_t page_items = 1000;       // item export
  std::string backup_out;           // backup create --out FILE
  uint64_t backup_node = 0;         // backup create --node ID (0: a follower)
  uint64_t forecast_node = 0;       // container forecast --node ID (0: every reachable node)
  std::string change_feed;          // container create/set --change-feed on|off
  uint32_t change_feed_retention = 0;  // container create/set --change-feed-retention SECONDS
  int64_t expiry_warning = -1;         // container create/set --expiry-warning SECONDS (0: off); -1: not given
  std::string feed_mode = "all";    // changefeed --mode
  std::string feed_from;            // changefeed --from beginning|now|TIME
  bool only_expirations = false;    // changefeed
  bool only_warnings = false;       // changefeed
  std::string condition;            // item patch --condition
  bool follow = false;              // changefeed --follow
  std::string item_id;              // hold set --item
  std::string reason;               // hold set|release --reason
  bool all = false;                 // hold list --all
};

// A usage error found after CLI11 was done (file not readable, bad endpoint list, ...).
struct UsageError {
  std::string message;
};

const std::map<std::string, Consistency>& consistency_names() {
  static const std::map<std::string, Consistency> names = {{"session", Consistency::kSession},
                                                           {"strong", Consistency::kStrong},
                                                           {"bounded", Consistency::kBounded},
                                                           {"eventual", Consistency::kEventual}};
  return names;
}

std::string quote(std::string_view text) { return json_quote(text); }

std::string format_double(double value) {
  if (!std::isfinite(value)) {
    return "null";
  }
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);  // shortest round-trip form
  return error == std::errc() ? std::string(buffer, end) : "null";
}

// A JSON argument: inline text, @path (the file's contents) or - (standard input).
std::string load_document(const std::string& argument, const CliEnvironment& environment) {
  BodyRead read = read_body(argument, environment.standard_input);
  if (!read.body.has_value()) throw UsageError{read.error};
  return std::move(*read.body);
}

std::vector<std::string> resolve_endpoints(const Arguments& arguments, const CliEnvironment& environment) {
  std::string text = std::string(kDefaultEndpoints);
  std::string source = "the default";
  if (!arguments.endpoints.empty()) {
    text = arguments.endpoints;
    source = "--endpoints";
  } else if (environment.endpoints.has_value() && !environment.endpoints->empty()) {
    text = *environment.endpoints;
    source = "MAYFLY_ENDPOINTS";
  }
  auto parsed = parse_endpoint_list(text);
  if (!parsed.is_ok()) {
    throw UsageError{source + ": " + parsed.status().message()};
  }
  return std::move(parsed).value();
}

// The client key: --key, else --key-file, else $MAYFLY_KEY, else $MAYFLY_KEY_FILE; empty: none. A key file holds the
// key alone (surrounding whitespace ignored) or one line of a node's keys file (ROLE KEY [NAME]).
std::string resolve_key(const Arguments& arguments, const CliEnvironment& environment) {
  if (!arguments.key.empty()) return arguments.key;
  std::string path = arguments.key_file;
  std::string source = "--key-file";
  if (path.empty()) {
    if (environment.key.has_value() && !environment.key->empty()) return *environment.key;
    if (!environment.key_file.has_value() || environment.key_file->empty()) return "";
    path = *environment.key_file;
    source = "MAYFLY_KEY_FILE";
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError{source + ": cannot read '" + path + "'"};
  std::string line;
  while (std::getline(file, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> words;
    for (std::string word; fields >> word;) words.push_back(word);
    if (words.empty()) continue;
    if (words.size() == 1) return words[0];
    if (words[0] == "readonly" || words[0] == "readwrite" || words[0] == "admin" || words[0] == "compliance") {
      return words[1];
    }
    throw UsageError{source + ": '" + path + "' holds neither a key alone nor a line ROLE KEY [NAME]"};
  }
  throw UsageError{source + ": '" + path + "' holds no key"};
}

// --param @name=JSON ... as one JSON object {"@name": value}; "" when there are none. A value may also be @file or
// - (standard input), like a body.
std::string parameters_json(const std::vector<std::string>& params, const CliEnvironment& environment) {
  if (params.empty()) {
    return "";
  }
  boost::json::object object;
  std::vector<std::pair<std::string, std::string>> texts;  // name, value as written
  for (const std::string& param : params) {
    const size_t equals = param.find('=');
    if (equals == std::string::npos || equals < 2 || param[0] != '@') {
      throw UsageError{"--param takes @name=JSON, @name=@file or @name=-, got '" + param + "'"};
    }
    const std::string name = param.substr(0, equals);
    if (object.contains(name)) {
      throw UsageError{"--param " + name + " is given twice"};
    }
    std::string text = param.substr(equals + 1);
    if (text == "-" || (!text.empty() && text.front() == '@')) text = load_document(text, environment);
    boost::system::error_code error;
    boost::json::value value = boost::json::parse(text, error);
    if (error) {
      throw UsageError{"--param " + name + ": the value is not JSON (quote strings: " + name + "='\"text\"')"};
    }
    object[name] = std::move(value);
    texts.emplace_back(name, std::move(text));
  }
  // The values travel as the user wrote them: re-serialize only the envelope, keeping each value's own text.
  std::string out = "{";
  for (const auto& [name, text] : texts) {
    if (out.size() > 1) {
      out += ",";
    }
    out += quote(name) + ":" + text;
  }
  return out + "}";
}

ContainerSettings::Indexing indexing_of(const std::string& text) {
  if (text.empty()) {
    return ContainerSettings::Indexing::kUnchanged;
  }
  return text == "none" ? ContainerSettings::Indexing::kNone : ContainerSettings::Indexing::kConsistent;
}

// The leaf commands, each with the arguments it takes. Returns a map from leaf to op.
class Grammar {
 public:
  explicit Grammar(Arguments& arguments) : arguments_(arguments), app_("Command line client for a Mayfly cluster", "mayfly") {
    app_.require_subcommand(1);
    app_.fallthrough();  // global options may also follow the command
    app_.footer(
        "Prints tables on a terminal and one JSON object per request otherwise (-o to choose). Exit status: 0 for "
        "status < 400, 1 otherwise, 2 for usage errors.");
    app_.add_option("--endpoints", arguments_.endpoints,
                    "host:port,host:port of the nodes, node 1 first (default " + std::string(kDefaultEndpoints) +
                        ", or $MAYFLY_ENDPOINTS)");
    app_.add_option("--key", arguments_.key,
                    "the client key (default $MAYFLY_KEY); prefer --key-file: arguments show in process lists");
    app_.add_option("--key-file", arguments_.key_file,
                    "a file holding the client key, alone or as a keys-file line ROLE KEY (default $MAYFLY_KEY_FILE)");
    app_.add_option("--tls-ca", arguments_.tls_ca,
                    "connect with TLS, trusting only the CA certificate in this PEM file (default $MAYFLY_TLS_CA; "
                    "unset: plaintext)");
    app_.add_option("--consistency", arguments_.consistency, "read consistency (default session)")
        ->check(CLI::IsMember({"strong", "bounded", "session", "eventual"}));
    app_.add_option("--session-token", arguments_.session_token, "session token of an earlier response");
    app_.add_option("--timeout-ms", arguments_.timeout_ms, "whole request timeout, retries included (default 10000)")
        ->check(CLI::Range(1u, 3600u * 1000u));
    app_.add_option("-o,--output", arguments_.output,
                    "json (one object per request) or table; default: table when stdout is a terminal, else json")
        ->check(CLI::IsMember({"json", "table"}));
    add_cluster();
    add_backup();
    add_db();
    add_container();
    add_item();
    add_query();
    add_changefeed();
    add_hold();
  }

  CLI::App& app() { return app_; }

  CliAction parsed_action() const {
    if (import_ != nullptr && import_->parsed()) return CliAction::kImport;
    if (export_ != nullptr && export_->parsed()) return CliAction::kExport;
    return CliAction::kRequest;
  }

  // The op of the leaf that was parsed.
  Op parsed_op() const {
    for (const auto& [leaf, op] : leaves_) {
      if (leaf->parsed()) {
        return op;
      }
    }
    throw UsageError{"no command given"};
  }

 private:
  CLI::App* group(const std::string& name, const std::string& description) {
    CLI::App* sub = app_.add_subcommand(name, description);
    sub->require_subcommand(1);
    return sub;
  }

  CLI::App* leaf(CLI::App* parent, const std::string& name, const std::string& description, Op op) {
    CLI::App* sub = parent->add_subcommand(name, description);
    leaves_.emplace_back(sub, op);
    return sub;
  }

  void database_and_container(CLI::App* sub) {
    sub->add_option("DB", arguments_.database, "database")->required();
    sub->add_option("CONTAINER", arguments_.container, "container")->required();
  }

  void add_hold() {
    CLI::App* hold = group("hold", "legal holds: keep items past their TTL and from every deletion (compliance keys)");
    CLI::App* set = leaf(hold, "set",
                         "hold the whole container, one partition key value (--pk) or one item (--pk and --item)",
                         Op::kSetHold);
    database_and_container(set);
    set->add_option("--id", arguments_.id, "the hold's id (e.g. a case number), unique among the container's holds")
        ->required();
    set->add_option("--pk", arguments_.partition_key, "partition key value (JSON, else a string): hold that partition");
    set->add_option("--item", arguments_.item_id, "with --pk: hold only the item with this id");
    set->add_option("--reason", arguments_.reason, "why (kept in the hold and its audit record)")->required();
    CLI::App* release = leaf(hold, "release", "release hold ID: what it kept expires or may be deleted again",
                             Op::kReleaseHold);
    database_and_container(release);
    release->add_option("ID", arguments_.id, "the hold's id")->required();
    release->add_option("--reason", arguments_.reason, "why (kept in the audit record)")->required();
    CLI::App* list = leaf(hold, "list", "the active holds (of every container, of DB, or of DB CONTAINER)",
                          Op::kListHolds);
    list->add_option("DB", arguments_.database, "database");
    list->add_option("CONTAINER", arguments_.container, "container");
    list->add_flag("--all", arguments_.all, "released holds too");
    CLI::App* audit = leaf(hold, "audit", "who set and released which hold, when and why (oldest first)",
                           Op::kListHoldAudit);
    audit->add_option("--max-items", arguments_.max_items, "entries per page (default 100)");
    audit->add_option("--continuation", arguments_.continuation, "from the previous page's continuation");
  }

  void add_cluster() {
    CLI::App* cluster = group("cluster", "cluster status and membership");
    leaf(cluster, "status", "leader and nodes", Op::kClusterStatus);
    CLI::App* add = leaf(cluster, "add-member", "add node ID listening at H:P", Op::kAddMember);
    add->add_option("ID", arguments_.member_id, "node id")->required()->check(CLI::PositiveNumber);
    add->add_option("ADDRESS", arguments_.member_address, "host:port of its RPC listener")
        ->required()
        ->check([](const std::string& text) {
          const Status valid = validate_endpoint(text);
          return valid.is_ok() ? std::string() : valid.message();
        });
    CLI::App* remove = leaf(cluster, "remove-member", "remove node ID", Op::kRemoveMember);
    remove->add_option("ID", arguments_.member_id, "node id")->required()->check(CLI::PositiveNumber);
    CLI::App* transfer = leaf(cluster, "transfer-leader", "hand leadership to node ID", Op::kTransferLeader);
    transfer->add_option("ID", arguments_.member_id, "node id")->required()->check(CLI::PositiveNumber);
    CLI::App* advance = leaf(cluster, "advance-clock",
                             "move a --clock virtual cluster's time forward by DURATION (90s, 1500ms, 30m, 2h, 1d)",
                             Op::kAdvanceClock);
    advance->add_option("DURATION", arguments_.duration, "how far: a positive number with ms, s, m, h or d")
        ->required();
  }

  void add_backup() {
    CLI::App* backup = group("backup", "online backups (restore: mayflyd --restore FILE --ttl MODE)");
    CLI::App* create = leaf(backup, "create", "download a consistent backup of the running cluster to FILE",
                            Op::kBackupOpen);
    create->add_option("--out", arguments_.backup_out, "the backup file to write (must not exist)")->required();
    create->add_option("--node", arguments_.backup_node, "the node that serves it (default: a follower)")
        ->check(CLI::PositiveNumber);
  }

  void add_db() {
    CLI::App* db = group("db", "databases");
    CLI::App* create = leaf(db, "create", "create database DB", Op::kCreateDatabase);
    create->add_option("DB", arguments_.database, "database")->required();
    create->add_option("--throughput", arguments_.throughput,
                       "provisioned RU/s its containers share (those created without their own)");
    leaf(db, "delete", "delete database DB", Op::kDeleteDatabase)
        ->add_option("DB", arguments_.database, "database")
        ->required();
    CLI::App* set = leaf(db, "set", "change the shared throughput of database DB", Op::kUpdateDatabase);
    set->add_option("DB", arguments_.database, "database")->required();
    set->add_option("--throughput", arguments_.throughput, "provisioned RU/s its sharing containers share")
        ->required();
    leaf(db, "list", "list databases", Op::kListDatabases);
    leaf(db, "offers", "list the provisioned throughputs (databases' shared, containers' own)", Op::kListOffers);
  }

  void add_indexing(CLI::App* sub) {
    sub->add_option("--indexing", arguments_.indexing, "indexing mode")->check(CLI::IsMember({"consistent", "none"}));
  }

  void add_change_feed(CLI::App* sub) {
    sub->add_option("--change-feed", arguments_.change_feed, "turn the change feed on or off")
        ->check(CLI::IsMember({"on", "off"}));
    sub->add_option("--change-feed-retention", arguments_.change_feed_retention,
                    "with --change-feed on: seconds the feed keeps changes (default: the nodes' "
                    "--changefeed-retention)")
        ->check(CLI::Range(1u, 90u * 24 * 3600));
    sub->add_option("--expiry-warning", arguments_.expiry_warning,
                    "seconds before an item expires at which the change feed carries a warning for it (0: off)")
        ->check(CLI::Range(int64_t{0}, int64_t{2147483647}));
  }

  void add_changefeed() {
    CLI::App* feed = leaf(&app_, "changefeed",
                          "read a container's change feed: one JSON change per line (the continuation on stderr)",
                          Op::kReadChangeFeed);
    database_and_container(feed);
    feed->add_option("--mode", arguments_.feed_mode, "all (every change, expirations included) or latest")
        ->check(CLI::IsMember({"all", "latest"}));
    CLI::Option* from = feed->add_option("--from", arguments_.feed_from,
                                         "beginning (default), now, or a Unix time in seconds (replicated time)");
    CLI::Option* continuation =
        feed->add_option("--continuation", arguments_.continuation, "continue after a previous read (or a position)");
    from->excludes(continuation);
    continuation->excludes(from);
    CLI::Option* expirations = feed->add_flag("--only-expirations", arguments_.only_expirations, "only TTL expirations");
    CLI::Option* warnings = feed->add_flag("--only-warnings", arguments_.only_warnings,
                                           "only expiring-soon warnings (the container's --expiry-warning)");
    expirations->excludes(warnings);
    warnings->excludes(expirations);
    feed->add_option("--max-items", arguments_.max_items, "changes per request (1..1000)")
        ->check(CLI::Range(1u, 1000u));
    feed->add_flag("--follow", arguments_.follow, "keep reading new changes until interrupted (Ctrl-C)");
  }

  void add_container() {
    CLI::App* container = group("container", "containers");
    CLI::App* create = leaf(container, "create", "create container C in DB", Op::kCreateContainer);
    database_and_container(create);
    create->add_option("--pk", arguments_.partition_key_path, "partition key path, e.g. /tenant")->required();
    create->add_option("--default-ttl", arguments_.default_ttl, "default TTL in seconds, or -1 (on, no default)");
    add_indexing(create);
    CLI::Option* throughput = create->add_option("--throughput", arguments_.throughput, "provisioned RU/s");
    CLI::Option* serverless = create->add_flag("--serverless", arguments_.serverless, "serverless (never throttled)");
    throughput->excludes(serverless);
    serverless->excludes(throughput);
    add_change_feed(create);

    database_and_container(leaf(container, "get", "show container C", Op::kGetContainer));
    CLI::App* set = leaf(container, "set", "change container C's settings", Op::kUpdateContainer);
    database_and_container(set);
    set->add_option("--default-ttl", arguments_.default_ttl, "default TTL in seconds, -1, or off (TTL off)");
    add_indexing(set);
    set->add_option("--throughput", arguments_.throughput, "provisioned RU/s");
    set->add_flag("--dry-run", arguments_.dry_run,
                  "with --default-ttl: print what the change would expire (at once, within 1 h, 1 day); change "
                  "nothing");
    set->add_flag("--force", arguments_.force,
                  "with --default-ttl: apply even if more than 10% of the live items would expire at once");
    add_change_feed(set);
    database_and_container(leaf(container, "delete", "delete container C", Op::kDeleteContainer));
    CLI::App* forecast = leaf(container, "forecast",
                              "what expires per minute (next hour) and per hour (next day) on each node, its backlog, "
                              "reclaim capacity and projected backlog peak",
                              Op::kContainerForecast);
    database_and_container(forecast);
    forecast->add_option("--node", arguments_.forecast_node, "only this node (default: every reachable node)")
        ->check(CLI::PositiveNumber);
    leaf(container, "list", "list the containers of DB", Op::kListContainers)
        ->add_option("DB", arguments_.database, "database")
        ->required();
  }

  void add_key(CLI::App* sub) {
    sub->add_option("--pk", arguments_.partition_key, "partition key value (JSON, else a string)")->required();
    sub->add_option("--id", arguments_.id, "item id")->required();
  }

  void add_if_match(CLI::App* sub) {
    sub->add_option("--if-match", arguments_.if_match, "apply only to this version (an _etag, with its quotes)");
  }

  void add_item() {
    CLI::App* item = group("item", "items");
    const std::pair<const char*, Op> writes[] = {
        {"create", Op::kCreateItem}, {"upsert", Op::kUpsertItem}, {"replace", Op::kReplaceItem}};
    for (const auto& [name, op] : writes) {
      CLI::App* sub = leaf(item, name, std::string(name) + " an item", op);
      database_and_container(sub);
      sub->add_option("JSON", arguments_.document, "the item: inline JSON, @file, or - for stdin")->required();
      add_if_match(sub);
    }
    CLI::App* read = leaf(item, "read", "read an item", Op::kReadItem);
    database_and_container(read);
    add_key(read);
    CLI::App* remove = leaf(item, "delete", "delete an item", Op::kDeleteItem);
    database_and_container(remove);
    add_key(remove);
    add_if_match(remove);
    CLI::App* partition = leaf(item, "delete-partition",
                               "delete every item of one partition key value at once (the collector removes them "
                               "with spare RU)",
                               Op::kDeletePartition);
    database_and_container(partition);
    partition->add_option("--pk", arguments_.partition_key, "partition key value (JSON, else a string)")->required();
    CLI::App* patch = leaf(item, "patch", "patch an item", Op::kPatchItem);
    database_and_container(patch);
    add_key(patch);
    patch->add_option("OPS_JSON", arguments_.document, "JSON array of patch operations: inline, @file, or -")
        ->required();
    patch->add_option("--condition", arguments_.condition,
                      "apply only if this holds for the item: \"FROM c WHERE ...\" (else 412)");
    add_if_match(patch);
    CLI::App* list = leaf(item, "list", "list items, a page at a time", Op::kListItems);
    database_and_container(list);
    list->add_option("--pk", arguments_.partition_key, "only this partition key value");
    list->add_option("--max-items", arguments_.max_items, "page size")->check(CLI::PositiveNumber);
    list->add_option("--continuation", arguments_.continuation, "continue from a previous page");

    import_ = leaf(item, "import", "write the items of a JSONL file (one object per line), several at a time",
                   Op::kUpsertItem);
    database_and_container(import_);
    import_->add_option("FILE", arguments_.file, "the JSONL file, or - for stdin")->required();
    import_->add_option("--concurrency", arguments_.concurrency, "requests in flight at most (default 16)")
        ->check(CLI::Range(size_t{1}, size_t{1024}));
    import_->add_flag("--create", arguments_.create_only, "create items (409 for an existing id) instead of upserting");
    import_->add_flag("-q,--quiet", arguments_.quiet, "no progress output");
    export_ = leaf(item, "export", "write every item as one JSON object per line (JSONL)", Op::kListItems);
    database_and_container(export_);
    export_->add_option("--out", arguments_.out_path, "the file to write (default: stdout)");
    export_->add_flag("--strip-system", arguments_.strip_system, "leave out _rid, _etag, _ts and _expiresAt");
    export_->add_option("--page-size", arguments_.page_items, "items per request (default 1000)")
        ->check(CLI::Range(1u, 1000u));
    export_->add_flag("-q,--quiet", arguments_.quiet, "no closing 'exported N items' line");
  }

  void add_query() {
    CLI::App* query = leaf(&app_, "query", "run a SQL query (Cosmos DB subset), a page at a time", Op::kQuery);
    database_and_container(query);
    query->add_option("SQL", arguments_.sql, "SELECT ... FROM c [WHERE ...] [ORDER BY ...] (see docs/cosmos.md), @file or -")
        ->required();
    query->add_option("--param", arguments_.params, "a parameter, @name=JSON, @name=@file or @name=- (repeatable)");
    query->add_option("--pk", arguments_.partition_key, "only this partition key value");
    query->add_option("--max-items", arguments_.max_items, "page size")->check(CLI::PositiveNumber);
    query->add_option("--continuation", arguments_.continuation, "continue from a previous page");
    query->add_flag("--enable-scan", arguments_.enable_scan, "allow a scan when the container's indexing is none");
  }

  Arguments& arguments_;
  CLI::App app_;
  std::vector<std::pair<CLI::App*, Op>> leaves_;
  CLI::App* import_ = nullptr;
  CLI::App* export_ = nullptr;
};

// The deepest command given so far: `mayfly item read` -> the `read` app. Never null.
const CLI::App* deepest_command(const CLI::App& app) {
  const CLI::App* current = &app;
  while (true) {
    const std::vector<CLI::App*> parsed = current->get_subcommands();
    if (parsed.empty()) return current;
    current = parsed.front();
  }
}

// "mayfly item read DB CONTAINER --pk VALUE --id ID [options]": the command path, its positionals and its required
// options, for an error message that names what is missing and where it goes.
std::string usage_line(const CLI::App& command) {
  std::vector<std::string> path;
  for (const CLI::App* app = &command; app != nullptr; app = app->get_parent()) path.insert(path.begin(), app->get_name());
  std::string out;
  for (const std::string& name : path) out += (out.empty() ? "" : " ") + name;
  const std::vector<const CLI::App*> subcommands = command.get_subcommands(std::function<bool(const CLI::App*)>());
  if (!subcommands.empty()) {
    std::string names;
    for (const CLI::App* sub : subcommands) names += (names.empty() ? "" : "|") + sub->get_name();
    return out + " " + names + " ...";
  }
  bool optional = false;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_positional()) {
      out += " " + option->get_name();
    } else if (option->get_required()) {
      const std::string name = option->get_name();  // "--pk": shown as "--pk PK"
      std::string placeholder = name.substr(name.find_first_not_of('-'));
      for (char& c : placeholder) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += " " + name + (option->get_expected_min() > 0 ? " " + placeholder : "");
    } else if (option->get_name() != "--help") {
      optional = true;
    }
  }
  return out + (optional ? " [options]" : "");
}

Request build_request(Op op, const Arguments& arguments, const CliEnvironment& environment) {
  Request request;
  request.operation = make_operation(op);
  request.database = arguments.database;
  request.container = arguments.container;
  request.options.session_token = arguments.session_token;
  request.options.if_match = arguments.if_match;
  request.options.max_items = arguments.max_items;
  request.options.continuation = arguments.continuation;
  if (!arguments.consistency.empty()) {
    request.options.consistency = consistency_names().at(arguments.consistency);
  }
  std::optional<std::string> partition_key;
  if (arguments.partition_key.has_value()) {
    partition_key = partition_key_json(*arguments.partition_key);
  }
  switch (op) {
    case Op::kCreateItem:
      request.as<api::CreateItem>()->body = load_document(arguments.document, environment);
      break;
    case Op::kUpsertItem:
      request.as<api::UpsertItem>()->body = load_document(arguments.document, environment);
      break;
    case Op::kReplaceItem:
      request.as<api::ReplaceItem>()->body = load_document(arguments.document, environment);
      break;
    case Op::kReadItem:
      request.operation = api::ReadItem{.partition_key = partition_key.value_or(""), .id = arguments.id};
      break;
    case Op::kDeleteItem:
      request.operation = api::DeleteItem{.partition_key = partition_key.value_or(""), .id = arguments.id};
      break;
    case Op::kDeletePartition:
      request.operation = api::DeletePartition{.partition_key = partition_key.value_or("")};
      break;
    case Op::kSetHold: {
      if (!arguments.item_id.empty() && !partition_key) throw UsageError{"hold set --item needs --pk (its partition)"};
      api::SetHold hold;
      hold.id = arguments.id;
      hold.scope = !arguments.item_id.empty() ? api::SetHold::Scope::kItem
                   : partition_key            ? api::SetHold::Scope::kPartition
                                              : api::SetHold::Scope::kContainer;
      hold.partition_key = partition_key.value_or("");
      hold.item_id = arguments.item_id;
      hold.reason = arguments.reason;
      request.operation = std::move(hold);
      break;
    }
    case Op::kReleaseHold:
      request.operation = api::ReleaseHold{.id = arguments.id, .reason = arguments.reason};
      break;
    case Op::kListHolds:
      request.operation = api::ListHolds{.include_released = arguments.all};
      break;
    case Op::kPatchItem:
      request.operation = api::PatchItem{.partition_key = partition_key.value_or(""),
                                         .id = arguments.id,
                                         .operations = load_document(arguments.document, environment),
                                         .condition = arguments.condition};
      break;
    case Op::kListItems:
      request.operation = api::ListItems{.partition_key = partition_key};
      break;
    case Op::kAddMember:
      request.operation = api::AddMember{.id = arguments.member_id, .address = arguments.member_address};
      break;
    case Op::kRemoveMember:
      request.operation = api::RemoveMember{.id = arguments.member_id};
      break;
    case Op::kTransferLeader:
      request.operation = api::TransferLeader{.id = arguments.member_id};
      break;
    case Op::kAdvanceClock:
      request.operation = api::AdvanceClock{.duration = arguments.duration};
      break;
    case Op::kQuery: {
      api::Query& query = *request.as<api::Query>();
      // The SQL text may come from a file or standard input too (SQL never starts with '@').
      query.sql = arguments.sql == "-" || (!arguments.sql.empty() && arguments.sql.front() == '@')
                      ? load_document(arguments.sql, environment)
                      : arguments.sql;
      query.parameters = parameters_json(arguments.params, environment);
      query.partition_key = partition_key;
      query.enable_scan = arguments.enable_scan;
      break;
    }
    case Op::kCreateDatabase:
      request.as<api::CreateDatabase>()->shared_ru_per_second = arguments.throughput;
      break;
    case Op::kUpdateDatabase:
      request.as<api::UpdateDatabase>()->shared_ru_per_second = arguments.throughput;
      break;
    case Op::kCreateContainer:
    case Op::kUpdateContainer: {
      ContainerSettings& settings =
          op == Op::kCreateContainer ? request.as<api::CreateContainer>()->settings
                                     : request.as<api::UpdateContainer>()->settings;
      settings.partition_key_path = arguments.partition_key_path;
      if (arguments.default_ttl == "off") {
        // On create an absent defaultTtl already means "off"; on update it must be said.
        settings.default_ttl = op == Op::kUpdateContainer ? ContainerSettings::DefaultTtl::kRemove
                                                          : ContainerSettings::DefaultTtl::kUnchanged;
      } else if (!arguments.default_ttl.empty()) {
        settings.default_ttl = ContainerSettings::DefaultTtl::kSet;
        settings.default_ttl_json = arguments.default_ttl;  // as written: the server validates (1.5 → 400)
      }
      settings.indexing = indexing_of(arguments.indexing);
      if (arguments.serverless) {
        settings.throughput = ContainerSettings::Throughput::kServerless;
      } else if (arguments.throughput != 0) {
        settings.throughput = ContainerSettings::Throughput::kProvisioned;
        settings.provisioned_ru_per_second = arguments.throughput;
      }
      settings.dry_run = arguments.dry_run;
      settings.force = arguments.force;
      if (arguments.change_feed_retention != 0 && arguments.change_feed != "on") {
        throw UsageError{"--change-feed-retention goes with --change-feed on"};
      }
      if (arguments.change_feed == "on") {
        settings.change_feed = ContainerSettings::ChangeFeed::kOn;
        settings.change_feed_retention_seconds = arguments.change_feed_retention;
      } else if (arguments.change_feed == "off") {
        settings.change_feed = ContainerSettings::ChangeFeed::kOff;
      }
      if (arguments.expiry_warning >= 0) settings.expiry_warning_seconds = static_cast<uint32_t>(arguments.expiry_warning);
      break;
    }
    case Op::kReadChangeFeed: {
      ReadChangeFeed& feed = *request.as<ReadChangeFeed>();
      request.options.max_items = 0;
      request.options.continuation.clear();
      feed.mode = arguments.feed_mode == "latest" ? ReadChangeFeed::Mode::kLatest : ReadChangeFeed::Mode::kAll;
      feed.only_expirations = arguments.only_expirations;
      feed.only_warnings = arguments.only_warnings;
      feed.max_items = arguments.max_items;
      if (!arguments.continuation.empty()) {
        feed.from = ReadChangeFeed::From::kContinuation;
        feed.continuation = arguments.continuation;
      } else if (arguments.feed_from.empty() || arguments.feed_from == "beginning") {
        feed.from = ReadChangeFeed::From::kBeginning;
      } else if (arguments.feed_from == "now") {
        feed.from = ReadChangeFeed::From::kNow;
      } else {
        double seconds = 0;
        const std::string& text = arguments.feed_from;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
        if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) || seconds < 0 ||
            seconds > 9.2e12) {
          throw UsageError{"--from takes beginning, now, or a Unix time in seconds (e.g. 1700000000 or "
                           "1700000000.5); got '" + text + "'"};
        }
        feed.from = ReadChangeFeed::From::kTime;
        feed.time_micros = static_cast<int64_t>(std::llround(seconds * 1e6));
      }
      break;
    }
    default:
      break;
  }
  return request;
}

}  // namespace

std::string partition_key_json(std::string_view value) {
  boost::system::error_code error;
  boost::json::parse(value, error);
  if (!error) {
    return std::string(value);
  }
  return quote(value);
}

CliParse parse_cli(const std::vector<std::string>& args, const CliEnvironment& environment) {
  Arguments arguments;
  Grammar grammar(arguments);
  CliParse result;
  try {
    grammar.app().parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 wants them reversed
    CliCommand command;
    command.options.endpoints = resolve_endpoints(arguments, environment);
    command.options.key = resolve_key(arguments, environment);
    command.options.tls_ca = !arguments.tls_ca.empty() ? arguments.tls_ca : environment.tls_ca.value_or("");
    command.options.request_timeout_ms = arguments.timeout_ms;
    command.request = build_request(grammar.parsed_op(), arguments, environment);
    command.action = grammar.parsed_action();
    if (!arguments.output.empty()) {
      command.output = arguments.output == "table" ? OutputFormat::kTable : OutputFormat::kJson;
    }
    command.import_settings = {.path = arguments.file,
                               .concurrency = arguments.concurrency,
                               .create_only = arguments.create_only,
                               .quiet = arguments.quiet};
    command.export_settings = {.out_path = arguments.out_path,
                               .strip_system = arguments.strip_system,
                               .page_items = arguments.page_items,
                               .quiet = arguments.quiet};
    command.backup_out = arguments.backup_out;
    command.backup_node = arguments.backup_node;
    command.forecast_node = arguments.forecast_node;
    command.follow = arguments.follow;
    result.command = std::move(command);
  } catch (const CLI::RequiredError& error) {
    // CLI11 says "CONTAINER is required"; add the usage of the command it is missing from.
    result.error = std::string("mayfly: ") + error.what() + ": " + usage_line(*deepest_command(grammar.app())) +
                   "\nRun with --help for more information.\n";
    result.exit_code = kExitUsage;
  } catch (const CLI::ParseError& error) {
    std::ostringstream out;
    std::ostringstream err;
    const int code = grammar.app().exit(error, out, err);
    result.output = out.str();
    result.error = err.str().empty() ? std::string() : "mayfly: " + err.str();  // --help writes to out only
    result.exit_code = code == 0 ? kExitOk : kExitUsage;
  } catch (const UsageError& error) {
    result.error = "mayfly: " + error.message + "\nRun with --help for more information.\n";
    result.exit_code = kExitUsage;
  }
  return result;
}

std::string format_response(const Response& response) {
  std::string out = "{\"status\":" + std::to_string(response.status);
  out += ",\"substatus\":" + std::to_string(response.substatus);
  out += ",\"message\":" + quote(response.message);
  out += ",\"requestCharge\":" + format_double(response.request_charge);
  out += ",\"sessionToken\":" + quote(response.session_token);
  out += ",\"etag\":" + quote(response.etag);
  out += ",\"servedBy\":" + std::to_string(response.served_by);
  out += ",\"body\":";
  if (response.body.empty()) {
    out += "null";
  } else {
    boost::system::error_code error;
    boost::json::parse(response.body, error);
    out += error ? quote(response.body) : compact_json(response.body);
  }
  if (!response.continuation.empty()) {
    out += ",\"continuation\":" + quote(response.continuation);
  }
  out += "}";
  return out;
}

int exit_code_for(const Response& response) { return response.ok() ? kExitOk : kExitRequestFailed; }

}  // namespace mayfly::client
