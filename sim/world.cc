#include "sim/world.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>

#include "core/check.h"
#include "sim/fiber.h"

namespace rsc::sim {

World::World(uint64_t seed, Buggify::Mode mode) : rng_(seed), buggify_(seed, mode) {}

World::~World() = default;

void World::At(TimeMs t, std::function<void()> fn) {
  RSC_CHECK(t >= now_);
  queue_.push_back(Event{t, seq_++, std::move(fn)});
  std::push_heap(queue_.begin(), queue_.end(), Later{});
}

void World::RunUntil(TimeMs until) {
  while (!stopped_ && !queue_.empty() && queue_.front().t <= until) {
    std::pop_heap(queue_.begin(), queue_.end(), Later{});
    Event ev = std::move(queue_.back());
    queue_.pop_back();
    now_ = ev.t;
    ++events_run_;
    ev.fn();
  }
  if (!stopped_) now_ = std::max(now_, until);
}

void World::Sleep(Fiber& fiber, TimeMs delay) {
  if (delay <= 0) return;
  const TimeMs wake = now_ + delay;
  if (!queue_.empty() && queue_.front().t > wake) {
    now_ = wake;  // nothing else happens meanwhile: no need to hand control back
    return;
  }
  At(wake, [&fiber] { fiber.Resume(); });
  fiber.Yield();
}

void World::SetChecker(CheckerConfig config) { checker_ = std::make_unique<Checker>(config); }

void World::Emit(HistEvent e) { EmitAt(std::move(e), now_); }

void World::EmitAt(HistEvent e, TimeMs t) {
  e.t_us = t * 1000;
  digest_ = DigestEvent(digest_, e);
  if (trace_) std::fprintf(trace_, "%s\n", FormatEvent(e).c_str());
  history_.push_back(std::move(e));
  if (checker_ && !violation_) {
    std::optional<Violation> v = checker_->Add(history_.back());
    if (v) {
      violation_ = std::move(v);
      stopped_ = true;
    }
  }
  if (observer_) observer_(history_.back());
}

void World::Fault(const std::string& kind, const std::string& note, const std::string& member) {
  ++fault_counts_[kind];
  HistEvent e;
  e.kind = HistKind::kFault;
  e.proc = "sim";
  e.member = member;
  e.detail = kind;
  e.status = note;
  Emit(std::move(e));
}

void World::Fail(Violation v) {
  if (violation_) return;
  violation_ = std::move(v);
  stopped_ = true;
}

void World::FinishChecker() {
  if (!checker_ || checker_finished_) return;
  checker_finished_ = true;
  std::vector<Violation> v = checker_->Finish();
  if (!violation_ && !v.empty()) {
    violation_ = v.front();
    stopped_ = true;
  }
}

const CheckerCounters* World::checker_counters() const {
  return checker_ ? &checker_->counters() : nullptr;
}

namespace {

std::string Ms(int64_t us) {
  if (us < 0) return "-";
  return fmt::format("{}.{:03d}", us / 1'000'000, (us / 1000) % 1000);
}

}  // namespace

std::string FormatEvent(const HistEvent& e) {
  std::string out = fmt::format("t={:>9}s {:<14} {:<15}", Ms(e.t_us), e.proc, HistKindName(e.kind));
  auto add = [&](std::string_view name, const std::string& v) {
    if (!v.empty()) out += fmt::format(" {}={}", name, v);
  };
  auto num = [&](std::string_view name, int64_t v) {
    if (v >= 0) out += fmt::format(" {}={}", name, v);
  };
  add("member", e.member);
  num("shard", e.shard);
  add("id", e.id);
  add("key", e.key);
  num("seq", e.seq);
  if (e.attempt > 0) num("attempt", e.attempt);
  num("epoch", e.epoch);
  num("version", e.version);
  if (!e.lineage.empty()) add("lineage", e.lineage.substr(0, 8));
  num("req_version", e.req_version);
  if (!e.req_lineage.empty()) add("req_lineage", e.req_lineage.substr(0, 8));
  num("stored_version", e.stored_version);
  num("revision", e.revision);
  if (e.lease_end_us >= 0) out += " lease_end=" + Ms(e.lease_end_us);
  if (e.sent_us >= 0) out += " sent=" + Ms(e.sent_us);
  add("status", e.status);
  add("detail", e.detail);
  return out;
}

uint64_t DigestEvent(uint64_t digest, const HistEvent& e) {
  const std::string s = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", e.t_us,
      static_cast<int>(e.kind), e.proc, e.member, e.shard, e.stream, e.id, e.key, e.seq, e.attempt,
      e.epoch, e.version, e.lineage, e.req_version, e.req_lineage, e.stored_version, e.revision,
      e.lease_end_us, e.sent_us, e.status, e.detail, e.req_digest, e.resp_digest);
  return XXH64(s.data(), s.size(), digest);
}

}  // namespace rsc::sim
