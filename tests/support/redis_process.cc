#include "support/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/wait.h"

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;

// True if 127.0.0.1:port can be bound right now.
bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// An ephemeral port the kernel considers free. With `cluster`, port + 10000 (the cluster
// bus) must be free too.
int PickPort(bool cluster) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    int port = ntohs(addr.sin_port);
    ::close(fd);
    if (!cluster) return port;
    if (port + 10000 <= 65535 && PortFree(port + 10000)) return port;
    // Bus port out of range: the port 10000 lower usually is free, with its bus on `port`.
    if (port - 10000 > 1024 && PortFree(port - 10000) && PortFree(port)) return port - 10000;
  }
  return 0;
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& cwd, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: only async-signal-safe calls until exec.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
  if (::chdir(cwd.c_str()) != 0) ::_exit(126);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ::execvp(argv[0], argv.data());
  ::_exit(127);
}

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "\n  | " + l;
  return out.empty() ? " (empty)" : out;
}

}  // namespace

RedisProcess::RedisProcess(RedisProcessOptions options)
    : options_(std::move(options)), port_(options_.port) {
  char tmpl[] = "/tmp/rsc-redis-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  dir_ = dir != nullptr ? dir : "";
}

RedisProcess::~RedisProcess() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::vector<std::string> RedisProcess::Args() const {
  std::vector<std::string> a = {"redis-server",
                                "--port",
                                std::to_string(port_),
                                "--bind",
                                "127.0.0.1",
                                "--dir",
                                dir_,
                                "--logfile",
                                dir_ + "/redis.log",
                                "--daemonize",
                                "no",
                                "--save",
                                options_.save,
                                "--appendonly",
                                options_.appendonly ? "yes" : "no",
                                "--repl-diskless-sync-delay",
                                "0"};
  if (!options_.password.empty()) {
    a.insert(a.end(), {"--requirepass", options_.password});
    if (options_.replicaof_port) a.insert(a.end(), {"--masterauth", options_.password});
  }
  if (!options_.acl_user.empty()) {
    a.insert(a.end(),
             {"--user", options_.acl_user, "on", ">" + options_.acl_password, "~*", "&*", "+@all"});
    if (options_.replicaof_port) {
      a.insert(a.end(), {"--masteruser", options_.acl_user, "--masterauth", options_.acl_password});
    }
  }
  if (options_.replicaof_port) {
    a.insert(a.end(), {"--replicaof", "127.0.0.1", std::to_string(*options_.replicaof_port)});
  }
  if (options_.cluster) {
    a.insert(a.end(), {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf",
                       "--cluster-node-timeout", "2000"});
  }
  a.insert(a.end(), options_.extra_args.begin(), options_.extra_args.end());
  return a;
}

std::string RedisProcess::Url() const {
  std::string auth;
  if (!options_.acl_user.empty()) {
    auth = options_.acl_user + ":" + options_.acl_password + "@";
  } else if (!options_.password.empty()) {
    auth = ":" + options_.password + "@";
  }
  return "redis://" + auth + Address();
}

std::string RedisProcess::LogTail(size_t lines) const {
  return Tail(dir_ + "/redis.log", lines) + Tail(dir_ + "/stdout.log", 5);
}

std::unique_ptr<RedisCli> RedisProcess::Cli() const {
  std::string error;
  const std::string& user = options_.acl_user;
  const std::string& password = user.empty() ? options_.password : options_.acl_password;
  auto cli = RedisCli::Connect(port_, user, password, milliseconds(5000), &error);
  if (cli == nullptr) ADD_FAILURE() << "cannot connect to redis " << Address() << ": " << error;
  return cli;
}

::testing::AssertionResult RedisProcess::Start() {
  if (dir_.empty()) return ::testing::AssertionFailure() << "mkdtemp failed";
  if (running()) return ::testing::AssertionSuccess();
  const bool pick = port_ == 0;
  for (int attempt = 0;; ++attempt) {
    if (pick) port_ = PickPort(options_.cluster);
    if (port_ == 0) return ::testing::AssertionFailure() << "no free loopback port";
    bool port_taken = false;
    auto started = Launch(&port_taken);
    if (started) return started;
    // A port taken between picking and binding: try another (first start only).
    bool port_race = port_taken || LogTail(5).find("Address already in use") != std::string::npos;
    if (!pick || !port_race || attempt >= 5) return started;
    std::filesystem::remove(dir_ + "/redis.log");
  }
}

