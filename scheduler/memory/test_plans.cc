#include "scheduler/memory/test_plans.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"

namespace weft::scheduler::memory::testing {

Graph RandomGraph(uint32_t seed, const RandomGraphOptions& options) {
  std::mt19937 rng(seed);
  auto chance = [&](double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng) < p;
  };
  std::vector<BufferSpec> buffers(options.num_buffers);
  for (int b = 0; b < options.num_buffers; ++b) {
    BufferSpec& spec = buffers[b];
    spec.name = absl::StrCat("b", b);
    spec.size_bytes = 1 + rng() % (64 * 1024);
    if (chance(options.initial_data)) spec.init = BufferSpec::Init::kData;
    spec.output = chance(options.output);
  }
  std::vector<NodeSpec> nodes(options.num_nodes);
  for (int v = 0; v < options.num_nodes; ++v) {
    NodeSpec& spec = nodes[v];
    spec.name = absl::StrCat("n", v);
    spec.op = "spin";
    spec.cost_us = 1 + rng() % 20;
    if (chance(options.copy_nodes)) {
      spec.engine = Engine::kCopy;
    } else if (chance(options.host_nodes)) {
      spec.engine = Engine::kHost;
    }
    const int uses = 1 + static_cast<int>(rng() % options.max_uses);
    std::vector<uint8_t> taken(options.num_buffers, 0);
    for (int k = 0; k < uses; ++k) {
      const BufferId b = static_cast<BufferId>(rng() % options.num_buffers);
      if (taken[b]) continue;
      taken[b] = 1;
      const Access access = k == 0        ? Access::kWrite
                            : chance(0.6) ? Access::kRead
                            : chance(0.5) ? Access::kReadWrite
                                          : Access::kWrite;
      spec.args.push_back(BufferUse{b, access});
    }
  }
  return Graph("random", std::move(buffers), std::move(nodes));
}

Graph WithBuffers(const Graph& graph, const std::vector<std::string>& outputs,
                  const std::vector<std::string>& with_data) {
  std::vector<BufferSpec> buffers = graph.buffers();
  for (BufferSpec& b : buffers) {
    for (const std::string& name : outputs) {
      if (b.name == name) b.output = true;
    }
    for (const std::string& name : with_data) {
      if (b.name == name) b.init = BufferSpec::Init::kData;
    }
  }
  return Graph(graph.name(), std::move(buffers), graph.nodes(),
               graph.modules());
}

std::vector<std::vector<uint64_t>> BruteForceBefore(const Plan& plan) {
  const int n = plan.num_nodes();
  const int words = (n + 63) / 64;
  std::vector<std::vector<uint64_t>> before(n, std::vector<uint64_t>(words, 0));
  std::vector<int> last_on_stream(plan.streams.size(), -1);
  std::vector<int> recorded_by(plan.num_events, -1);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    std::vector<int> preds;
    if (last_on_stream[pn.stream] >= 0) {
      preds.push_back(last_on_stream[pn.stream]);
    }
    if (pn.peer_stream >= 0 && last_on_stream[pn.peer_stream] >= 0) {
      preds.push_back(last_on_stream[pn.peer_stream]);
    }
    for (int e : plan.Waits(i)) preds.push_back(recorded_by[e]);
    for (int p : preds) {
      for (int w = 0; w < words; ++w) before[i][w] |= before[p][w];
      before[i][p / 64] |= uint64_t{1} << (p % 64);
    }
    last_on_stream[pn.stream] = i;
    if (pn.peer_stream >= 0) last_on_stream[pn.peer_stream] = i;
    if (pn.signal_event >= 0) recorded_by[pn.signal_event] = i;
  }
  return before;
}

bool BruteBefore(const Lifetimes& lt,
                 const std::vector<std::vector<uint64_t>>& bf, int a, int b) {
  const BufferCopy& ca = lt.copy(a);
  if (a == b || ca.live_to_end) return false;
  auto upload_rank = [&](int c) {
    int rank = 0;
    for (int k = 0; k <= c; ++k) {
      rank += lt.copy(k).uploaded && lt.copy(k).device == lt.copy(c).device;
    }
    return rank;
  };
  auto hb = [&](int x, int y) {  // positions; -1: a's upload
    if (y < 0) return false;
    if (x >= 0) return BitSet(bf[y], x);
    const int rank = upload_rank(a);
    for (int c = 0; c < lt.num_copies(); ++c) {
      const BufferCopy& cc = lt.copy(c);
      if (!cc.uploaded || cc.device != ca.device || upload_rank(c) < rank) {
        continue;
      }
      for (int w : lt.Uses(c)) {
        if (w >= 0 && (w == y || BitSet(bf[y], w))) return true;
      }
    }
    return false;
  };
  for (int x : lt.Uses(a)) {
    for (int y : lt.Uses(b)) {
      if (!hb(x, y)) return false;
    }
  }
  return true;
}

RandomPlanCase RandomCase(uint32_t seed) {
  RandomPlanCase c;
  c.graph.num_nodes = 10 + seed % 40;
  c.graph.num_buffers = 5 + seed % 23;
  c.planner.num_devices = 1 + seed % 3;
  c.planner.max_streams_per_device = 1 + (seed / 3) % 4;
  c.planner.device_policy = seed % 2 ? DevicePolicyKind::kRoundRobin
                                     : DevicePolicyKind::kMinFinishTime;
  c.planner.simulate = seed % 5 == 0;
  return c;
}

}  // namespace weft::scheduler::memory::testing
