// The TTL forecast from the library (docs/ttl.md, "Forecast"): every node answers for itself — its own
// applied state, backlog and collector — so `container_forecast` asks each reachable member (or one) in turn, each
// over a connection pinned to that node (proto Request.containerForecast is never forwarded).
// Thread-safety: one thread, like Client.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"

namespace mayfly::client {

struct NodeForecast {
  uint64_t node = 0;
  std::string address;
  Response response;  // 200 with the forecast JSON in body, or the node's error
};

struct ForecastAnswers {
  std::vector<NodeForecast> nodes;  // in node id order
  std::string error;                // non-empty: the members could not be found (nothing was asked)
};

// Members from cluster status (through `options`' endpoints), then database/container's forecast from every
// reachable one, or only from node `node` (0: all).
ForecastAnswers container_forecast(const ClientOptions& options, std::string_view database,
                                   std::string_view container, uint64_t node = 0);

}  // namespace mayfly::client
