// The state that stream passes (stream_pass.h) read and refine.
//
// Stream allocation is an ordered chain of passes, each applying one rule
// (GraphEngine's design): labels, independent engines, dependencies,
// merging streams that cannot overlap, dense stream ids, events, dense event
// ids, physical splitting. A StreamContext carries what they share: the
// inputs (graph, DAG, cost levels, each node's device, the options), the
// logical streams and each node's stream and why it got it, and once events
// are planned, each node's signal and waits plus the vector clocks they were
// derived from; and one reachability query whose scratch space the passes
// that ask about ancestry share.
//
// Conventions: per-node vectors are indexed by NodeId; `waits` rows by issue
// position (Dag::order). A stream runs its nodes in issue order, a
// topological order, and events only point from earlier to later nodes, so
// no assignment can deadlock.
//
// Not thread-safe; one context per planning run.
#ifndef WEFT_SCHEDULER_PASSES_STREAM_CONTEXT_H_
#define WEFT_SCHEDULER_PASSES_STREAM_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/types/span.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/planner_options.h"
#include "scheduler/reachability.h"

namespace weft::scheduler {

struct StreamOptions {
  StreamMode mode = StreamMode::kMulti;
  int max_streams_per_device = 8;  // soft cap, per device and engine
  // Tasks (nodes, event records and event waits) a stream may hold before
  // it is split in two; 0: no limit.
  int max_nodes_per_stream = 0;
  // Whether passes record why each node got its stream
  // (StreamContext::choice) and the orderings the soft cap added
  // (StreamContext::added_orderings); plans that nobody reads need not.
  bool record_choices = true;
};

// Why a node went to its stream.
struct StreamChoice {
  enum class Why : uint8_t {
    kSingle,       // SINGLE mode
    kLabel,        // its stream label
    kIndependent,  // the device's collective stream
    kChain,        // the highest-ranked successor of `related`
    kRecycled,     // the stream's last node `related` is an ancestor
    kNew,          // no recyclable stream, below the cap
    kSoftCap,      // at the cap: after `related` (-1: an idle stream), the
                   // stream that delays it least; the sharing adds ordering
    kMerged,       // its stream was merged into the one `related` starts,
                   // since the two could never run at the same time
  };
  Why why = Why::kNew;
  NodeId related = -1;
};

struct LogicalStream {
  enum class Kind : uint8_t {
    kShared,       // from dependencies: recyclable and mergeable
    kLabel,        // a stream label's, used by nothing else
    kIndependent,  // an independent engine's (collectives)
    kSingle,       // SINGLE mode's one stream per device
  };
  int device = 0;
  Engine engine = Engine::kCompute;
  Kind kind = Kind::kShared;
  std::string label;
  bool alive = true;    // false once merged into another stream
  int split_from = -1;  // physical split: the stream this one continues
};

// Immutable snapshots of vector clocks, in one arena. A clock maps streams
// to the last sequence number (1-based position on that stream) known
// finished; 0 means nothing. With few streams (at most kDenseStreams) a
// snapshot is a dense row of one counter per stream (rows are padded to a
// multiple of a vector of counters, the padding kept 0, so that rows
// combine a vector of counters at a time); with more, a sparse list of
// (stream, seq) pairs sorted by stream. Version 0 is the empty clock.
//
// Dense counters are 32-bit (int32_t) unless the arena is told that no
// sequence number exceeds kNarrowMax: then they are 16-bit (uint16_t),
// which halves the memory that snapshots fill (narrow()). The int32_t
// row functions below are for wide rows; the ...As<T> forms take the
// counter type, which must match narrow().
//
// Windowed (dense only, Reserve with a byte budget that the snapshots
// would exceed): only the latest window() versions keep their rows, in a
// ring; an older version reads as the empty clock. Knowing less is always
// safe for its readers (they order more, never less); a caller that needs
// a version to last (a stream's current clock) copies it forward before
// the ring reaches it (Stale tells when).
class ClockArena {
 public:
  using Entry = std::pair<int32_t, int32_t>;
  static constexpr int kDenseStreams = 64;
  // 32-bit counters per vector.
  static constexpr int kLanes = 4;
  static constexpr int32_t kNarrowMax = 65535;

  // `max_seq`: the largest sequence number any clock will hold.
  explicit ClockArena(int num_streams = 0,
                      int32_t max_seq = std::numeric_limits<int32_t>::max());
  // Four 32-bit counters, combined at a time with the compiler's generic
  // vectors: one compare and a blend, on any target.
  using Lanes = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
  // Eight 16-bit counters, likewise.
  using NarrowLanes = uint16_t __attribute__((vector_size(16)));

