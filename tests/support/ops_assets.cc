#include "support/ops_assets.h"

#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>

#include "support/promql_names.h"
#include "support/yaml_json.h"

namespace rsc::testing {
namespace {

namespace json = boost::json;

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

void CollectPanels(const json::array& panels, std::vector<const json::object*>* out) {
  for (const json::value& p : panels) {
    if (!p.is_object()) continue;
    out->push_back(&p.as_object());
    if (const json::value* nested = p.as_object().if_contains("panels");
        nested != nullptr && nested->is_array()) {
      CollectPanels(nested->as_array(), out);
    }
  }
}

}  // namespace

std::string SourcePath(const std::string& relative) {
  return std::string(RSC_SOURCE_DIR) + "/" + relative;
}

bool LoadAlertRules(json::value* doc, std::vector<AlertRule>* rules, std::string* error) {
  const std::string path = SourcePath("deploy/prometheus/alerts.yml");
  if (!LoadYamlFileAsJson(path, doc, error)) return false;
  const json::value* groups = doc->is_object() ? doc->as_object().if_contains("groups") : nullptr;
  if (groups == nullptr || !groups->is_array()) {
    *error = path + ": no 'groups' list";
    return false;
  }
  for (const json::value& g : groups->as_array()) {
    const json::value* list = g.is_object() ? g.as_object().if_contains("rules") : nullptr;
    if (list == nullptr || !list->is_array()) {
      *error = path + ": a group without a 'rules' list";
      return false;
    }
    for (const json::value& r : list->as_array()) {
      if (!r.is_object() || Str(r.as_object(), "alert").empty()) {
        *error = path + ": only alerting rules are expected, got " + json::serialize(r);
        return false;
      }
      rules->push_back({Str(g.as_object(), "name"), Str(r.as_object(), "alert"),
                        Str(r.as_object(), "expr"), &r.as_object()});
    }
  }
  return true;
}

bool LoadDashboard(json::value* dashboard, std::string* error) {
  const std::string path = SourcePath("deploy/grafana/rsc-dashboard.json");
  std::string text;
  if (!ReadTextFile(path, &text, error)) return false;
  boost::system::error_code ec;
  *dashboard = json::parse(text, ec);
  if (ec) {
    *error = path + ": not JSON: " + ec.message();
    return false;
  }
  return true;
}

std::vector<DashboardQuery> DashboardQueries(const json::value& dashboard) {
  std::vector<DashboardQuery> out;
  const json::value* panels =
      dashboard.is_object() ? dashboard.as_object().if_contains("panels") : nullptr;
  if (panels == nullptr || !panels->is_array()) return out;
  std::vector<const json::object*> all;
  CollectPanels(panels->as_array(), &all);
  for (const json::object* p : all) {
    const json::value* targets = p->if_contains("targets");
    if (targets == nullptr || !targets->is_array()) continue;
    const json::value* id = p->if_contains("id");
    for (const json::value& t : targets->as_array()) {
      if (!t.is_object()) continue;
      out.push_back({"panel " + (id ? json::serialize(*id) : std::string("?")) + " '" +
                         Str(*p, "title") + "' target " + Str(t.as_object(), "refId"),
                     Str(t.as_object(), "expr")});
    }
  }
  return out;
}

std::vector<DashboardQuery> DashboardVariableSelectors(const json::value& dashboard) {
  std::vector<DashboardQuery> out;
  const json::value* templating =
      dashboard.is_object() ? dashboard.as_object().if_contains("templating") : nullptr;
  const json::value* list = templating != nullptr && templating->is_object()
                                ? templating->as_object().if_contains("list")
                                : nullptr;
  if (list == nullptr || !list->is_array()) return out;
  for (const json::value& v : list->as_array()) {
    if (!v.is_object() || Str(v.as_object(), "type") != "query") continue;
    std::string query;
    const json::value* q = v.as_object().if_contains("query");
    if (q != nullptr && q->is_string()) query = std::string(q->as_string());
    if (q != nullptr && q->is_object()) query = Str(q->as_object(), "query");
    constexpr std::string_view kLabelValues = "label_values(";
    if (query.rfind(kLabelValues, 0) == 0 && query.back() == ')') {
      // label_values(<selector>, <label>): the selector ends at the last top-level comma.
      const std::string args =
          query.substr(kLabelValues.size(), query.size() - kLabelValues.size() - 1);
      int depth = 0;
      size_t comma = std::string::npos;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == '{' || args[i] == '(') ++depth;
        if (args[i] == '}' || args[i] == ')') --depth;
        if (args[i] == ',' && depth == 0) comma = i;
      }
      query = args.substr(0, comma);
    }
    out.push_back({"variable $" + Str(v.as_object(), "name"), query});
  }
  return out;
}

std::map<std::string, std::string> MetricNamesUsedByOpsFiles(std::string* error) {
  std::map<std::string, std::string> names;
  json::value doc;
  std::vector<AlertRule> rules;
  if (!LoadAlertRules(&doc, &rules, error)) return {};
  for (const AlertRule& r : rules) {
    for (const std::string& n : MetricNamesInPromQL(r.expr)) names.emplace(n, "alert " + r.name);
  }
  json::value dashboard;
  if (!LoadDashboard(&dashboard, error)) return {};
  std::vector<DashboardQuery> queries = DashboardQueries(dashboard);
  for (const DashboardQuery& q : DashboardVariableSelectors(dashboard)) queries.push_back(q);
  for (const DashboardQuery& q : queries) {
    for (const std::string& n : MetricNamesInPromQL(q.expr))
      names.emplace(n, "dashboard " + q.where);
  }
  return names;
}

int RunCommand(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output->append(buf.data(), n);
  const int status = pclose(pipe);
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string MarkdownAnchor(const std::string& heading) {
  std::string out;
  for (char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_') {
      out += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

}  // namespace rsc::testing
