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
  if (!booked_) model_->GiveUp(engine_, number_);
}

void SimDeviceModel::GiveUp(Engine engine, uint64_t number) {
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&mu_);
    EngineBook& book = books_[Index(engine)];
    book.turn_waiters.erase(number);
    if (number != book.next_to_book) {
      book.given_up.insert(number);
      return;
    }
    next = AdvanceTurnLocked(engine);
  }
  if (next != nullptr) next->Wake();
}

std::shared_ptr<SimStream::Waker> SimDeviceModel::AdvanceTurnLocked(
    Engine engine) {
  EngineBook& book = books_[Index(engine)];
  ++book.next_to_book;
  while (!book.given_up.empty() &&
         *book.given_up.begin() == book.next_to_book) {
    book.given_up.erase(book.given_up.begin());
    ++book.next_to_book;
  }
  auto it = book.turn_waiters.find(book.next_to_book);
  if (it == book.turn_waiters.end()) return nullptr;
  std::shared_ptr<SimStream::Waker> waker = std::move(it->second);
  book.turn_waiters.erase(it);
  return waker;
}

void SimDeviceModel::EnqueueInTurn(SimStream& queue, Engine engine,
                                   double duration,
                                   std::optional<Ticket>* ticket,
                                   SimStream::Work work) {
  if (clock_->paced() || !(duration > 0)) {
    queue.Enqueue(std::move(work));
    return;
  }
  // Unpaced: take a ticket and enqueue under the device's lock, so tickets
  // follow the order of the work on every stream.
  absl::MutexLock lock(&mu_);
  EngineBook& book = books_[Index(engine)];
  ticket->emplace(this, engine, book.next_ticket++);
  queue.Enqueue(std::move(work));
}

void SimDeviceModel::EnqueueInTurn(absl::Span<const TicketRequest> tickets,
                                   absl::Span<QueuedWork> works) {
  auto enqueue_all = [&] {
    for (QueuedWork& queued : works) {
      queued.queue->Enqueue(std::move(queued.work));
    }
  };
  if (clock_->paced()) {
    enqueue_all();
    return;
  }
  absl::MutexLock lock(&mu_);
  for (const TicketRequest& request : tickets) {
    if (!(request.duration > 0)) continue;
    EngineBook& book = books_[Index(request.engine)];
    request.ticket->emplace(this, request.engine, book.next_ticket++);
  }
  enqueue_all();
}

absl::Status SimDeviceModel::BookInTurn(Engine engine, double duration,
                                        int32_t units, Ticket* ticket,
                                        SimStream::Timing& timing) {
  if (!(duration > 0)) {
    timing.end_us = timing.ready_us;  // occupies nothing
    return absl::OkStatus();
  }
  if (ticket == nullptr) {
    // Paced: booked as it comes. Nothing is forgotten by time: work may be
    // ready before now (virtual times do not wait for the host; sim_stream.h)
    // and must still find the gaps it would have had. The timeline's own
    // bound on breakpoints keeps it small.
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      EngineBook& book = books_[Index(engine)];
      const double start =
          book.timeline->Book(timing.ready_us, duration, units);
      timing.end_us = start + duration;
      if (book.live.size() >= book.prune_at) {
        const double now = clock_->NowUs();
        book.live.erase(std::remove_if(book.live.begin(), book.live.end(),
                                       [now](const LiveBooking& b) {
                                         return b.end_us <= now;
                                       }),
                        book.live.end());
        book.prune_at = std::max<size_t>(64, 2 * book.live.size());
      }
      id = book.next_booking++;
      book.live.push_back(LiveBooking{id, start, timing.end_us, units});
    }
    timing.OnInterrupt([this, engine, id](double at_us) {
      ReleaseBooking(engine, id, at_us);
    });
    return absl::OkStatus();
  }
  // Book in enqueue order: whichever stream gets here first, the schedule
  // is the same (and deterministic). Before its turn the stream parks, so
  // the worker runs other streams, the one whose turn it is among them.
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::AbortedError("the simulated backend is shutting down");
    }
    EngineBook& book = books_[Index(engine)];
    if (book.next_to_book != ticket->number_) {
      book.turn_waiters[ticket->number_] = timing.Park();
      return absl::OkStatus();
    }
    const double start = book.timeline->Book(timing.ready_us, duration, units);
    timing.end_us = start + duration;
    ticket->booked_ = true;
    next = AdvanceTurnLocked(engine);
  }
  if (next != nullptr) next->Wake();
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
      for (auto& [ticket, waker] : book.turn_waiters) {
        parked.push_back(std::move(waker));
      }
      book.turn_waiters.clear();
    }
  }
  for (const auto& waker : parked) waker->Wake();
}

}  // namespace weft::runtime
