#include "support/prometheus_text.h"

#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

namespace rsc::testing {
namespace {

bool IsNameStart(char c, bool metric) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

bool IsNameChar(char c, bool metric) { return IsNameStart(c, metric) || (c >= '0' && c <= '9'); }

// Reads a metric (metric = true) or label name at `pos`; empty when there is none.
std::string ReadName(const std::string& line, size_t* pos, bool metric) {
  const size_t start = *pos;
  if (start >= line.size() || !IsNameStart(line[start], metric)) return "";
  size_t end = start + 1;
  while (end < line.size() && IsNameChar(line[end], metric)) ++end;
  *pos = end;
  return line.substr(start, end - start);
}

std::optional<double> ReadValue(const std::string& token) {
  if (token == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (token == "+Inf") return std::numeric_limits<double>::infinity();
  if (token == "-Inf") return -std::numeric_limits<double>::infinity();
  if (token.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (end != token.c_str() + token.size()) return std::nullopt;
  return v;
}

class Parser {
 public:
  explicit Parser(PromExposition* out) : out_(out) {}

  void Line(size_t n, const std::string& line) {
    n_ = n;
    if (line.starts_with("# HELP ")) return Help(line.substr(7));
    if (line.starts_with("# TYPE ")) return Type(line.substr(7));
    if (line.starts_with("#")) return;  // a comment
    if (line.empty()) return Error("empty line");
    Sample(line);
  }

 private:
  void Error(const std::string& what) {
    out_->errors.push_back("line " + std::to_string(n_) + ": " + what);
  }

  void Help(const std::string& rest) {
    size_t pos = 0;
    const std::string name = ReadName(rest, &pos, true);
    if (name.empty() || pos >= rest.size() || rest[pos] != ' ') return Error("bad HELP line");
    if (out_->help.count(name) != 0) return Error("second HELP for " + name);
    if (sampled_.count(name) != 0) return Error("HELP for " + name + " after its samples");
    std::string text;
    for (size_t i = pos + 1; i < rest.size(); ++i) {
      if (rest[i] != '\\') {
        text += rest[i];
      } else if (i + 1 < rest.size() && (rest[i + 1] == '\\' || rest[i + 1] == 'n')) {
        text += rest[++i] == 'n' ? '\n' : '\\';
      } else {
        return Error("bad escape in HELP of " + name);
      }
    }
    if (text.empty()) return Error("empty HELP for " + name);
    out_->help[name] = text;
  }

  void Type(const std::string& rest) {
    size_t pos = 0;
    const std::string name = ReadName(rest, &pos, true);
    if (name.empty() || pos >= rest.size() || rest[pos] != ' ') return Error("bad TYPE line");
    const std::string type = rest.substr(pos + 1);
    static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                 "untyped"};
    if (kTypes.count(type) == 0) return Error("unknown TYPE " + type);
    if (out_->type.count(name) != 0) return Error("second TYPE for " + name);
    if (sampled_.count(name) != 0) return Error("TYPE for " + name + " after its samples");
    out_->type[name] = type;
  }

  void Sample(const std::string& line) {
    PromSample s;
    size_t pos = 0;
    s.name = ReadName(line, &pos, true);
    if (s.name.empty()) return Error("no metric name: " + line);
    if (pos < line.size() && line[pos] == '{') {
      ++pos;
      while (pos < line.size() && line[pos] != '}') {
        const std::string label = ReadName(line, &pos, false);
        if (label.empty() || label.starts_with("__")) return Error("bad label name: " + line);
        if (line.compare(pos, 2, "=\"") != 0) return Error("no =\" after a label: " + line);
        pos += 2;
        std::string value;
        for (;; ++pos) {
          if (pos >= line.size()) return Error("unterminated label value: " + line);
          const char c = line[pos];
          if (c == '"') break;
          if (c != '\\') {
            value += c;
            continue;
          }
          const char e = pos + 1 < line.size() ? line[++pos] : '\0';
          if (e == '\\' || e == '"') {
            value += e;
          } else if (e == 'n') {
            value += '\n';
          } else {
            return Error("bad escape in a label value: " + line);
          }
        }
        ++pos;  // the closing quote
        for (const auto& [k, v] : s.labels) {
          if (k == label) return Error("label " + label + " twice: " + line);
        }
        s.labels.emplace_back(label, value);
        if (pos < line.size() && line[pos] == ',') ++pos;
      }
      if (pos >= line.size()) return Error("unterminated label set: " + line);
      ++pos;  // '}'
    }
    if (pos >= line.size() || line[pos] != ' ') return Error("no space before the value: " + line);
    const std::string token = line.substr(pos + 1);
    const std::optional<double> v = ReadValue(token);
    if (!v) return Error("bad value (or a timestamp, which we never emit): " + line);
    s.value = *v;
    const std::string family = FamilyOf(s.name);
    if (out_->type.count(family) == 0) return Error("sample before TYPE of " + s.name);
    if (out_->help.count(family) == 0) return Error("sample before HELP of " + s.name);
    if (s.name.ends_with("_bucket") && family != s.name && !s.Label("le")) {
      return Error("histogram bucket without an le label: " + line);
    }
    std::ostringstream key;
    key << s.name;
    for (const auto& [k, val] : s.labels) key << '\0' << k << '\0' << val;
    if (!series_.insert(key.str()).second) return Error("duplicate series: " + line);
    if (family != last_name_ && sampled_.count(family) != 0) {
      return Error("samples of " + family + " are not together: " + line);
    }
    last_name_ = family;
    sampled_.insert(family);
    out_->samples.push_back(std::move(s));
  }

  // The family a sample belongs to: its own name, or for the samples of a histogram
  // (<name>_bucket, _sum, _count) and a summary (_sum, _count) the family's name.
  std::string FamilyOf(const std::string& sample) const {
    if (out_->type.count(sample) != 0) return sample;
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (!sample.ends_with(suffix)) continue;
      const std::string base = sample.substr(0, sample.size() - suffix.size());
      auto it = out_->type.find(base);
      if (it == out_->type.end()) continue;
      if (it->second == "histogram" || (it->second == "summary" && suffix != "_bucket")) {
        return base;
      }
    }
    return sample;
  }

  PromExposition* out_;
  size_t n_ = 0;
  std::set<std::string> sampled_;
  std::set<std::string> series_;
  std::string last_name_;
};

}  // namespace

std::optional<std::string> PromSample::Label(const std::string& name) const {
  for (const auto& [k, v] : labels) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::vector<PromSample> PromExposition::Find(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& match) const {
  std::vector<PromSample> found;
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) all = all && s.Label(k) == v;
    if (all) found.push_back(s);
  }
  return found;
}

std::optional<double> PromExposition::Value(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& match) const {
  const std::vector<PromSample> found = Find(name, match);
  if (found.size() != 1) return std::nullopt;
  return found[0].value;
}

PromExposition ParsePrometheusText(const std::string& text) {
  PromExposition out;
  Parser parser(&out);
  if (!text.empty() && text.back() != '\n') out.errors.push_back("text does not end in a newline");
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) parser.Line(++n, line);
  return out;
}

}  // namespace rsc::testing
