#pragma once
// FiberGroup: the fibers of one simulated client process (sim/fiber.h) — the threads of the
// library's producer or consumer facade made on a simulated Platform, and the application's.
//
// A fiber starts, and is resumed after a park, from an event at the current simulated time, so
// the scheduler stays the only one that resumes fibers and a seed replays exactly. Three
// states after the process's life:
// * killed (the producer's crash): every wait of the process returns at once (ParkUntil,
//   Sleep); its fibers are woken and run to their end through events, finding every port
//   failing;
// * frozen (the consumer's crash): no event resumes any fiber of the process any more — a dead
//   process does nothing at all, at no cost — until the teardown;
// * tearing down (the end of the run, when no event runs any more): RunToEnd resumes every
//   fiber in turn, directly, until all have ended; waits return after one park (FiberSync
//   treats every wait as ended early, which its contract allows).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "client/platform.h"
#include "sim/fiber.h"
#include "sim/world.h"

namespace rsc::sim {

class FiberGroup {
 public:
  explicit FiberGroup(World& world) : world_(world) {}
  // Every fiber must have ended (RunToEnd).
  ~FiberGroup() = default;
  FiberGroup(const FiberGroup&) = delete;
  FiberGroup& operator=(const FiberGroup&) = delete;

  // Starts `body` on a new fiber (from an event at the current time).
  Fiber* Spawn(std::function<void()> body);
  // A Platform::Thread over Spawn: Join parks the calling fiber until the body ended.
  std::unique_ptr<client::Platform::Thread> StartThread(std::function<void()> body);
  // Resumes `f` from an event at the current time, unless it has ended or the group is frozen
  // by then.
  void Wake(Fiber* f);
  void WakeAll();

  // Fiber side: parks until `*done`, or the group was killed or is tearing down (then after
  // one turn: YieldOnce).
  void ParkUntil(const std::shared_ptr<bool>& done);
  // Fiber side: parks for `ms` of simulated time (less if killed or tearing down).
  void Sleep(TimeMs ms);
  // Fiber side, while tearing down: lets every other fiber have its turn first.
  void YieldOnce();

  void Kill() { killed_ = true; }
  void Freeze() { frozen_ = true; }
  bool killed() const { return killed_; }
  bool tearing_down() const { return tearing_down_; }
  // The end of the run: resumes every fiber until all have ended; `between` runs before each
  // round (a port delivering what it owes). A fiber that never ends stops the run.
  void RunToEnd(const std::function<void()>& between);

 private:
  World& world_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::map<Fiber*, std::vector<Fiber*>> joiners_;  // fibers waiting for one to end
  bool killed_ = false;
  bool frozen_ = false;
  bool tearing_down_ = false;
};

}  // namespace rsc::sim
