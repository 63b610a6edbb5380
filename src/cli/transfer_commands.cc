// export and restore (docs/protocol.md §7.3): a group's metadata to a file and back.

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "core/protocol_json.h"

namespace rsc::cli {
namespace {

void AddExport(CLI::App& app, Command* selected) {
  struct Opts {
    std::string stream, group, file;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("export", "Write a group's metadata document");
  cmd->add_option("STREAM", o->stream, "Stream prefix P")->required();
  cmd->add_option("GROUP", o->group, "Consumer group G")->required();
  cmd->add_option("-o,--output", o->file, "File to write (default: stdout)");
  cmd->callback([o, selected] {
    *selected = [o](Context& ctx) {
      CallOutcome call =
          ctx.admin->Call("GET", GroupPath(o->stream, o->group) + "/export", "", Replay::kSafe);
      if (!call.ok()) return Fail(ctx, call);
      if (o->file.empty() || o->file == "-") {
        *ctx.out << call.body;
        if (call.body.empty() || call.body.back() != '\n') *ctx.out << "\n";
        ctx.out->flush();
        if (!*ctx.out) {  // a full disk, a closed pipe: a cut backup is no backup
          *ctx.err << "rsc: export: cannot write the document to stdout\n";
          return static_cast<int>(kExitUsage);
        }
        return static_cast<int>(kExitOk);
      }
      // The document is written exactly as the coordinator sent it: restore checks it. Into
      // a file beside the target, renamed over it once whole, so a failed write leaves an
      // earlier export at that path as it was.
      const std::string tmp = o->file + ".tmp";
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << call.body;
      f.close();
      std::error_code renamed;
      if (f) std::filesystem::rename(tmp, o->file, renamed);
      if (!f || renamed) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        *ctx.err << "rsc: export: cannot write " << o->file << "\n";
        return static_cast<int>(kExitUsage);
      }
      if (ctx.json) {
        boost::json::object summary{{"stream", o->stream},
                                    {"group", o->group},
                                    {"file", o->file},
                                    {"bytes", call.body.size()}};
        *ctx.out << boost::json::serialize(summary) << "\n";
      } else {
        *ctx.out << "exported " << o->stream << "/" << o->group << " to " << o->file << " ("
                 << call.body.size() << " bytes)\n";
      }
      return static_cast<int>(kExitOk);
    };
  });
}

void AddRestore(CLI::App& app, Command* selected) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "restore", "Replace a group's metadata with an export document (starts a correction round)");
  cmd->add_option("FILE", *file, "Export document (- for stdin)")->required();
  cmd->callback([file, selected] {
    *selected = [file](Context& ctx) {
      std::string body;
      bool read = true;
      if (*file == "-") {
        body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        read = !std::cin.bad();
      } else {
        std::error_code ec;
        std::ifstream f(*file, std::ios::binary);
        // A directory opens as a stream that reads nothing: refused like any unreadable file.
        read = f && !std::filesystem::is_directory(*file, ec);
        if (read) {
          std::ostringstream s;
          s << f.rdbuf();
          body = s.str();
          read = !f.bad();
        }
      }
      if (!read) {
        *ctx.err << "rsc: restore: cannot read " << *file << "\n";
        return static_cast<int>(kExitUsage);
      }
      if (body.find_first_not_of(" \t\r\n") == std::string::npos) {
        // Nothing to send: an empty file (a failed export, a wrong path) is not a document.
        *ctx.err << "rsc: restore: " << *file << " is empty: nothing to restore\n";
        return static_cast<int>(kExitUsage);
      }
      // HttpTransport never sends `Expect: 100-continue`, which would make the coordinator
      // close the connection on a large body (docs/protocol.md §11).
      CallOutcome call = ctx.admin->Call("POST", "/v1/groups/restore", body, Replay::kUnsafe);
      if (!call.ok()) return Fail(ctx, call);
      if (ctx.json) {
        *ctx.out << call.body;
        if (call.body.empty() || call.body.back() != '\n') *ctx.out << "\n";
        return static_cast<int>(kExitOk);
      }
      Result<GroupView> view = ParseGroupView(call.body);
      if (!view.ok()) {
        *ctx.err << "rsc: malformed group view: " << view.error().message << "\n";
        return static_cast<int>(kExitServerError);
      }
      *ctx.out << "restored " << view->stream << "/" << view->group << ": revision "
               << view->revision << ", metadata version " << view->metadata_version << ", lineage "
               << view->lineage << (view->correction_round ? ", correction round started" : "")
               << "\n";
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace

void AddTransferCommands(CLI::App& app, Command* selected) {
  AddExport(app, selected);
  AddRestore(app, selected);
}

}  // namespace rsc::cli
