#pragma once
// The operations files of SPEC §14 O5 as data, for the tests in tests/ops/: the Prometheus
// alert rules (deploy/prometheus/alerts.yml), the Grafana dashboard
// (deploy/grafana/rsc-dashboard.json) and the PromQL in them, plus a way to run promtool.
//
// Thread safety: none needed (pure functions over files; RunCommand spawns a shell).

#include <boost/json.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace rsc::testing {

// <source dir>/<relative>.
std::string SourcePath(const std::string& relative);

struct AlertRule {
  std::string group;  // the rule group's name
  std::string name;   // `alert:`
  std::string expr;
  const boost::json::object* rule = nullptr;  // the whole rule, inside the loaded document
};

// Loads deploy/prometheus/alerts.yml (kept alive in *doc). Recording rules are refused (the
// file has none; a test would have to look at them separately).
bool LoadAlertRules(boost::json::value* doc, std::vector<AlertRule>* rules, std::string* error);

// One PromQL expression of the dashboard and where it is.
struct DashboardQuery {
  std::string where;  // e.g. "panel 7 'Heartbeats by status' target A"
  std::string expr;
};

bool LoadDashboard(boost::json::value* dashboard, std::string* error);
// Every target expression of every panel (rows' nested panels included).
std::vector<DashboardQuery> DashboardQueries(const boost::json::value& dashboard);
// The metric selector of every query variable: "label_values(<selector>, <label>)" gives
// "<selector>"; other variable queries are returned whole.
std::vector<DashboardQuery> DashboardVariableSelectors(const boost::json::value& dashboard);

// Every metric name the dashboard and the alert rules select, with one place each is used.
std::map<std::string, std::string> MetricNamesUsedByOpsFiles(std::string* error);

// Runs `command` with /bin/sh, stdout and stderr together in *output; returns the exit
// status (-1 if it could not be run).
int RunCommand(const std::string& command, std::string* output);

// "A heading (with) punctuation" -> "a-heading-with-punctuation", as GitHub anchors it.
std::string MarkdownAnchor(const std::string& heading);

}  // namespace rsc::testing