bool RedisProcess::AnsweredByOurs() const {
  std::string error;
  const std::string& user = options_.acl_user;
  const std::string& password = user.empty() ? options_.password : options_.acl_password;
  auto cli = RedisCli::Connect(port_, user, password, milliseconds(500), &error);
  if (cli == nullptr) return true;
  CliReply info = cli->Run({"INFO", "server"});
  const size_t at = info.str.find("process_id:");
  if (!info.ok() || at == std::string::npos) return true;
  return std::atoll(info.str.c_str() + at + std::strlen("process_id:")) == pid_;
}

::testing::AssertionResult RedisProcess::Launch(bool* port_taken) {
  const auto args = Args();
  pid_ = Spawn(args, dir_, dir_ + "/stdout.log");
  if (pid_ < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);

  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  std::string last_error = "not tried";
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure()
             << "redis-server on port " << port_ << " exited during start-up (status " << status
             << "); log:" << LogTail();
    }
    std::string error;
    auto cli = RedisCli::Connect(port_, "", "", milliseconds(500), &error);
    if (cli != nullptr) {
      CliReply pong = cli->Run({"PING"});
      // NOAUTH: up, but wants a password; LOADING: still reading its data set.
      if (pong.str == "PONG" || pong.str.starts_with("NOAUTH")) {
        // Two tests that picked the same port at once: the second one's server fails to
        // bind, but until it has exited the first one's answers here. Using it would make
        // both tests share (and restart) one server (seen in CI: StoreFailureTest).
        if (AnsweredByOurs()) return ::testing::AssertionSuccess();
        *port_taken = true;
        Kill();
        return ::testing::AssertionFailure()
               << "port " << port_ << " is answered by another redis-server";
      }
      last_error = pong.ToString();
    } else {
      last_error = error;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  Kill();
  return ::testing::AssertionFailure()
         << "redis-server on port " << port_ << " did not answer PING within "
         << options_.start_timeout.count() << " ms (last: " << last_error << "); log:" << LogTail();
}

