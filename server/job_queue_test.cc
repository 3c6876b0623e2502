#include "server/job_queue.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

class JobQueueTest : public ::testing::Test {
 protected:
  void Push(const std::string& id, const std::string& tenant,
            int32_t priority = 0) {
    queue_.Push({id, tenant, priority, ++seq_});
  }
  std::string PopId() {
    std::optional<JobQueue::Entry> e = queue_.Pop();
    return e ? e->id : "<empty>";
  }

  JobQueue queue_;
  uint64_t seq_ = 0;
};

TEST_F(JobQueueTest, OneTenantRunsByPriorityThenSubmission) {
  Push("a", "t", 0);
  Push("b", "t", 5);
  Push("c", "t", 0);
  Push("d", "t", 5);
  EXPECT_EQ(queue_.size(), 4);
  EXPECT_EQ(PopId(), "b");
  EXPECT_EQ(PopId(), "d");
  EXPECT_EQ(PopId(), "a");
  EXPECT_EQ(PopId(), "c");
  EXPECT_EQ(PopId(), "<empty>");
  EXPECT_EQ(queue_.running("t"), 4);
}

// Every change moves the version, so that answers read from the queue
// can be kept while it stays; reading changes nothing.
TEST_F(JobQueueTest, VersionMovesWithEveryChange) {
  uint64_t seen = queue_.version();
  auto changed = [&] {
    const bool moved = queue_.version() != seen;
    seen = queue_.version();
    return moved;
  };
  Push("a", "t");
  EXPECT_TRUE(changed());
  Push("b", "u");
  EXPECT_TRUE(changed());
  queue_.PeekId();
  queue_.OtherTenantsNext();
  queue_.startable();
  EXPECT_FALSE(changed());
  EXPECT_EQ(PopId(), "a");
  EXPECT_TRUE(changed());
  queue_.Finished("t");
  EXPECT_TRUE(changed());
  queue_.Finished("t");  // nothing running: nothing changes
  EXPECT_FALSE(changed());
  Push("c", "t");
  EXPECT_TRUE(changed());
  EXPECT_TRUE(queue_.Remove("t", 0, seq_));
  EXPECT_TRUE(changed());
  EXPECT_FALSE(queue_.Remove("t", 0, seq_));
  EXPECT_FALSE(changed());
  queue_.PopTenant("u");
  EXPECT_TRUE(changed());
  Push("d", "v");
  EXPECT_TRUE(changed());
  queue_.TakeAll();
  EXPECT_TRUE(changed());
}

TEST_F(JobQueueTest, PeekIdNamesTheJobPopReturns) {
  EXPECT_EQ(queue_.PeekId(), nullptr);
  Push("a", "t", 0);
  Push("b", "u", 0);
  Push("c", "t", 5);
  for (int i = 0; i < 3; ++i) {
    const std::string* peeked = queue_.PeekId();
    ASSERT_NE(peeked, nullptr);
    const std::string expected = *peeked;
    EXPECT_EQ(PopId(), expected);
  }
  EXPECT_EQ(queue_.PeekId(), nullptr);
}

TEST_F(JobQueueTest, OtherTenantsNextComeInTurnOrder) {
  EXPECT_TRUE(queue_.OtherTenantsNext().empty());
  Push("t1", "t");
  Push("u1", "u");
  Push("u2", "u", 5);
  Push("v1", "v");
  ASSERT_EQ(PopId(), "t1");  // t has had a turn and runs one
  Push("t2", "t");
  // Next is u's best (u2), then v's; t, which runs a job, comes last.
  ASSERT_NE(queue_.PeekId(), nullptr);
  EXPECT_EQ(*queue_.PeekId(), "u2");
  std::vector<std::string> others;
  for (const std::string* id : queue_.OtherTenantsNext()) others.push_back(*id);
  EXPECT_EQ(others, (std::vector<std::string>{"v1", "t2"}));
  // PopTenant takes a tenant's next job out of turn, and counts it.
  EXPECT_EQ(queue_.PopTenant("v").id, "v1");
  EXPECT_EQ(queue_.running("v"), 1);
  EXPECT_EQ(*queue_.PeekId(), "u2");
  others.clear();
  for (const std::string* id : queue_.OtherTenantsNext()) others.push_back(*id);
  EXPECT_EQ(others, (std::vector<std::string>{"t2"}));
  EXPECT_EQ(PopId(), "u2");
  EXPECT_EQ(PopId(), "t2");  // served longer ago than u
  EXPECT_EQ(PopId(), "u1");
  EXPECT_TRUE(queue_.empty());
}

