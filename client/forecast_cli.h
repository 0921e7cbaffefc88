// `mayfly container forecast DB C [--node ID]` (docs/ttl.md, "Forecast"): asks every reachable node (or
// one) for its TTL forecast of the container (client/forecast.h) and prints, with -o json, one object
// {"nodes":[{"node","address","status","message","body"}...]} with every node's full figures; with -o table, per node
// a summary (backlog, reclaim capacity and whether it was measured, expiring within the hour and the day, the
// projected peak and its drain time) and a histogram of the minutes, then hours, in which items expire (empty ones
// left out). Exit: 0 when every node asked answered, 1 otherwise.
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "client/cli_output.h"
#include "client/forecast.h"

namespace mayfly::client {

// One node's answer as text for people (the table form).
std::string forecast_text(const NodeForecast& answer);
// The answers as one JSON object (the json form).
std::string forecast_json(const ForecastAnswers& answers);

int run_forecast(const ClientOptions& options, std::string_view database, std::string_view container, uint64_t node,
                 OutputFormat format, std::ostream& out, std::ostream& err);

}  // namespace mayfly::client