  bool dense() const { return dense_; }
  // Dense rows of 16-bit counters.
  bool narrow() const { return narrow_; }
  int num_streams() const { return num_streams_; }
  int32_t num_versions() const { return num_versions_; }
  // The sequence number `version` knows for `stream`.
  int32_t Known(int32_t version, int32_t stream) const;

  // Dense form: the row of `version` (num_streams counters, then padding);
  // AddRow stores a copy of `row` and returns its version. T is uint16_t
  // if narrow(), else int32_t.
  template <typename T>
  const T* RowAs(int32_t version) const {
    if (window_ == 0) return Rows<T>() + static_cast<size_t>(version) * stride_;
    const int32_t slot = version & (window_ - 1);
    // An evicted version reads the zero row after the ring.
    return Rows<T>() +
           static_cast<size_t>(held_[slot] == version ? slot : window_) *
               stride_;
  }
  const int32_t* Row(int32_t version) const { return RowAs<int32_t>(version); }
  int32_t AddRow(const int32_t* row);
  // Appends a copy of the row of `version` and returns it to be refined
  // in place (valid until the next append); its version is
  // num_versions() - 1.
  template <typename T>
  T* CopyRowAs(int32_t version) {
    // (After the append, which may move the rows. Windowed, a version the
    // append evicts copies as the empty clock.)
    T* row = AppendRow<T>();
    const T* from = RowAs<T>(version);
    // A few vectors of counters: cheaper than a call to copy bytes.
    for (int k = 0; k < stride_; k += kVector / sizeof(T)) {
      std::memcpy(row + k, from + k, kVector);
    }
    return row;
  }
  int32_t* CopyRow(int32_t version) { return CopyRowAs<int32_t>(version); }
  // Appends the counter by counter maximum of the rows of versions `a`
  // and `b` and returns it, as CopyRow does.
  template <typename T>
  T* MaxRowAs(int32_t a, int32_t b) {
    T* row = AppendRow<T>();
    MaxOf(RowAs<T>(a), RowAs<T>(b), row);
    return row;
  }
  int32_t* MaxRow(int32_t a, int32_t b) { return MaxRowAs<int32_t>(a, b); }
  // row[k] = max(row[k], other[k]) for every counter of two dense rows.
  template <typename T>
  void MaxInto(T* row, const T* other) const {
    MaxOf(row, other, row);
  }

  // Sparse form: the entries of `version`; Add stores a clock (sorted by
  // stream) and returns its version.
  absl::Span<const Entry> Get(int32_t version) const {
    return absl::Span<const Entry>(entries_.data() + offsets_[version],
                                   offsets_[version + 1] - offsets_[version]);
  }
  int32_t Add(absl::Span<const Entry> clock);
  // The sequence number a sparse `clock` knows for `stream`.
  static int32_t Known(absl::Span<const Entry> clock, int32_t stream);

  // Room for `versions` more snapshots. Dense, with no snapshot taken yet
  // but the empty clock: if their rows would take more than `max_bytes`,
  // the arena is windowed instead, keeping the latest versions that fit
  // (a power of two, at least kMinWindow).
  void Reserve(int64_t versions,
               size_t max_bytes = std::numeric_limits<size_t>::max());
  static constexpr int32_t kMinWindow = 4096;
  // Versions whose rows are kept: 0 if every one is.
  int32_t window() const { return window_; }
  // Whether `version` is among the oldest quarter of the window, due for
  // a copy forward if it must last (never, unwindowed).
  bool Stale(int32_t version) const {
    return window_ != 0 && version < num_versions_ - window_ * 3 / 4;
  }

 private:
  // Bytes of counters combined at a time.
  static constexpr int kVector = 16;

  template <typename T>
  T* Rows() const {
    static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, uint16_t>);
    if constexpr (std::is_same_v<T, int32_t>) {
      return wide_rows_.get();
    } else {
      return narrow_rows_.get();
    }
  }
  // out[k] = max(x[k], y[k]) for every counter of a dense row, a vector
  // at a time (out may be x).
  template <typename T>
  void MaxOf(const T* x, const T* y, T* out) const {
    // (Spelled out: a vector_size attribute on a type that depends on T
    // would be dropped.)
#if defined(__SSE2__)
    if constexpr (std::is_same_v<T, uint16_t>) {
      // max(u, w) = w + (u - w, saturated at 0): two instructions, where
      // SSE2 has no unsigned 16-bit compare to select with.
      for (int k = 0; k < stride_; k += kVector / sizeof(T)) {
        const __m128i u =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k));
        const __m128i w =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + k));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k),
                         _mm_add_epi16(w, _mm_subs_epu16(u, w)));
      }
      return;
    }
