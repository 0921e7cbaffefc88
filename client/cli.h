// The `mayfly` command line: parsing arguments into a ClientOptions + Request (or an import/export), and printing a
// Response as one JSON object (cli_output.h prints tables). Kept apart from main() (mayfly_cli.cc) so tests can drive
// it without a process or a server.
//
// Grammar (global options first; they are also accepted after the command):
//   mayfly [--endpoints H:P,H:P] [--key-file F] [--tls-ca CA.pem] [--consistency strong|bounded|session|eventual] [--session-token T]
//          [--timeout-ms N] [-o json|table] <command>
//   cluster status | cluster add-member ID H:P | cluster remove-member ID | cluster transfer-leader ID
//   (-o: table on a terminal, JSON otherwise; see cli_output.h)
//   backup create --out FILE [--node ID]                         (client/backup_cli.h)
//   db create DB | db delete DB | db list
//   container create DB CONTAINER --pk /path [--default-ttl N|-1] [--indexing consistent|none] [--throughput RU | --serverless]
//             [--change-feed on|off [--change-feed-retention SECONDS]]
//   container get DB CONTAINER | container set DB CONTAINER [--default-ttl N|-1|off] [--indexing ...] [--throughput RU]
//             [--change-feed on|off [--change-feed-retention SECONDS]]
//   container delete DB CONTAINER | container list DB
//   container forecast DB CONTAINER [--node ID]                   (client/forecast_cli.h)
//   item create|upsert|replace DB CONTAINER JSON [--if-match ETAG]        JSON: inline, @file, or - for stdin
//   item read|delete DB CONTAINER --pk VALUE --id ID [--if-match ETAG (delete)]
//   item patch DB CONTAINER --pk VALUE --id ID OPS_JSON [--if-match ETAG]
//   item list DB CONTAINER [--pk VALUE] [--max-items N] [--continuation TOKEN]
//   item import DB CONTAINER FILE.jsonl|- [--concurrency N] [--create] [--quiet]      (cli_import.h)
//   item export DB CONTAINER [--out FILE] [--strip-system] [--page-size N] [--quiet]  (cli_export.h)
//   changefeed DB CONTAINER [--mode all|latest] [--from beginning|now|TIME] [--continuation TOKEN] [--only-expirations]
//              [--max-items N] [--follow]                     (JSON Lines: client/changefeed_cli.h)
//   query DB CONTAINER SQL|@file|- [--param @name=JSON|@file|-]... [--pk VALUE] [--max-items N] [--continuation TOKEN] [--enable-scan]
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli_export.h"
#include "client/cli_import.h"
#include "client/cli_output.h"
#include "client/client.h"

namespace mayfly::client {

inline constexpr std::string_view kDefaultEndpoints = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103";
inline constexpr int kExitOk = 0;         // status < 400 (or --help)
inline constexpr int kExitRequestFailed = 1;  // status >= 400, including the client's own 408/503
inline constexpr int kExitUsage = 2;      // bad arguments: nothing was sent

// What the CLI reads besides its arguments. Thread-safety: a value (the stream is used from one thread).
struct CliEnvironment {
  std::optional<std::string> endpoints;   // $MAYFLY_ENDPOINTS; --endpoints wins over it
  std::optional<std::string> key;         // $MAYFLY_KEY; --key and --key-file win over it
  std::optional<std::string> key_file;    // $MAYFLY_KEY_FILE; used when neither --key, --key-file nor $MAYFLY_KEY is
  std::optional<std::string> tls_ca;      // $MAYFLY_TLS_CA; --tls-ca wins over it
  std::istream* standard_input = nullptr;  // read for a "-" JSON argument; null: "-" is a usage error
};

// What a command line does: send one request, or import or export a container's items.
enum class CliAction { kRequest, kImport, kExport };

// A parsed command line ready to run. Thread-safety: a value.
struct CliCommand {
  ClientOptions options;
  Request request;  // kImport/kExport: the database and container (and consistency, session token)
  CliAction action = CliAction::kRequest;
  std::optional<OutputFormat> output;  // -o; unset: table on a terminal, JSON otherwise (choose_output)
  ImportSettings import_settings;      // kImport
  ExportSettings export_settings;      // kExport
  std::string backup_out;    // backup create (request.kind() == Op::kBackupOpen): client/backup_cli.h
  uint64_t backup_node = 0;
  uint64_t forecast_node = 0;  // container forecast (request.kind() == Op::kContainerForecast): client/forecast_cli.h
  bool follow = false;         // changefeed --follow (request.kind() == Op::kReadChangeFeed): client/changefeed_cli.h
};

// The outcome of parsing: a command to run, or text to print and an exit code (help: 0, usage error: 2).
// Thread-safety: a value.
struct CliParse {
  std::optional<CliCommand> command;
  int exit_code = kExitOk;
  std::string output;  // for stdout (help)
  std::string error;   // for stderr (what was wrong and how to get help)
};

// Parses the arguments after the program name.
CliParse parse_cli(const std::vector<std::string>& args, const CliEnvironment& environment);

// --pk VALUE: the JSON value when VALUE parses as JSON (42, true, "x", null), else VALUE as a JSON string.
std::string partition_key_json(std::string_view value);

// The response as one line of JSON:
// {"status":..,"substatus":..,"message":..,"requestCharge":..,"sessionToken":..,"etag":..,"servedBy":..,
//  "body":<the body as JSON, null when empty>[,"continuation":..]}
// A body that is not JSON is printed as a JSON string rather than dropped.
std::string format_response(const Response& response);

int exit_code_for(const Response& response);

}  // namespace mayfly::client
