// One simulated device's health and the timing of the work on its units.
//
// A device has four units that work books (sim_backend.h, Timing model):
// its kernel capacity (kOccupancyUnits per kernel slot, at most
// max_concurrent_kernels kernels at once) and three copy engines
// (host-to-device, device-to-host, device-to-device) that run one copy at
// a time. Each unit is a scheduler::OccupancyTimeline: a piece of work
// starts at the earliest time at or after it is ready at which its unit
// has room for its whole duration, filling gaps left by earlier bookings,
// exactly as the planner's cost model books it. Work of no duration books
// nothing.
//
// Order. Unpaced (SimClock time_scale 0), every unit books its work in the
// order it was enqueued: EnqueueInTurn takes a ticket of the unit, under
// the device's lock, as the work is enqueued, and work that reaches its
// unit before an earlier ticket has booked parks its stream until that
// ticket has booked or been given up (its work never ran). So the schedule
// does not depend on which worker runs first. Paced, the work of one error
// scope (a job) books in the order it was enqueued the same way, so a job
// runs as planned however its streams' workers keep up with the clock;
// the work of different scopes books as it arrives, so that no job waits
// for another's turn (a job held up on the host never holds up another).
//
// Interruption. Paced bookings that may not have ended yet are kept; when
// interrupted work stops (SimStream::Timing::OnInterrupt), its booking is
// cut at that time (given back entirely if it had not started) and the
// unit's timeline is rebuilt from then on out of its other live bookings,
// each where it was booked, so work booked afterwards is not held up by
// work that no longer runs.
//
// Lifecycle: open -> closed (Close, when the backend shuts down): work
// waiting for its turn gives up, and streams parked for a turn are woken.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_DEVICE_MODEL_H_
#define WEFT_RUNTIME_SIM_SIM_DEVICE_MODEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "scheduler/occupancy.h"

namespace weft::runtime {

class SimDeviceModel {
 public:
  // The units of a device that work books.
  enum class Engine { kKernels, kHostToDevice, kDeviceToHost, kDeviceToDevice };
  static constexpr int kEngines = 4;

  // A piece of work's place in its unit's booking order; given up when
  // destroyed before it booked (the work was skipped, failed or never ran).
  // Paced, a ticket is one of its error scope's.
  class Ticket {
   public:
    Ticket(SimDeviceModel* model, Engine engine, bool scoped, uint64_t scope,
           uint64_t number)
        : model_(model),
          engine_(engine),
          scoped_(scoped),
          scope_(scope),
          number_(number) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

   private:
    friend class SimDeviceModel;
    SimDeviceModel* const model_;
    const Engine engine_;
    const bool scoped_;
    const uint64_t scope_;
    const uint64_t number_;
    bool booked_ = false;
  };

  // `clock` is not owned and outlives the model. REQUIRES:
  // max_concurrent_kernels >= 1.
  SimDeviceModel(const SimClock* clock, int max_concurrent_kernels);

  SimDeviceModel(const SimDeviceModel&) = delete;
  SimDeviceModel& operator=(const SimDeviceModel&) = delete;

  SimDeviceHealth& health() { return health_; }
  const SimDeviceHealth& health() const { return health_; }

  // Enqueues `work` on `queue`. Work that takes time first takes a ticket
  // of `engine` into `*ticket` (which `work` owns), under the device's
  // lock, so that every unit's tickets follow the order of the work on
  // every stream (paced: of the work of `queue`'s current error scope).
  void EnqueueInTurn(SimStream& queue, Engine engine, double duration,
                     std::optional<Ticket>* ticket, SimStream::Work work)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same for work that books several times (chains of launches, each
  // on streams of this device): the tickets, in the order given, then
  // each work on its stream, all under one hold of the device's lock.
  struct TicketRequest {
    Engine engine = Engine::kKernels;
    double duration = 0;
    std::optional<Ticket>* ticket = nullptr;
    uint64_t scope = 0;  // the error scope the work belongs to
  };
  struct QueuedWork {
    SimStream* queue = nullptr;
    SimStream::Work work;
  };
  void EnqueueInTurn(absl::Span<const TicketRequest> tickets,
                     absl::Span<QueuedWork> works) ABSL_LOCKS_EXCLUDED(mu_);
  // Books `duration` of `units` on `engine` from timing.ready_us and sets
  // timing.end_us. `ticket` is null when the work books as it comes (no
  // duration); otherwise, before its turn, it parks the stream
  // (timing.Park()) until the turn comes. ABORTED once closed.
  absl::Status BookInTurn(Engine engine, double duration, int32_t units,
                          Ticket* ticket, SimStream::Timing& timing)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Work waiting for its turn gives up from now on; streams parked for a
  // turn are woken.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct LiveBooking {
    uint64_t id = 0;
    double start_us = 0;
    double end_us = 0;
    int32_t units = 0;
  };
  // The order of a sequence of tickets.
  struct Turns {
    uint64_t next_ticket = 0;
    uint64_t next_to_book = 0;
    std::set<uint64_t> given_up;
    // Streams parked until their ticket's turn, by ticket.
    std::map<uint64_t, std::shared_ptr<SimStream::Waker>> turn_waiters;
  };
  // One unit's bookings and their order: tickets are handed out
  // as work is enqueued, and work books only when every earlier ticket has
  // booked or been given up. Paced, it also keeps the bookings that may not
  // have ended yet (`live`, in booking order), so that an interrupted
  // booking can be given back.
  struct EngineBook {
    explicit EngineBook(int max_kernels) : max_kernels(max_kernels) {
      timeline.emplace(max_kernels);
    }
    int max_kernels;
    // Always set; optional only to be rebuilt in place.
    std::optional<scheduler::OccupancyTimeline> timeline;
    std::vector<LiveBooking> live;
    uint64_t next_booking = 1;
    size_t prune_at = 64;  // live bookings past which ended ones are dropped
    // Unpaced: every ticket's turn; paced: each error scope's, while it
    // has tickets out.
    Turns turns;
    absl::flat_hash_map<uint64_t, Turns> scope_turns;
  };

  static constexpr size_t Index(Engine engine) {
    return static_cast<size_t>(engine);
  }
  // Gives back what is left after `at_us` of paced booking `id` on
  // `engine`, which stopped then (an interrupted item).
  void ReleaseBooking(Engine engine, uint64_t id, double at_us)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The turns `ticket` is one of; null for a scope with none left.
  Turns* TurnsOf(EngineBook& book, const Ticket& ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new ticket of `engine` into `*ticket`, scoped when paced.
  void TakeTicketLocked(Engine engine, uint64_t scope,
                        std::optional<Ticket>* ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next turn after `ticket`'s; the stream waiting for it, if any. A
  // scope whose tickets have all booked or been given up is forgotten.
  std::shared_ptr<SimStream::Waker> AdvanceTurnLocked(EngineBook& book,
                                                      const Ticket& ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Paced: books as it comes, keeping the booking live; its id.
  uint64_t BookLiveLocked(EngineBook& book, double duration, int32_t units,
                          SimStream::Timing& timing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A ticket destroyed before it booked.
  void GiveUp(const Ticket& ticket) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const SimClock* const clock_;

  SimDeviceHealth health_;
  // Workers read health_ for every item: the lock starts a cache line of
  // its own.
  alignas(64) absl::Mutex mu_;
  // By Engine.
  std::array<EngineBook, kEngines> books_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_DEVICE_MODEL_H_