TEST(JobQueueBoundTest, OtherTenantsNextLeavesOutTenantsAtTheirBound) {
  JobQueue queue(/*max_running_per_tenant=*/1);
  uint64_t seq = 0;
  queue.Push({"a1", "a", 0, ++seq});
  queue.Push({"b1", "b", 0, ++seq});
  queue.Push({"b2", "b", 0, ++seq});
  queue.Push({"c1", "c", 0, ++seq});
  EXPECT_EQ(queue.Pop()->id, "a1");
  EXPECT_EQ(queue.Pop()->id, "b1");  // b is at its bound now
  ASSERT_NE(queue.PeekId(), nullptr);
  EXPECT_EQ(*queue.PeekId(), "c1");
  EXPECT_TRUE(queue.OtherTenantsNext().empty());
}

TEST_F(JobQueueTest, PriorityDoesNotJumpAnotherTenant) {
  // A tenant floods at the highest priority before another submits once.
  for (int i = 0; i < 40; ++i) {
    Push(absl::StrCat("flood", i), "flooder", INT32_MAX);
  }
  Push("first", "quiet", INT32_MIN);
  // The quiet tenant has run nothing, the flooder nothing either: turns
  // alternate, so the quiet job is at most the second to start.
  const std::string a = PopId();
  const std::string b = PopId();
  EXPECT_TRUE(a == "first" || b == "first") << a << " " << b;
}

TEST_F(JobQueueTest, TenantWithFewestRunningGoesNext) {
  for (int i = 0; i < 10; ++i) Push(absl::StrCat("f", i), "flooder");
  // Sixteen slots' worth: the flooder holds everything that runs.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PopId(), absl::StrCat("f", i));
  Push("q", "quiet");
  // Even though the flooder was first in line, the quiet tenant runs
  // nothing and starts next.
  EXPECT_EQ(PopId(), "q");
  EXPECT_EQ(PopId(), "f5");
}

TEST_F(JobQueueTest, TiesGoToTheTenantServedLongestAgo) {
  for (int i = 0; i < 3; ++i) {
    Push(absl::StrCat("a", i), "A");
    Push(absl::StrCat("b", i), "B");
    Push(absl::StrCat("c", i), "C");
  }
  std::vector<std::string> order;
  while (!queue_.empty()) {
    std::optional<JobQueue::Entry> e = queue_.Pop();
    order.push_back(e->id);
    queue_.Finished(e->tenant);  // each job ends before the next starts
  }
  // Round robin: no tenant gets two turns before the others had one.
  ASSERT_EQ(order.size(), 9u);
  for (int round = 0; round < 3; ++round) {
    std::set<char> tenants;
    for (int k = 0; k < 3; ++k) tenants.insert(order[round * 3 + k][0]);
    EXPECT_EQ(tenants.size(), 3u) << "round " << round;
  }
}

TEST_F(JobQueueTest, RemoveTakesOutOneJob) {
  Push("a", "t", 1);
  Push("b", "t", 2);
  EXPECT_FALSE(queue_.Remove("t", 1, 99));
  EXPECT_FALSE(queue_.Remove("t", 2, 1));  // wrong priority for seq 1
  EXPECT_FALSE(queue_.Remove("u", 1, 1));
  EXPECT_TRUE(queue_.Remove("t", 1, 1));
  EXPECT_EQ(queue_.size(), 1);
  EXPECT_EQ(queue_.queued("t"), 1);
  EXPECT_EQ(PopId(), "b");
  EXPECT_TRUE(queue_.empty());
  EXPECT_EQ(queue_.tenants_waiting(), 0);
}

TEST_F(JobQueueTest, TakeAllStartsNothing) {
  Push("a", "A");
  Push("b", "B");
  Push("c", "A");
  std::vector<JobQueue::Entry> all = queue_.TakeAll();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(queue_.empty());
  EXPECT_EQ(queue_.running("A"), 0);
  EXPECT_EQ(queue_.running("B"), 0);
}