#endif
    using Vector =
        std::conditional_t<std::is_same_v<T, int32_t>, Lanes, NarrowLanes>;
    static_assert(sizeof(Vector) == kVector);
    for (int k = 0; k < stride_; k += kVector / sizeof(T)) {
      Vector u, w;
      std::memcpy(&u, x + k, sizeof(u));
      std::memcpy(&w, y + k, sizeof(w));
      const auto u_wins = u > w;
      u = (u & u_wins) | (w & ~u_wins);
      std::memcpy(out + k, &u, sizeof(u));
    }
  }
  // Appends a row, its contents undefined, and returns it.
  template <typename T>
  T* AppendRow() {
    if (window_ != 0) {
      const int32_t slot = num_versions_ & (window_ - 1);
      held_[slot] = num_versions_++;
      return Rows<T>() + static_cast<size_t>(slot) * stride_;
    }
    const size_t at = static_cast<size_t>(num_versions_) * stride_;
    if (at + stride_ > capacity_) Grow(std::max(2 * capacity_, at + stride_));
    ++num_versions_;
    return Rows<T>() + at;
  }
  // Room for `counters` counters in all, keeping the rows so far.
  void Grow(size_t counters);

  bool dense_;
  bool narrow_;
  int num_streams_;
  int stride_;  // dense: counters per row, num_streams rounded up to a
                // whole vector
  int32_t num_versions_ = 1;
  // Windowed: the ring's size (a power of two; then window_ rows and a
  // zero row after them) and the version each slot holds; 0 and empty
  // otherwise.
  int32_t window_ = 0;
  std::vector<int32_t> held_;
  // Dense: num_versions rows, then room for capacity_ counters in all, in
  // the one of the two that matches narrow_; rows are written whole before
  // they are read, so the room is left uninitialized.
  std::unique_ptr<int32_t[]> wide_rows_;
  std::unique_ptr<uint16_t[]> narrow_rows_;
  size_t capacity_ = 0;
  std::vector<Entry> entries_;    // sparse
  std::vector<int64_t> offsets_;  // sparse
};

struct StreamContext {
  StreamContext(const Graph& graph, const Dag& dag, const CostLevels& levels,
                std::vector<int> device, const StreamOptions& options);

  // Appends a logical stream; returns its id.
  int NewStream(int device, Engine engine, LogicalStream::Kind kind,
                std::string label = "");
  int num_nodes() const { return dag.num_nodes(); }
  // A reachability query on the DAG, shared by the passes that ask (its
  // scratch space is as large as the graph); created on first use.
  ReachabilityQuery& query();

  // Inputs.
  const Graph& graph;
  const Dag& dag;
  const CostLevels& levels;
  const std::vector<int> device;  // by NodeId
  const StreamOptions& options;

  // Copies between devices. By NodeId, or empty when there are none: the
  // device a COPY node reads its input from, when that is not its own
  // device (-1 otherwise). Such a node also holds a peer stream, a COPY
  // stream of that device: it starts when both its streams reach it, and
  // both continue after it.
  std::vector<int> peer_device;
  bool has_peers() const { return !peer_device.empty(); }
  int peer_device_of(NodeId v) const {
    return peer_device.empty() ? -1 : peer_device[v];
  }
  // The peer stream of v, or -1.
  int32_t peer_of(NodeId v) const {
    return peer_stream.empty() ? -1 : peer_stream[v];
  }

  // Stream assignment.
  std::vector<int32_t> stream_of;  // by NodeId; -1: not yet assigned
  // By NodeId, or empty when no node has a peer device; -1: none.
  std::vector<int32_t> peer_stream;
  // By NodeId; empty unless options.record_choices. Passes set it with
  // SetChoice.
  std::vector<StreamChoice> choice;
  void SetChoice(NodeId v, StreamChoice why) {
    if (!choice.empty()) choice[v] = why;
  }
  std::vector<LogicalStream> streams;
  // Orderings the soft cap added: (node before, node after) on one stream
  // where the DAG does not order them. Empty unless
  // options.record_choices.
  std::vector<std::pair<NodeId, NodeId>> added_orderings;

  // Events (once planned).
  bool events_planned = false;
  int num_events = 0;
  std::vector<int32_t> signal;  // by NodeId; -1: none
  Csr waits;                    // rows by issue position: event ids
  // The clocks events were planned with: each node's sequence number on
  // its stream and the version of its stream's clock once its waits were
  // done (what it knew of other streams when it ran). Only the stream
  // passes read clock_of and clocks: the planner empties both after them.
  std::vector<int32_t> seq;  // by NodeId
  // By NodeId (empty without peers): the node's sequence number on its
  // peer stream, 0 if it has none. The clock of a node with a peer covers
  // both of its streams.
  std::vector<int32_t> peer_seq;
  std::vector<int32_t> clock_of;  // by NodeId
  ClockArena clocks;

  // Storage of query().
  std::unique_ptr<ReachabilityQuery> shared_query;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_STREAM_CONTEXT_H_
