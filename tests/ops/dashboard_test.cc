// SPEC §14 O5: the Grafana dashboard (deploy/grafana/rsc-dashboard.json), checked by a test
// of ours since Grafana is not packaged in Debian: it parses, has the shape Grafana imports
// (panels with targets, unique ids, a grid without overlaps, a Prometheus data-source
// variable that every panel uses), every variable it refers to is defined, and every PromQL
// expression in it is valid PromQL — promtool parses each one as the expression of a
// recording rule. That its metrics exist is ops_live_test.cc's part.

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fstream>
#include <regex>
#include <set>

#include "support/ops_assets.h"

namespace rsc {
namespace {

namespace json = boost::json;
using testing::DashboardQueries;
using testing::DashboardQuery;
using testing::DashboardVariableSelectors;

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(testing::LoadDashboard(&dashboard_, &error)) << error;
    ASSERT_TRUE(dashboard_.is_object());
  }
  const json::object& D() const { return dashboard_.as_object(); }
  std::vector<const json::object*> Panels() const {
    std::vector<const json::object*> out;
    for (const json::value& p : D().at("panels").as_array()) out.push_back(&p.as_object());
    return out;
  }
  std::set<std::string> Variables() const {
    std::set<std::string> out;
    for (const json::value& v : D().at("templating").as_object().at("list").as_array()) {
      out.insert(std::string(v.at("name").as_string()));
    }
    return out;
  }
  json::value dashboard_;
};

TEST_F(DashboardTest, IsADashboardGrafanaImports) {
  EXPECT_FALSE(D().at("title").as_string().empty());
  const std::string uid(D().at("uid").as_string());
  EXPECT_TRUE(!uid.empty() && uid.size() <= 40) << "Grafana uids are 1..40 characters";
  EXPECT_GE(D().at("schemaVersion").as_int64(), 30);
  EXPECT_TRUE(D().at("panels").is_array());
  EXPECT_TRUE(D().at("time").is_object());
  // Imported as it is: no __inputs to fill in, the data source is a variable instead.
  EXPECT_FALSE(D().contains("__inputs"));
  EXPECT_FALSE(D().contains("id")) << "an exported id would clash on import";
}

TEST_F(DashboardTest, HasAPrometheusDataSourceVariableEveryPanelUses) {
  const json::array& vars = D().at("templating").as_object().at("list").as_array();
  const json::object* ds = nullptr;
  for (const json::value& v : vars) {
    if (v.at("type").as_string() == "datasource") ds = &v.as_object();
  }
  ASSERT_NE(ds, nullptr) << "no data-source variable";
  EXPECT_EQ(ds->at("name").as_string(), "datasource");
  EXPECT_EQ(ds->at("query").as_string(), "prometheus");
  const std::string ref = "${datasource}";
  auto uses_variable = [&](const json::value& d) {
    return d.is_object() && d.as_object().at("type").as_string() == "prometheus" &&
           d.as_object().at("uid").as_string() == ref;
  };
  for (const json::object* p : Panels()) {
    if (p->at("type").as_string() == "row") continue;
    EXPECT_TRUE(uses_variable(p->at("datasource"))) << p->at("title");
    for (const json::value& t : p->at("targets").as_array()) {
      EXPECT_TRUE(uses_variable(t.at("datasource"))) << p->at("title");
    }
  }
  for (const json::value& v : vars) {
    if (v.at("type").as_string() == "query") {
      EXPECT_TRUE(uses_variable(v.at("datasource")));
    }
  }
}