TEST_F(JobQueueTest, FinishedFreesTheTenantsTurn) {
  Push("a1", "A");
  Push("a2", "A");
  EXPECT_EQ(PopId(), "a1");
  Push("b1", "B");
  Push("b2", "B");
  EXPECT_EQ(PopId(), "b1");  // B runs nothing, A runs one
  // Both run one; A was served longest ago.
  queue_.Finished("B");  // now B runs nothing
  EXPECT_EQ(PopId(), "b2");
  EXPECT_EQ(PopId(), "a2");
  EXPECT_EQ(queue_.running("A"), 2);
  queue_.Finished("A");
  queue_.Finished("A");
  queue_.Finished("A");  // one too many is ignored
  EXPECT_EQ(queue_.running("A"), 0);
}

// Random operations against a simple model of the rule.
TEST_F(JobQueueTest, MatchesTheRuleOnRandomOperations) {
  absl::BitGen gen;
  struct Job {
    std::string id, tenant;
    int32_t priority;
    uint64_t seq;
  };
  std::vector<Job> queued;
  std::map<std::string, int> running;
  std::map<std::string, uint64_t> last_turn;
  std::map<std::string, uint64_t> since;
  uint64_t turns = 0;
  for (int step = 0; step < 5000; ++step) {
    const int op = absl::Uniform(gen, 0, 10);
    if (op < 5) {
      Job j{absl::StrCat("j", step),
            absl::StrCat("t", absl::Uniform(gen, 0, 5)),
            absl::Uniform(gen, -2, 3), ++seq_};
      bool known = running[j.tenant] > 0;
      for (const Job& q : queued) known |= q.tenant == j.tenant;
      if (!known) since[j.tenant] = j.seq;
      queue_.Push({j.id, j.tenant, j.priority, j.seq});
      queued.push_back(j);
    } else if (op < 8) {
      std::optional<JobQueue::Entry> got = queue_.Pop();
      if (queued.empty()) {
        EXPECT_FALSE(got.has_value());
        continue;
      }
      // The model: least running, then served longest ago (never: 0), then
      // queued first,
      // then within the tenant highest priority, then earliest.
      std::set<std::string> waiting;
      for (const Job& j : queued) waiting.insert(j.tenant);
      std::string best;
      for (const std::string& t : waiting) {
        if (best.empty() ||
            std::tie(running[t], last_turn[t], since[t]) <
                std::tie(running[best], last_turn[best], since[best])) {
          best = t;
        }
      }
      size_t pick = queued.size();
      for (size_t i = 0; i < queued.size(); ++i) {
        if (queued[i].tenant != best) continue;
        if (pick == queued.size() ||
            queued[i].priority > queued[pick].priority ||
            (queued[i].priority == queued[pick].priority &&
             queued[i].seq < queued[pick].seq)) {
          pick = i;
        }
      }
      ASSERT_TRUE(got.has_value());
      ASSERT_EQ(got->id, queued[pick].id) << "step " << step;
      ++running[best];
      last_turn[best] = ++turns;
      queued.erase(queued.begin() + pick);
    } else {
      // Finish a running job of a random tenant.
      const std::string t = absl::StrCat("t", absl::Uniform(gen, 0, 5));
      queue_.Finished(t);
      if (running[t] > 0) --running[t];
      bool waiting = false;
      for (const Job& j : queued) waiting |= j.tenant == t;
      if (running[t] == 0 && !waiting) last_turn[t] = 0;
    }
    ASSERT_EQ(queue_.size(), static_cast<int64_t>(queued.size()));
  }
}

TEST(JobQueueBoundTest, ATenantAtItsBoundWaitsWhileOthersStart) {
  JobQueue queue(/*max_running_per_tenant=*/2);
  uint64_t seq = 0;
  for (int i = 0; i < 5; ++i) {
    queue.Push({absl::StrCat("h", i), "hog", 0, ++seq});
  }
  EXPECT_EQ(queue.Pop()->id, "h0");
  EXPECT_EQ(queue.Pop()->id, "h1");
  // The hog holds two: nothing more of it starts, although slots are free.
  EXPECT_FALSE(queue.startable());
  EXPECT_FALSE(queue.Pop().has_value());
  EXPECT_EQ(queue.size(), 3);
  queue.Push({"q", "quiet", 0, ++seq});
  EXPECT_TRUE(queue.startable());
  EXPECT_EQ(queue.Pop()->id, "q");
  queue.Finished("hog");
  EXPECT_EQ(queue.Pop()->id, "h2");
  // TakeAll ignores the bound: everything queued comes out.
  EXPECT_EQ(queue.TakeAll().size(), 2u);
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace weft::server
