#include "client/forecast.h"

#include <boost/json.hpp>

#include <algorithm>

namespace mayfly::client {

ForecastAnswers container_forecast(const ClientOptions& options, std::string_view database,
                                   std::string_view container, uint64_t node) {
  ForecastAnswers answers;
  std::vector<std::pair<uint64_t, std::string>> members;
  {
    Client cluster(options);
    Request status;
    status.operation = api::ClusterStatus{};
    const Response answer = cluster.execute(status);
    if (!answer.ok()) {
      answers.error = "cluster status failed (" + std::to_string(answer.status) + "): " + answer.message;
      return answers;
    }
    boost::system::error_code parse_error;
    const boost::json::value body = boost::json::parse(answer.body, parse_error);
    if (parse_error || !body.is_object() || !body.as_object().contains("nodes") ||
        !body.at("nodes").is_array()) {
      answers.error = "cluster status answered an unexpected body";
      return answers;
    }
    for (const boost::json::value& entry : body.at("nodes").as_array()) {
      if (!entry.is_object()) continue;
      const boost::json::object& member = entry.as_object();
      if (!member.contains("id") || !member.contains("address") || !member.at("address").is_string()) continue;
      const uint64_t id = member.at("id").to_number<uint64_t>();
      const bool reachable = member.contains("reachable") && member.at("reachable").is_bool() &&
                             member.at("reachable").as_bool();
      if (node != 0 ? id != node : !reachable) continue;
      members.emplace_back(id, std::string(member.at("address").as_string()));
    }
  }
  if (members.empty()) {
    answers.error = node != 0 ? "node " + std::to_string(node) + " is not a member of the cluster"
                              : "no reachable node";
    return answers;
  }
  std::sort(members.begin(), members.end());
  for (const auto& [id, address] : members) {
    ClientOptions pinned = options;
    pinned.endpoints = {address};
    Client client(pinned);
    Request request;
    request.operation = api::ContainerForecast{};
    request.database = std::string(database);
    request.container = std::string(container);
    answers.nodes.push_back(NodeForecast{id, address, client.execute(request)});
  }
  return answers;
}

}  // namespace mayfly::client
