#include "runtime/sim/sim_device_model.h"

#include <algorithm>
#include <utility>

namespace weft::runtime {

SimDeviceModel::SimDeviceModel(const SimClock* clock,
                               int max_concurrent_kernels)
    : clock_(clock),
      books_{{EngineBook(max_concurrent_kernels), EngineBook(1), EngineBook(1),
              EngineBook(1)}} {}

SimDeviceModel::Ticket::~Ticket() {
  if (!booked_) model_->GiveUp(*this);
}

SimDeviceModel::Turns* SimDeviceModel::TurnsOf(EngineBook& book,
                                               const Ticket& ticket) {
  if (!ticket.scoped_) return &book.turns;
  auto it = book.scope_turns.find(ticket.scope_);
  return it == book.scope_turns.end() ? nullptr : &it->second;
}

void SimDeviceModel::TakeTicketLocked(Engine engine, uint64_t scope,
                                      std::optional<Ticket>* ticket) {
  EngineBook& book = books_[Index(engine)];
  const bool scoped = clock_->paced();
  Turns& turns = scoped ? book.scope_turns[scope] : book.turns;
  ticket->emplace(this, engine, scoped, scope, turns.next_ticket++);
}

void SimDeviceModel::GiveUp(const Ticket& ticket) {
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&mu_);
    EngineBook& book = books_[Index(ticket.engine_)];
    Turns* turns = TurnsOf(book, ticket);
    if (turns == nullptr) return;
    turns->turn_waiters.erase(ticket.number_);
    if (ticket.number_ != turns->next_to_book) {
      turns->given_up.insert(ticket.number_);
      return;
    }
    next = AdvanceTurnLocked(book, ticket);
  }
  if (next != nullptr) next->Wake();
}

std::shared_ptr<SimStream::Waker> SimDeviceModel::AdvanceTurnLocked(
    EngineBook& book, const Ticket& ticket) {
  Turns& turns = *TurnsOf(book, ticket);
  ++turns.next_to_book;
  while (!turns.given_up.empty() &&
         *turns.given_up.begin() == turns.next_to_book) {
    turns.given_up.erase(turns.given_up.begin());
    ++turns.next_to_book;
  }
  std::shared_ptr<SimStream::Waker> waker;
  auto it = turns.turn_waiters.find(turns.next_to_book);
  if (it != turns.turn_waiters.end()) {
    waker = std::move(it->second);
    turns.turn_waiters.erase(it);
  }
  // A scope with no ticket out starts again from 0 with its next one.
  if (ticket.scoped_ && turns.next_to_book == turns.next_ticket &&
      turns.turn_waiters.empty()) {
    book.scope_turns.erase(ticket.scope_);
  }
  return waker;
}

void SimDeviceModel::EnqueueInTurn(SimStream& queue, Engine engine,
                                   double duration,
                                   std::optional<Ticket>* ticket,
                                   SimStream::Work work) {
  if (!(duration > 0)) {
    queue.Enqueue(std::move(work));
    return;
  }
  // Take a ticket and enqueue under the device's lock, so tickets follow
  // the order of the work on every stream.
  const uint64_t scope = clock_->paced() ? queue.scope() : 0;
  absl::MutexLock lock(&mu_);
  TakeTicketLocked(engine, scope, ticket);
  queue.Enqueue(std::move(work));
}

void SimDeviceModel::EnqueueInTurn(absl::Span<const TicketRequest> tickets,
                                   absl::Span<QueuedWork> works) {
  absl::MutexLock lock(&mu_);
  for (const TicketRequest& request : tickets) {
    if (!(request.duration > 0)) continue;
    TakeTicketLocked(request.engine, request.scope, request.ticket);
  }
  for (QueuedWork& queued : works) {
    queued.queue->Enqueue(std::move(queued.work));
  }
}

