// mayfly: the command line client. Parses its arguments (client/cli.h), sends one request through the client library
// and prints the response as one JSON object. Exit status: 0 for status < 400, 1 otherwise, 2 for usage errors.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <kj/exception.h>

#include "client/backup_cli.h"
#include "client/cli.h"
#include "client/client.h"

int main(int argc, char** argv) {
  using namespace mayfly::client;
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
  if (parsed.command->request.op == Op::kBackupOpen) {
    try {
      return run_backup(BackupCommand{parsed.command->options, parsed.command->backup_out,
                                      parsed.command->backup_node, ::isatty(2) == 1});
    } catch (const kj::Exception& exception) {
      std::cerr << "mayfly backup: client failure: " << exception.getDescription().cStr() << std::endl;
      return 1;
    }
  }
  Response response;
  try {
    Client client(parsed.command->options);
    response = client.execute(parsed.command->request);
  } catch (const kj::Exception& exception) {
    // The library reports network trouble as responses; this is for what it could not (event loop set-up, a bug).
    response.status = 503;
    response.message = std::string("client failure: ") + exception.getDescription().cStr();
  }
  std::cout << format_response(response) << std::endl;
  return exit_code_for(response);
}