TEST_F(DashboardTest, PanelsHaveUniqueIdsTargetsAndAGridWithoutOverlaps) {
  static const std::set<std::string> kTypes = {"row",   "timeseries", "stat",
                                               "table", "gauge",      "bargauge"};
  std::set<int64_t> ids;
  struct Box {
    int64_t x, y, w, h;
    std::string title;
  };
  std::vector<Box> boxes;
  for (const json::object* p : Panels()) {
    const std::string title(p->at("title").as_string());
    EXPECT_FALSE(title.empty());
    ASSERT_TRUE(p->at("id").is_int64()) << title;
    EXPECT_TRUE(ids.insert(p->at("id").as_int64()).second) << "panel id used twice: " << title;
    const std::string type(p->at("type").as_string());
    EXPECT_TRUE(kTypes.count(type)) << title << ": unknown panel type " << type;
    const json::object& g = p->at("gridPos").as_object();
    Box b{g.at("x").as_int64(), g.at("y").as_int64(), g.at("w").as_int64(), g.at("h").as_int64(),
          title};
    EXPECT_TRUE(b.x >= 0 && b.y >= 0 && b.w >= 1 && b.h >= 1 && b.x + b.w <= 24) << title;
    for (const Box& o : boxes) {
      const bool overlap = b.x < o.x + o.w && o.x < b.x + b.w && b.y < o.y + o.h && o.y < b.y + b.h;
      EXPECT_FALSE(overlap) << "'" << title << "' overlaps '" << o.title << "'";
    }
    boxes.push_back(b);
    if (type == "row") {
      EXPECT_FALSE(p->contains("targets")) << title;
      continue;
    }
    const json::array& targets = p->at("targets").as_array();
    EXPECT_FALSE(targets.empty()) << title << " has no query";
    std::set<std::string> refs;
    for (const json::value& t : targets) {
      EXPECT_TRUE(refs.insert(std::string(t.at("refId").as_string())).second) << title;
      EXPECT_FALSE(t.at("expr").as_string().empty()) << title;
    }
  }
  EXPECT_GE(ids.size(), 20u);
}

TEST_F(DashboardTest, EveryVariableUsedIsDefined) {
  static const std::set<std::string> kBuiltins = {"__rate_interval", "__interval", "__range",
                                                  "__all"};
  const std::set<std::string> defined = Variables();
  std::vector<DashboardQuery> queries = DashboardQueries(dashboard_);
  for (const DashboardQuery& q : DashboardVariableSelectors(dashboard_)) queries.push_back(q);
  const std::regex var(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
  for (const DashboardQuery& q : queries) {
    for (auto it = std::sregex_iterator(q.expr.begin(), q.expr.end(), var);
         it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      EXPECT_TRUE(defined.count(name) || kBuiltins.count(name))
          << q.where << " uses $" << name << ", which the dashboard does not define";
    }
  }
}

// Grafana variables replaced by values Prometheus accepts, as Grafana would at query time.
std::string Substitute(std::string expr) {
  const std::pair<std::string, std::string> kValues[] = {{"$__rate_interval", "5m"},
                                                         {"$__interval", "1m"},
                                                         {"$__range", "1h"},
                                                         {"$stream", ".*"},
                                                         {"$group", ".*"}};
  for (const auto& [from, to] : kValues) {
    for (size_t at; (at = expr.find(from)) != std::string::npos;) expr.replace(at, from.size(), to);
  }
  return expr;
}

TEST_F(DashboardTest, EveryExpressionIsValidPromQL) {
  std::string out;
  ASSERT_EQ(testing::RunCommand("promtool --version", &out), 0)
      << "promtool is missing (Debian package 'prometheus', installed by scripts/bootstrap.sh): "
      << out;
  std::vector<DashboardQuery> queries = DashboardQueries(dashboard_);
  for (const DashboardQuery& q : DashboardVariableSelectors(dashboard_)) queries.push_back(q);
  ASSERT_FALSE(queries.empty());
  json::array rules;
  for (size_t i = 0; i < queries.size(); ++i) {
    rules.push_back(json::object{{"record", "dashboard:query_" + std::to_string(i)},
                                 {"expr", Substitute(queries[i].expr)}});
  }
  // JSON is YAML: promtool reads the file as it is.
  const std::string path =
      ::testing::TempDir() + "/rsc-dashboard-rules-" + std::to_string(::getpid()) + ".yml";
  {
    std::ofstream f(path);
    f << json::serialize(json::object{
        {"groups", json::array{json::object{{"name", "dashboard"}, {"rules", rules}}}}});
  }
  const int rc = testing::RunCommand("promtool check rules " + path, &out);
  std::remove(path.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("SUCCESS: " + std::to_string(queries.size()) + " rules found"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace rsc
