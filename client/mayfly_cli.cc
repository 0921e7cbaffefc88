// mayfly: the command line client. Parses its arguments (client/cli.h), sends one request through the client library
// (or imports/exports a container's items, or takes a backup) and prints the response: tables on a terminal, one JSON object otherwise
// (-o json|table chooses). Exit status: 0 for status < 400, 1 otherwise, 2 for usage errors.
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <kj/exception.h>

#include "client/backup_cli.h"
#include "client/changefeed_cli.h"
#include "client/cli.h"
#include "client/cli_output.h"
#include "client/client.h"
#include "client/forecast_cli.h"

namespace {

using namespace mayfly::client;

// changefeed --follow ends cleanly (exit 0, continuation printed) on SIGINT / SIGTERM.
std::atomic<bool> interrupted{false};
void on_interrupt(int) { interrupted.store(true); }

// The container's partition key path, for the PARTITION KEY column of item tables; empty when it cannot be read.
std::string partition_key_path(Client& client, const Request& request) {
  Request get;
  get.operation = mayfly::api::GetContainer{};
  get.database = request.database;
  get.container = request.container;
  get.options.consistency = request.options.consistency;
  const Response response = client.execute(get);
  if (!response.ok()) return {};
  const Table table = containers_table("[" + response.body + "]");
  return table.rows.empty() || table.rows[0][1] == "-" ? std::string() : table.rows[0][1];
}

int run_request(Client& client, const CliCommand& command, OutputFormat format) {
  const Response response = client.execute(command.request);
  if (format == OutputFormat::kJson) {
    std::cout << format_response(response) << std::endl;
    return exit_code_for(response);
  }
  std::string path;
  if (response.ok() && (command.request.kind() == Op::kListItems || command.request.kind() == Op::kQuery)) {
    path = partition_key_path(client, command.request);
  }
  const FormattedOutput output = format_response_table(command.request, response, path);
  std::cout << output.out << std::flush;
  std::cerr << output.err;
  return exit_code_for(response);
}

int run_import_command(Client& client, const CliCommand& command, OutputFormat format) {
  const ImportSettings& settings = command.import_settings;
  uint64_t total_bytes = 0;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (settings.path != "-") {
    file.open(settings.path, std::ios::binary);
    if (!file) {
      std::cerr << "mayfly: import: cannot read '" << settings.path << "'\n";
      return kExitUsage;
    }
    std::error_code error;
    if (std::filesystem::is_regular_file(settings.path, error)) total_bytes = std::filesystem::file_size(settings.path, error);
    if (error) total_bytes = 0;
    in = &file;
  }
  return run_import(client, command.request, settings, *in, total_bytes, format, std::cout, std::cerr,
                    ::isatty(STDERR_FILENO) == 1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  CliEnvironment environment;
  if (const char* endpoints = std::getenv("MAYFLY_ENDPOINTS"); endpoints != nullptr) {
    environment.endpoints = endpoints;
  }
  if (const char* key = std::getenv("MAYFLY_KEY"); key != nullptr) environment.key = key;
  if (const char* key_file = std::getenv("MAYFLY_KEY_FILE"); key_file != nullptr) environment.key_file = key_file;
  if (const char* tls_ca = std::getenv("MAYFLY_TLS_CA"); tls_ca != nullptr) environment.tls_ca = tls_ca;
  environment.standard_input = &std::cin;

  CliParse parsed = parse_cli(args, environment);
  if (!parsed.command.has_value()) {
    std::cout << parsed.output;
    std::cerr << parsed.error;
    return parsed.exit_code;
  }
  if (parsed.command->request.kind() == Op::kBackupOpen) {
    try {
      return run_backup(BackupCommand{parsed.command->options, parsed.command->backup_out,
                                      parsed.command->backup_node, ::isatty(2) == 1});
    } catch (const kj::Exception& exception) {
      std::cerr << "mayfly backup: client failure: " << exception.getDescription().cStr() << std::endl;
      return 1;
    }
  }
  const CliCommand& command = *parsed.command;
  const OutputFormat format = choose_output(command.output, ::isatty(STDOUT_FILENO) == 1);
  if (command.request.kind() == Op::kContainerForecast) {
    try {
      return run_forecast(command.options, command.request.database, command.request.container,
                          command.forecast_node, format, std::cout, std::cerr);
    } catch (const kj::Exception& exception) {
      std::cerr << "mayfly forecast: client failure: " << exception.getDescription().cStr() << std::endl;
      return 1;
    }
  }
  try {
    Client client(command.options);
    if (command.request.kind() == Op::kReadChangeFeed) {
      struct sigaction action {};
      action.sa_handler = on_interrupt;
      sigemptyset(&action.sa_mask);
      ::sigaction(SIGINT, &action, nullptr);
      ::sigaction(SIGTERM, &action, nullptr);
      return run_changefeed(client, command, std::cout, std::cerr, interrupted);
    }
    switch (command.action) {
      case CliAction::kImport: return run_import_command(client, command, format);
      case CliAction::kExport: return run_export(client, command.request, command.export_settings, std::cout, std::cerr);
      case CliAction::kRequest: return run_request(client, command, format);
    }
  } catch (const kj::Exception& exception) {
    // The library reports network trouble as responses; this is for what it could not (event loop set-up, a bug).
    Response response;
    response.status = 503;
    response.message = std::string("client failure: ") + exception.getDescription().cStr();
    if (format == OutputFormat::kJson) {
      std::cout << format_response(response) << std::endl;
    } else {
      std::cerr << "mayfly: " << response.message << "\n";
    }
    return exit_code_for(response);
  }
  return kExitRequestFailed;
}
