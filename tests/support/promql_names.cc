#include "support/promql_names.h"

#include <cctype>

namespace rsc::testing {
namespace {

bool IdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}
bool IdentChar(char c) { return IdentStart(c) || std::isdigit(static_cast<unsigned char>(c)) != 0; }

const std::set<std::string_view>& Keywords() {
  static const std::set<std::string_view> kKeywords = {
      // binary operators and modifiers
      "and", "or", "unless", "bool", "offset", "atan2",
      // aggregation operators (also used as "sum by (x) (...)", where no "(" follows)
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
      "topk", "quantile",
      // numeric literals
      "inf", "Inf", "nan", "NaN"};
  return kKeywords;
}

const std::set<std::string_view>& LabelListKeywords() {
  static const std::set<std::string_view> kLists = {"by",       "without",    "on",
                                                    "ignoring", "group_left", "group_right"};
  return kLists;
}

// Index just past the bracket that closes the one at `i` (open/close given), skipping
// string literals inside; s.size() if unbalanced.
size_t SkipBalanced(std::string_view s, size_t i, char open, char close);

size_t SkipString(std::string_view s, size_t i) {
  const char quote = s[i];
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\' && quote != '`') {
      ++i;
    } else if (s[i] == quote) {
      return i + 1;
    }
  }
  return s.size();
}

size_t SkipBalanced(std::string_view s, size_t i, char open, char close) {
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(s, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return s.size();
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  return i;
}

}  // namespace

std::set<std::string> MetricNamesInPromQL(std::string_view s) {
  std::set<std::string> names;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(s, i);
    } else if (c == '{') {
      i = SkipBalanced(s, i, '{', '}');
    } else if (c == '[') {
      i = SkipBalanced(s, i, '[', ']');
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '$') {
      ++i;
      if (i < s.size() && s[i] == '{') {
        i = SkipBalanced(s, i, '{', '}');
      } else {
        while (i < s.size() && IdentChar(s[i])) ++i;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      // a number or a duration: 0.05, 1e3, 0x1f, 5m, 1h30m
      while (i < s.size() && (IdentChar(s[i]) || s[i] == '.')) ++i;
    } else if (IdentStart(c)) {
      const size_t start = i;
      while (i < s.size() && IdentChar(s[i])) ++i;
      const std::string_view word = s.substr(start, i - start);
      const size_t next = SkipSpace(s, i);
      if (LabelListKeywords().count(word) != 0) {
        if (next < s.size() && s[next] == '(') i = SkipBalanced(s, next, '(', ')');
      } else if (next < s.size() && s[next] == '(') {
        // a function or an aggregation: its arguments are scanned normally
      } else if (Keywords().count(word) == 0) {
        names.emplace(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

}  // namespace rsc::testing