bool RedisProcess::Reap(milliseconds wait) {
  if (pid_ <= 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

::testing::AssertionResult RedisProcess::Stop(bool save) {
  if (!running()) return ::testing::AssertionSuccess();
  std::string error;
  const std::string& user = options_.acl_user;
  const std::string& password = user.empty() ? options_.password : options_.acl_password;
  auto cli = RedisCli::Connect(port_, user, password, milliseconds(5000), &error);
  std::string detail;
  if (cli != nullptr) {
    CliReply reply;
    if (!cli->RunExpectClose({"SHUTDOWN", save ? "SAVE" : "NOSAVE"}, &reply)) {
      detail = "SHUTDOWN answered " + reply.ToString();
    }
  } else {
    detail = "cannot connect for SHUTDOWN: " + error;
  }
  if (Reap(milliseconds(10000))) return ::testing::AssertionSuccess();
  ::kill(pid_, SIGTERM);
  if (Reap(milliseconds(5000))) return ::testing::AssertionSuccess();
  Kill();
  return ::testing::AssertionFailure()
         << "redis-server " << Address() << " did not stop on SHUTDOWN or SIGTERM (" << detail
         << "); killed. log:" << LogTail();
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  Reap(milliseconds(60000));
}

::testing::AssertionResult RedisProcess::Restart(bool save) {
  if (auto stopped = Stop(save); !stopped) return stopped;
  return Start();
}

void RedisProcess::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisProcess::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

namespace {

// Waits until every running node reports cluster_state:ok with every slot served.
::testing::AssertionResult WaitClusterOk(std::vector<std::unique_ptr<RedisProcess>>& nodes,
                                         milliseconds wait) {
  for (auto& n : nodes) {
    if (!n->running()) continue;
    auto node_cli = n->Cli();
    if (node_cli == nullptr)
      return ::testing::AssertionFailure() << "cannot reach " << n->Address();
    auto ok = WaitFor(
        [&] {
          CliReply info = node_cli->Run({"CLUSTER", "INFO"});
          return info.str.find("cluster_state:ok") != std::string::npos &&
                 info.str.find("cluster_slots_ok:16384") != std::string::npos;
        },
        wait, "cluster_state:ok on " + n->Address());
    if (!ok) return ok;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

Cluster3::Cluster3(RedisProcessOptions options, int replicas_per_master)
    : options_(std::move(options)), replicas_per_master_(replicas_per_master) {
  options_.cluster = true;
  for (int i = 0; i < 3 * (1 + replicas_per_master); ++i) {
    nodes_.push_back(std::make_unique<RedisProcess>(options_));
  }
}

std::string Cluster3::Urls() const {
  std::string out;
  for (const auto& n : nodes_) out += (out.empty() ? "" : ",") + n->Url();
  return out;
}

namespace {

// CLUSTER SLOTS of the first node that answers: [[start, end, [host, port, id], replicas...]].
CliReply ClusterSlots(std::vector<std::unique_ptr<RedisProcess>>& nodes) {
  for (auto& n : nodes) {
    if (!n->running()) continue;
    auto cli = n->Cli();
    if (!cli) continue;
    CliReply r = cli->Run({"CLUSTER", "SLOTS"});
    if (r.type == CliReply::Type::kArray) return r;
  }
  return CliReply{};
}

}  // namespace

size_t Cluster3::MasterOf(int slot) {
  const CliReply slots = ClusterSlots(nodes_);
  for (const CliReply& range : slots.elements) {
    if (range.elements.size() < 3 || slot < range.elements[0].integer ||
        slot > range.elements[1].integer) {
      continue;
    }
    const int64_t port = range.elements[2].elements.at(1).integer;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->Port() == port) return i;
    }
  }
  return nodes_.size();
}

size_t Cluster3::ReplicaOf(size_t master) {
  const CliReply slots = ClusterSlots(nodes_);
  for (const CliReply& range : slots.elements) {
    if (range.elements.size() < 4 ||
        range.elements[2].elements.at(1).integer != nodes_[master]->Port()) {
      continue;
    }
    for (size_t r = 3; r < range.elements.size(); ++r) {
      const int64_t port = range.elements[r].elements.at(1).integer;
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i]->Port() == port && nodes_[i]->running()) return i;
      }
    }
  }
  return nodes_.size();
}

std::vector<size_t> Cluster3::Masters() {
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    auto cli = nodes_[i]->Cli();
    CliReply role = cli ? cli->Run({"ROLE"}) : CliReply{};
    if (!role.elements.empty() && role.elements[0].str == "master") out.push_back(i);
  }
  return out;
}

::testing::AssertionResult Cluster3::WaitReplicasInSync(milliseconds wait) {
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    auto cli = n->Cli();
    if (!cli) return ::testing::AssertionFailure() << "cannot reach " << n->Address();
    auto ok = WaitFor(
        [&] {
          CliReply info = cli->Run({"INFO", "replication"});
          return info.str.find("role:master") != std::string::npos ||
                 info.str.find("master_link_status:up") != std::string::npos;
        },
        wait, "replica " + n->Address() + " in sync");
    if (!ok) return ok;
  }
  return ::testing::AssertionSuccess();
}

std::string Cluster3::NodesReport() {
  std::string out;
  for (auto& n : nodes_) {
    out += "\n--- CLUSTER NODES of " + n->Address() + ":";
    if (!n->running()) {
      out += " (not running)";
      continue;
    }
    auto cli = n->Cli();
    CliReply r = cli ? cli->Run({"CLUSTER", "NODES"}) : CliReply{};
    out += "\n" + (r.str.empty() ? r.ToString() : r.str);
  }
  return out;
}

