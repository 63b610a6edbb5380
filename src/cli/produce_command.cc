// `rsc produce`: publish test messages through the Producer runtime (include/rsc/producer.h),
// which fetches the stream's routing (or a group's) from the coordinator and XADDs to the shard
// streams. Each entry has the fields `key` and `value`.

#include <boost/json.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "rsc/producer.h"

namespace rsc::cli {
namespace {

struct ProduceOpts {
  std::string stream, group, redis_url, key, value;
  int64_t count = 1;
  CLI::Option* key_opt = nullptr;
  CLI::Option* value_opt = nullptr;
  CLI::Option* count_opt = nullptr;
};

// --value V: `count` messages; otherwise stdin lines "key<TAB>value" (a line without a tab
// is a value). Without --key, messages without a key are keyed by their index, so a run
// spreads over the shards.
std::vector<ProducerMessage> Messages(const ProduceOpts& o) {
  std::vector<ProducerMessage> out;
  auto add = [&](std::string key, std::string value) {
    if (key.empty()) key = o.key_opt->count() > 0 ? o.key : std::to_string(out.size());
    out.push_back(ProducerMessage{key, {{"key", key}, {"value", std::move(value)}}});
  };
  if (o.value_opt->count() > 0) {
    for (int64_t i = 0; i < o.count; ++i) add("", o.value);
    return out;
  }
  const int64_t limit = o.count_opt->count() > 0 ? o.count : INT64_MAX;
  std::string line;
  while (static_cast<int64_t>(out.size()) < limit && std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      add("", line);
    } else {
      add(line.substr(0, tab), line.substr(tab + 1));
    }
  }
  return out;
}

// "P" for a producer routed by the stream, "P/G" by a group's routing.
std::string Target(const ProduceOpts& o) {
  return o.group.empty() ? o.stream : o.stream + "/" + o.group;
}

int RunProduce(const ProduceOpts& o, Context& ctx) {
  if (o.count < 0) {
    *ctx.err << "rsc: produce: --count must not be negative\n";
    return kExitUsage;
  }
  ProducerOptions options;
  options.coordinator_endpoints = ctx.coordinators;
  options.coordinator_token = ctx.member_token;
  options.stream = o.stream;
  options.group = o.group;
  options.redis_url = o.redis_url;
  options.http_timeout = ctx.timeout;
  options.redis_timeout = ctx.timeout;
  options.first_routing_wait = ctx.timeout;
  ProducerResult<std::unique_ptr<Producer>> created = Producer::Create(options);
  if (!created.ok()) {
    *ctx.err << "rsc: produce: " << created.error().message << "\n";
    return kExitUsage;
  }
  Producer& producer = *created.value();
  if (!producer.WaitForRouting(ctx.timeout)) {
    const std::string error = producer.Metrics().last_refresh_error;
    *ctx.err << "rsc: produce: no routing for " << Target(o) << " within " << ctx.timeout.count()
             << " ms: " << error << "\n";
    // The producer's refresh errors read "HTTP <status> <CODE>: ..." when a coordinator
    // answered (e.g. GROUP_NOT_FOUND); anything else means none did.
    return error.find("HTTP ") != std::string::npos ? kExitServerError : kExitUnreachable;
  }

  const std::vector<ProducerMessage> messages = Messages(o);
  const std::vector<ProducerResult<std::string>> results = producer.PublishBatch(messages);
  boost::json::array ids;
  int64_t failed = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) {
      ids.push_back(boost::json::value(results[i].value()));
      continue;
    }
    ++failed;
    const ProducerError& e = results[i].error();
    *ctx.err << "rsc: produce: message " << i << " (key " << messages[i].key
             << "): " << ProducerErrorCodeName(e.code) << ": " << e.message << "\n";
  }
  const int64_t published = static_cast<int64_t>(results.size()) - failed;
  if (ctx.json) {
    boost::json::object summary{{"stream", o.stream},
                                {"published", published},
                                {"failed", failed},
                                {"ids", std::move(ids)}};
    if (!o.group.empty()) summary["group"] = o.group;
    *ctx.out << boost::json::serialize(summary) << "\n";
  } else {
    *ctx.out << "published " << published << " of " << results.size() << " messages to "
             << Target(o) << "\n";
  }
  return failed == 0 ? kExitOk : kExitServerError;
}

}  // namespace

void AddProduceCommand(CLI::App& app, Command* selected) {
  auto o = std::make_shared<ProduceOpts>();
  CLI::App* cmd = app.add_subcommand(
      "produce", "Publish messages (--value, or stdin lines key<TAB>value) to a group's shards");
  cmd->add_option("STREAM", o->stream, "Stream prefix P")->required();
  cmd->add_option("GROUP", o->group,
                  "Optional: route by this group's routing instead of the stream's (SPEC D4)");
  cmd->add_option("--redis", o->redis_url,
                  "redis://[user[:password]@]host[:port][,host[:port]...][/db] (a cluster: any "
                  "node, or a seed list)")
      ->required();
  o->key_opt = cmd->add_option("--key", o->key, "Routing key (default: the message index)");
  o->value_opt = cmd->add_option("--value", o->value, "Value to publish --count times");
  o->count_opt = cmd->add_option("--count", o->count,
                                 "Messages with --value (default 1); with stdin: at most N lines");
  cmd->callback([o, selected] { *selected = [o](Context& ctx) { return RunProduce(*o, ctx); }; });
}

}  // namespace rsc::cli
