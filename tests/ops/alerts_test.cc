// SPEC §14 O5: the Prometheus alert rules (deploy/prometheus/alerts.yml) against the
// runbook and their own unit tests. promtool checks the syntax and runs the unit tests
// (ctest tests promtool_check_rules, promtool_test_rules); this test checks what promtool
// cannot: every alert has a `for`, a severity and a summary, points to an existing section
// of docs/runbook.md that names it back, every situation of the runbook has an alert, and
// alerts_test.yml makes every alert fire and also keeps it quiet at least once.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/ops_assets.h"
#include "support/yaml_json.h"

namespace rsc {
namespace {

namespace json = boost::json;
using testing::AlertRule;

constexpr const char* kRunbookPrefix = "docs/runbook.md#";

std::string Field(const json::object& o, std::string_view section, std::string_view key) {
  const json::value* s = o.if_contains(section);
  if (s == nullptr || !s->is_object()) return "";
  const json::value* v = s->as_object().if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
}

class AlertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(testing::LoadAlertRules(&doc_, &rules_, &error)) << error;
    ASSERT_FALSE(rules_.empty());
    std::string runbook;
    ASSERT_TRUE(testing::ReadTextFile(testing::SourcePath("docs/runbook.md"), &runbook, &error))
        << error;
    // Level-2 headings are the situations: anchor -> the section's text.
    std::istringstream in(runbook);
    std::string line, anchor;
    while (std::getline(in, line)) {
      if (line.rfind("## ", 0) == 0) {
        anchor = testing::MarkdownAnchor(line.substr(3));
        sections_[anchor];
      } else if (!anchor.empty()) {
        sections_[anchor] += line + "\n";
      }
    }
  }
  json::value doc_;
  std::vector<AlertRule> rules_;
  std::map<std::string, std::string> sections_;
};

TEST_F(AlertsTest, EveryAlertHasForSeverityAndSummary) {
  std::set<std::string> names;
  for (const AlertRule& r : rules_) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name << " defined twice";
    EXPECT_TRUE(std::regex_match(r.name, std::regex("Rsc[A-Z][A-Za-z]+"))) << r.name;
    EXPECT_FALSE(r.expr.empty()) << r.name;
    const json::value* f = r.rule->if_contains("for");
    EXPECT_TRUE(f != nullptr && f->is_string() &&
                std::regex_match(std::string(f->as_string()), std::regex("[0-9]+[smh]")))
        << r.name << ": every alert states how long its condition must hold";
    const std::string severity = Field(*r.rule, "labels", "severity");
    EXPECT_TRUE(severity == "critical" || severity == "warning" || severity == "info")
        << r.name << ": severity '" << severity << "'";
    EXPECT_FALSE(Field(*r.rule, "annotations", "summary").empty()) << r.name;
  }
}

TEST_F(AlertsTest, EveryAlertPointsToARunbookSectionThatNamesIt) {
  for (const AlertRule& r : rules_) {
    const std::string url = Field(*r.rule, "annotations", "runbook_url");
    ASSERT_EQ(url.rfind(kRunbookPrefix, 0), 0u) << r.name << ": runbook_url '" << url << "'";
    const std::string anchor = url.substr(std::string(kRunbookPrefix).size());
    auto it = sections_.find(anchor);
    ASSERT_NE(it, sections_.end()) << r.name << ": docs/runbook.md has no section #" << anchor;
    EXPECT_NE(it->second.find("`" + r.name + "`"), std::string::npos)
        << "docs/runbook.md #" << anchor << " does not name its alert `" << r.name << "`";
  }
}

// The seven situations of SPEC §11 (runbook §1–§7) and the reshard one (§7a) each have at
// least one alert.
TEST_F(AlertsTest, EveryRunbookSituationHasAnAlert) {
  std::set<std::string> covered;
  for (const AlertRule& r : rules_) {
    covered.insert(
        Field(*r.rule, "annotations", "runbook_url").substr(std::string(kRunbookPrefix).size()));
  }
  int situations = 0;
  for (const auto& [anchor, text] : sections_) {
    if (!std::regex_match(anchor, std::regex("[1-7]a?-.*"))) continue;
    if (anchor == "7b-stream-layout-lost") continue;  // no metric shows it: requests fail (§5's)
    ++situations;
    EXPECT_TRUE(covered.count(anchor)) << "runbook section #" << anchor << " has no alert";
  }
  EXPECT_EQ(situations, 8);
}

// promtool test rules runs alerts_test.yml (ctest promtool_test_rules); here: it tests every
// alert at least once firing and at least once quiet.
TEST_F(AlertsTest, TheUnitTestFileCoversEveryAlertBothWays) {
  json::value tests;
  std::string error;
  ASSERT_TRUE(testing::LoadYamlFileAsJson(testing::SourcePath("deploy/prometheus/alerts_test.yml"),
                                          &tests, &error))
      << error;
  std::set<std::string> fires, quiet;
  for (const json::value& t : tests.at("tests").as_array()) {
    for (const json::value& c : t.at("alert_rule_test").as_array()) {
      const std::string name(c.at("alertname").as_string());
      const json::value* exp = c.as_object().if_contains("exp_alerts");
      (exp != nullptr && exp->is_array() && !exp->as_array().empty() ? fires : quiet).insert(name);
    }
  }
  for (const AlertRule& r : rules_) {
    EXPECT_TRUE(fires.count(r.name)) << r.name << " is never shown to fire in alerts_test.yml";
    EXPECT_TRUE(quiet.count(r.name))
        << r.name << " is never shown to stay quiet in alerts_test.yml";
  }
}

}  // namespace
}  // namespace rsc