::testing::AssertionResult Cluster3::WaitSettled(milliseconds wait) {
  // Every live node at the same cluster_current_epoch and serving the same slot map. A
  // SETSLOT NODE bumps the importing master's config epoch without an election; until the
  // others have heard of it, a failover may be elected at an epoch that collides with it and
  // Redis reverts the failover (seen with cluster chaos seed 21).
  auto view = [&](RedisProcess& n) {
    auto cli = n.Cli();
    if (!cli) return std::string("unreachable");
    const CliReply info = cli->Run({"CLUSTER", "INFO"});
    const size_t at = info.str.find("cluster_current_epoch:");
    std::string epoch =
        at == std::string::npos ? "?" : info.str.substr(at, info.str.find('\r', at) - at);
    return epoch + " " + cli->Run({"CLUSTER", "SLOTS"}).ToString();
  };
  std::string last;
  auto settled = WaitFor(
      [&] {
        std::string first;
        for (auto& n : nodes_) {
          if (!n->running()) continue;
          const std::string v = view(*n);
          if (first.empty()) {
            first = v;
          } else if (v != first) {
            last = n->Address() + " differs";
            return false;
          }
        }
        return true;
      },
      wait, "every node at one epoch and slot map");
  if (!settled) return settled << " (" << last << ")" << NodesReport();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster3::WaitPromoted(size_t node, milliseconds wait) {
  auto cli = nodes_[node]->Cli();
  if (!cli) return ::testing::AssertionFailure() << "cannot reach " << nodes_[node]->Address();
  auto promoted = WaitFor(
      [&] {
        CliReply role = cli->Run({"ROLE"});
        return !role.elements.empty() && role.elements[0].str == "master";
      },
      wait, nodes_[node]->Address() + " promoted to master");
  if (!promoted) return promoted;
  // Every node knows: its slot map names the new master (gossip takes a moment).
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    auto node_cli = n->Cli();
    if (!node_cli) return ::testing::AssertionFailure() << "cannot reach " << n->Address();
    auto knows = WaitFor(
        [&] {
          CliReply slots = node_cli->Run({"CLUSTER", "SLOTS"});
          for (const CliReply& range : slots.elements) {
            if (range.elements.size() >= 3 &&
                range.elements[2].elements.at(1).integer == nodes_[node]->Port()) {
              return true;
            }
          }
          return false;
        },
        wait, n->Address() + " names " + nodes_[node]->Address() + " a master");
    if (!knows) return knows << NodesReport();
  }
  return WaitClusterOk(nodes_, wait);
}

::testing::AssertionResult Cluster3::ManualFailover(size_t node, milliseconds wait) {
  auto cli = nodes_[node]->Cli();
  if (!cli) return ::testing::AssertionFailure() << "cannot reach " << nodes_[node]->Address();
  if (auto settled = WaitSettled(wait); !settled) return settled;
  auto is_master = [&] {
    CliReply role = cli->Run({"ROLE"});
    return !role.elements.empty() && role.elements[0].str == "master";
  };
  // A manual failover that does not complete (its master did not answer in time, the replica
  // was not known to it yet) is not retried by Redis, and one that completes can still be
  // reverted when another node claims the slots at a higher config epoch: ask again until
  // every node names the replica a master.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (int attempt = 1;; ++attempt) {
    CliReply r = cli->Run({"CLUSTER", "FAILOVER"});
    if (!r.ok()) return ::testing::AssertionFailure() << "CLUSTER FAILOVER: " << r.ToString();
    auto promoted = WaitFor(is_master, milliseconds(5000),
                            nodes_[node]->Address() + " promoted by CLUSTER FAILOVER");
    if (promoted) {
      auto known = WaitPromoted(node, milliseconds(10000));
      if (known) return known;
      if (is_master() || std::chrono::steady_clock::now() >= deadline) {
        return known << " (attempt " << attempt << ")" << NodesReport();
      }
      // Reverted: the node is a replica again. Let the cluster settle, then ask again.
      if (auto settled = WaitSettled(wait); !settled) return settled;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return promoted << NodesReport();
  }
}

::testing::AssertionResult Cluster3::Start() {
  for (auto& n : nodes_) {
    if (auto s = n->Start(); !s) return s;
  }
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (auto& n : nodes_) args.push_back(n->Address());
  args.push_back("--cluster-yes");
  if (replicas_per_master_ > 0) {
    args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas_per_master_)});
  }
  if (!options_.acl_user.empty()) {
    args.insert(args.end(), {"--user", options_.acl_user, "--pass", options_.acl_password,
                             "--no-auth-warning"});
  } else if (!options_.password.empty()) {
    args.insert(args.end(), {"-a", options_.password, "--no-auth-warning"});
  }
  const std::string log = nodes_[0]->Dir() + "/cluster-create.log";
  pid_t pid = Spawn(args, nodes_[0]->Dir(), log);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return ::testing::AssertionFailure()
             << "redis-cli --cluster create hung; output:" << Tail(log, 30);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return ::testing::AssertionFailure() << "redis-cli --cluster create failed (status " << status
                                         << "); output:" << Tail(log, 30);
  }
  return WaitClusterOk(nodes_, milliseconds(20000));
}