uint64_t SimDeviceModel::BookLiveLocked(EngineBook& book, double duration,
                                        int32_t units,
                                        SimStream::Timing& timing) {
  // Nothing is forgotten by time: work may be ready before now (virtual
  // times do not wait for the host; sim_stream.h) and must still find the
  // gaps it would have had. The timeline's own bound on breakpoints keeps
  // it small.
  const double start = book.timeline->Book(timing.ready_us, duration, units);
  timing.end_us = start + duration;
  if (book.live.size() >= book.prune_at) {
    const double now = clock_->NowUs();
    book.live.erase(
        std::remove_if(book.live.begin(), book.live.end(),
                       [now](const LiveBooking& b) { return b.end_us <= now; }),
        book.live.end());
    book.prune_at = std::max<size_t>(64, 2 * book.live.size());
  }
  const uint64_t id = book.next_booking++;
  book.live.push_back(LiveBooking{id, start, timing.end_us, units});
  return id;
}

absl::Status SimDeviceModel::BookInTurn(Engine engine, double duration,
                                        int32_t units, Ticket* ticket,
                                        SimStream::Timing& timing) {
  if (!(duration > 0)) {
    timing.end_us = timing.ready_us;  // occupies nothing
    return absl::OkStatus();
  }
  const bool paced = clock_->paced();
  uint64_t live_id = 0;
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::AbortedError("the simulated backend is shutting down");
    }
    EngineBook& book = books_[Index(engine)];
    if (ticket != nullptr) {
      // Book in enqueue order: whichever stream gets here first, the
      // schedule is the same. Before its turn the stream parks, so the
      // worker runs other streams, the one whose turn it is among them.
      Turns* turns = TurnsOf(book, *ticket);
      if (turns != nullptr && turns->next_to_book != ticket->number_) {
        turns->turn_waiters[ticket->number_] = timing.Park();
        return absl::OkStatus();
      }
    }
    if (paced) {
      live_id = BookLiveLocked(book, duration, units, timing);
    } else {
      const double start =
          book.timeline->Book(timing.ready_us, duration, units);
      timing.end_us = start + duration;
    }
    if (ticket != nullptr) {
      ticket->booked_ = true;
      if (TurnsOf(book, *ticket) != nullptr) {
        next = AdvanceTurnLocked(book, *ticket);
      }
    }
  }
  if (next != nullptr) next->Wake();
  if (paced) {
    timing.OnInterrupt([this, engine, live_id](double at_us) {
      ReleaseBooking(engine, live_id, at_us);
    });
  }
  return absl::OkStatus();
}

void SimDeviceModel::ReleaseBooking(Engine engine, uint64_t id, double at_us) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  EngineBook& book = books_[Index(engine)];
  auto it = std::find_if(book.live.begin(), book.live.end(),
                         [id](const LiveBooking& b) { return b.id == id; });
  if (it == book.live.end() || it->end_us <= at_us) return;
  if (it->start_us >= at_us) {
    book.live.erase(it);  // had not started: nothing of it ran
  } else {
    it->end_us = at_us;
  }
  // Nothing is booked before `at_us` any more (the floor): what ran then
  // stays run. From there on every other live booking goes back where it
  // was, those under way first; each fits, being part of what fitted
  // before.
  book.live.erase(std::remove_if(book.live.begin(), book.live.end(),
                                 [at_us](const LiveBooking& b) {
                                   return b.end_us <= at_us;
                                 }),
                  book.live.end());
  book.timeline.emplace(book.max_kernels);
  book.timeline->Book(at_us, 0, 1, /*forget_before_us=*/at_us);
  for (const LiveBooking& b : book.live) {
    if (b.start_us <= at_us) {
      book.timeline->Book(at_us, b.end_us - at_us, b.units);
    }
  }
  for (const LiveBooking& b : book.live) {
    if (b.start_us > at_us) {
      book.timeline->Book(b.start_us, b.end_us - b.start_us, b.units);
    }
  }
}

void SimDeviceModel::Close() {
  std::vector<std::shared_ptr<SimStream::Waker>> parked;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;  // work waiting for its turn gives up
    for (EngineBook& book : books_) {
      for (auto& [ticket, waker] : book.turns.turn_waiters) {
        parked.push_back(std::move(waker));
      }
      book.turns.turn_waiters.clear();
      for (auto& [scope, turns] : book.scope_turns) {
        for (auto& [ticket, waker] : turns.turn_waiters) {
          parked.push_back(std::move(waker));
        }
        turns.turn_waiters.clear();
      }
    }
  }
  for (const auto& waker : parked) waker->Wake();
}

}  // namespace weft::runtime