::testing::AssertionResult Cluster3::BeginSlotMigration(int slot, size_t src, size_t dst,
                                                        const std::vector<std::string>& keys) {
  auto src_cli = nodes_[src]->Cli();
  auto dst_cli = nodes_[dst]->Cli();
  if (!src_cli || !dst_cli) return ::testing::AssertionFailure() << "cannot reach the nodes";
  const std::string src_id = src_cli->Run({"CLUSTER", "MYID"}).str;
  const std::string dst_id = dst_cli->Run({"CLUSTER", "MYID"}).str;
  const std::string s = std::to_string(slot);
  for (const auto& [cli, args] :
       {std::pair{dst_cli.get(),
                  std::vector<std::string>{"CLUSTER", "SETSLOT", s, "IMPORTING", src_id}},
        std::pair{src_cli.get(),
                  std::vector<std::string>{"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id}}}) {
    CliReply r = cli->Run(args);
    if (!r.ok()) return ::testing::AssertionFailure() << args[3] << ": " << r.ToString();
  }
  if (keys.empty()) return ::testing::AssertionSuccess();
  std::vector<std::string> migrate = {
      "MIGRATE", "127.0.0.1", std::to_string(nodes_[dst]->Port()), "", "0", "5000", "KEYS"};
  migrate.insert(migrate.end(), keys.begin(), keys.end());
  CliReply r = src_cli->Run(migrate);
  if (!r.ok()) return ::testing::AssertionFailure() << "MIGRATE: " << r.ToString();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Cluster3::FinishSlotMigration(int slot, size_t dst) {
  auto dst_cli = nodes_[dst]->Cli();
  if (!dst_cli) return ::testing::AssertionFailure() << "cannot reach node " << dst;
  const std::string dst_id = dst_cli->Run({"CLUSTER", "MYID"}).str;
  // Every key still in the slot moves first, as redis-cli --cluster reshard does: the slot
  // can hold keys the test did not name (the coordinator's layout key
  // redis-stream:coord:{P}:layout shares a slot with a master's shard keys when D2 picks
  // CRC16(P)'s slot; seen in CI), and the source refuses SETSLOT NODE while it has any.
  if (const size_t src = MasterOf(slot); src < nodes_.size() && src != dst) {
    auto src_cli = nodes_[src]->Cli();
    if (!src_cli) return ::testing::AssertionFailure() << "cannot reach node " << src;
    for (;;) {
      CliReply left = src_cli->Run({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
      if (left.type != CliReply::Type::kArray) {
        return ::testing::AssertionFailure() << "GETKEYSINSLOT: " << left.ToString();
      }
      if (left.elements.empty()) break;
      std::vector<std::string> migrate = {
          "MIGRATE", "127.0.0.1", std::to_string(nodes_[dst]->Port()), "", "0", "5000", "KEYS"};
      for (const CliReply& k : left.elements) migrate.push_back(k.str);
      CliReply r = src_cli->Run(migrate);
      if (!r.ok()) return ::testing::AssertionFailure() << "MIGRATE: " << r.ToString();
    }
  }
  // On the masters (replicas learn it from them), the importing one first, as
  // redis-cli --cluster reshard does.
  std::vector<size_t> order = {dst};
  for (size_t m : Masters()) {
    if (m != dst) order.push_back(m);
  }
  for (size_t i : order) {
    auto cli = nodes_[i]->Cli();
    CliReply r =
        cli ? cli->Run({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", dst_id}) : CliReply{};
    if (!r.ok()) return ::testing::AssertionFailure() << "SETSLOT NODE: " << r.ToString();
  }
  return WaitSettled(milliseconds(20000));
}

}  // namespace rsc::testing
