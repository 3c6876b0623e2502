#include "server/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "weft/v1/weft.grpc.pb.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

// grpc.health.v1.Health/Check by hand: HealthCheckRequest{service = 1} and
// HealthCheckResponse{status = 1} are single-field messages. Returns the
// status number (1 SERVING, 2 NOT_SERVING) or -1 on RPC failure.
int HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                const std::string& service) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer buffer(&slice, 1);
  grpc::CompletionQueue cq;
  auto call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", buffer, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  if (!status.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
  return bytes.empty() ? 0 : -1;
}

// A plain HTTP/1.0 GET on 127.0.0.1:port; returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  if (write(fd, req.data(), req.size()) < 0) {
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

weft::v1::Graph Spins(int n, double us) {
  weft::v1::Graph g;
  g.set_name("spins");
  weft::v1::Buffer* b = g.add_buffers();
  b->set_name("b");
  b->set_size_bytes(8);
  for (int i = 0; i < n; ++i) {
    weft::v1::Node* node = g.add_nodes();
    node->set_name(absl::StrCat("s", i));
    node->set_op("spin");
    weft::v1::BufferArg* arg = node->add_args()->mutable_buffer();
    arg->set_name("b");
    arg->set_access(weft::v1::READ_WRITE);
    node->mutable_cost()->set_estimated_us(us);
  }
  return g;
}

class DaemonTest : public ::testing::Test {
 protected:
  // Stop cancels queued jobs; the drain tests need theirs running.
  static void WaitRunning(JobManager* jobs, const std::string& id) {
    auto watch = jobs->Watch(id);
    ASSERT_TRUE(watch.ok()) << watch.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      WatchUpdate u = (*watch)->Next(deadline);
      if (u.job.state == JobState::kRunning) return;
      ASSERT_FALSE(u.done);
    }
    FAIL() << "job never ran";
  }

  Daemon::Options TestOptions() {
    Daemon::Options o;
    o.listen = "127.0.0.1:0";
    // Socket paths are limited to 107 bytes; the test sandbox is deeper.
    static int counter = 0;
    o.unix_socket =
        absl::StrCat("/tmp/weftd-test-", getpid(), "-", ++counter, ".sock");
    // The metrics endpoint takes a second or two to stop; only the test that
    // scrapes turns it on.
    o.metrics_listen = "";
    o.backend.kind = "sim";
    o.backend.sim_devices = 2;
    o.backend.sim_memory_bytes = 1 << 20;
    return o;
  }

  static std::shared_ptr<grpc::Channel> Channel(const std::string& target) {
    return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  }

  static grpc::Status Submit(weft::v1::Scheduler::Stub* stub,
                             const weft::v1::Graph& graph, weft::v1::Job* job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    weft::v1::SubmitGraphRequest req;
    *req.mutable_graph() = graph;
    weft::v1::SubmitGraphResponse resp;
    grpc::Status s = stub->SubmitGraph(&ctx, req, &resp);
    *job = resp.job();
    return s;
  }

  // Submits `graph` and waits up to 20 s for the job to end: its end, or
  // why it did not.
  static absl::StatusOr<JobInfo> RunToEnd(Daemon& daemon,
                                          weft::v1::Scheduler::Stub* stub,
                                          const weft::v1::Graph& graph) {
    weft::v1::Job job;
    const grpc::Status submitted = Submit(stub, graph, &job);
    if (!submitted.ok()) {
      return absl::UnknownError(
          absl::StrCat("SubmitGraph: ", submitted.error_message()));
    }
    return daemon.job_manager()->WaitUntilTerminal(
        job.id(), absl::Now() + absl::Seconds(20));
  }
};

TEST_F(DaemonTest, ServesTcpUnixHealthAndMetrics) {
  Daemon::Options options = TestOptions();
  options.metrics_listen = "127.0.0.1:0";
  // The memory pool's counts below are the one job's alone.
  options.warm_up = false;
  std::ostringstream log;
  options.log = &log;
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_GT((*daemon)->tcp_port(), 0);
  ASSERT_GT((*daemon)->metrics_port(), 0);
  EXPECT_THAT(log.str(),
              HasSubstr(absl::StrCat("weftd: serving weft.v1.Scheduler on "
                                     "127.0.0.1:",
                                     (*daemon)->tcp_port(), "\n")));
  EXPECT_THAT(log.str(), HasSubstr(absl::StrCat(
                             "weftd: serving weft.v1.Scheduler on unix:",
                             options.unix_socket)));
  EXPECT_THAT(log.str(), HasSubstr("weftd: 2 simulated devices\n"));
  EXPECT_THAT(log.str(), ::testing::EndsWith("weftd: ready\n"));

  auto tcp = Channel((*daemon)->target());
  EXPECT_EQ(HealthCheck(tcp, ""), 1);
  EXPECT_EQ(HealthCheck(tcp, "weft.v1.Scheduler"), 1);

  auto unix_channel = Channel(absl::StrCat("unix:", options.unix_socket));
  auto stub = weft::v1::Scheduler::NewStub(unix_channel);
  absl::StatusOr<JobInfo> done = RunToEnd(**daemon, stub.get(), Spins(2, 10));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, JobState::kSucceeded);

  std::string metrics = HttpGet((*daemon)->metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("200 OK"));
  EXPECT_THAT(
      metrics,
      HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant=\"\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("weft_device_streams{UUID=\"GPU-"));
  EXPECT_THAT(metrics,
              HasSubstr("weft_device_memory_capacity_bytes{UUID=\"GPU-"));
  EXPECT_THAT(metrics, HasSubstr(",device=\"0\"} 1048576"));
  EXPECT_THAT(metrics, HasSubstr("weft_node_executions_total{UUID=\"GPU-"));
  EXPECT_THAT(metrics, HasSubstr("weft_device_busy_streams{UUID=\"GPU-"));
  EXPECT_THAT(metrics, HasSubstr("weft_copy_bytes_total{direction="));
  // The job's 8-byte buffer came from the device once and went back to its
  // pool: nothing in use, one 512-byte block cached.
  EXPECT_THAT(metrics,
              ::testing::ContainsRegex(
                  "weft_device_memory_allocations_total\\{[^}]*\\} 1\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "weft_device_memory_cached_bytes\\{[^}]*\\} 512\n"));
  EXPECT_THAT(metrics, HasSubstr("weft_device_memory_pool_hits_total{UUID="));
  EXPECT_THAT(metrics, HasSubstr("weft_device_memory_used_bytes{UUID="));
  EXPECT_THAT(metrics, ::testing::Not(::testing::ContainsRegex(
                           "weft_device_memory_used_bytes\\{[^}]*\\} [1-9]")));

  (*daemon)->Stop();
  EXPECT_THAT(log.str(), HasSubstr("weftd: stopped"));
  EXPECT_NE(access(options.unix_socket.c_str(), F_OK), 0)
      << "socket file left behind";
}

// Warmed up, every device has streams (and cached memory) before the
// first client's job; without the warm-up, none.
TEST_F(DaemonTest, WarmsUpEveryDeviceBeforeServing) {
  for (const bool warm_up : {true, false}) {
    SCOPED_TRACE(warm_up ? "warm_up" : "no warm_up");
    Daemon::Options options = TestOptions();
    options.warm_up = warm_up;
    std::ostringstream log;
    options.log = &log;
    auto daemon = Daemon::BuildAndStart(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    EXPECT_EQ(absl::StrContains(log.str(), "weftd: warmed up 2 device(s) in "),
              warm_up)
        << log.str();
    auto stub = weft::v1::Scheduler::NewStub(Channel((*daemon)->target()));
    grpc::ClientContext ctx;
    weft::v1::ListDevicesResponse devices;
    ASSERT_TRUE(
        stub->ListDevices(&ctx, weft::v1::ListDevicesRequest(), &devices).ok());
    ASSERT_EQ(devices.devices_size(), 2);
    for (const weft::v1::Device& d : devices.devices()) {
      if (warm_up) {
        EXPECT_GE(d.streams_total(), 2) << "device " << d.index();
        EXPECT_EQ(d.streams_busy(), 0) << "device " << d.index();
      } else {
        EXPECT_EQ(d.streams_total(), 0) << "device " << d.index();
      }
    }
    absl::StatusOr<JobInfo> done = RunToEnd(**daemon, stub.get(), Spins(2, 10));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state, JobState::kSucceeded);
    (*daemon)->Stop();
  }
}

TEST_F(DaemonTest, StopDrainsRunningJobsAndRejectsNewOnes) {
  auto daemon = Daemon::BuildAndStart(TestOptions());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = Channel((*daemon)->target());
  auto stub = weft::v1::Scheduler::NewStub(channel);
  weft::v1::Job job;
  ASSERT_TRUE(Submit(stub.get(), Spins(1, 1'500'000), &job).ok());
  WaitRunning((*daemon)->job_manager(), job.id());

  std::thread stopper([&] { (*daemon)->Stop(); });
  int health = 1;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (health == 1 && absl::Now() < deadline) {
    health = HealthCheck(channel, "weft.v1.Scheduler");
  }
  EXPECT_EQ(health, 2) << "health never went NOT_SERVING while draining";
  weft::v1::Job rejected;
  grpc::Status s = Submit(stub.get(), Spins(1, 1), &rejected);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("shutting down"));
  stopper.join();
  absl::StatusOr<JobInfo> after = (*daemon)->job_manager()->Get(job.id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kSucceeded);
}

TEST_F(DaemonTest, DrainTimeoutCancelsRunningJobs) {
  Daemon::Options options = TestOptions();
  options.drain_timeout = absl::Milliseconds(50);
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = weft::v1::Scheduler::NewStub(Channel((*daemon)->target()));
  weft::v1::Job job;
  // Work already issued to streams drains before the job ends CANCELLED.
  ASSERT_TRUE(Submit(stub.get(), Spins(20, 20'000), &job).ok());
  WaitRunning((*daemon)->job_manager(), job.id());
  const absl::Time start = absl::Now();
  (*daemon)->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  absl::StatusOr<JobInfo> after = (*daemon)->job_manager()->Get(job.id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kCancelled);
  EXPECT_THAT(after->error.message(), HasSubstr("shutting down"));
}

TEST_F(DaemonTest, IdleStopIsQuickAndClosesTheMetricsPort) {
  Daemon::Options options = TestOptions();
  options.metrics_listen = "127.0.0.1:0";
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  ASSERT_THAT(HttpGet(port, "/metrics"), HasSubstr("200 OK"));
  const absl::Time start = absl::Now();
  (*daemon)->Stop();
  // The metrics endpoint used to take its poll interval (~1 s) to stop.
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

TEST_F(DaemonTest, RejectsBadOptions) {
  Daemon::Options options = TestOptions();
  options.listen = "";
  options.unix_socket = "";
  auto daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("--listen")));

  options = TestOptions();
  options.backend.kind = "abacus";
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("--backend")));

  options = TestOptions();
  options.trace_max_nodes = -1;
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("--trace_max_nodes")));

  options = TestOptions();
  options.memory_pool_max_cached_bytes = -2;
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--memory_pool_max_cached_bytes must be -1 "
                                 "(no cap) or more, got -2")));

  options = TestOptions();
  options.launch_mode = "sometimes";
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--launch_mode must be auto, streams or "
                                 "graphs, got \"sometimes\"")));
}

TEST_F(DaemonTest, AddressInUseIsAnError) {
  auto first = Daemon::BuildAndStart(TestOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  Daemon::Options options = TestOptions();
  options.listen = absl::StrCat("127.0.0.1:", (*first)->tcp_port());
  options.unix_socket = "";
  options.metrics_listen = "";
  auto second = Daemon::BuildAndStart(options);
  EXPECT_THAT(second.status(), StatusIs(absl::StatusCode::kUnavailable,
                                        HasSubstr(options.listen)));
}

// The value of the weft_device_streams series of `device` in a scrape, or
// -1 when absent.
double StreamsGauge(const std::string& scrape, int device) {
  const std::string suffix = absl::StrCat(",device=\"", device, "\"} ");
  std::istringstream lines(scrape);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("weft_device_streams{", 0) != 0) continue;
    const size_t at = line.find(suffix);
    if (at == std::string::npos) continue;
    return std::stod(line.substr(at + suffix.size()));
  }
  return -1;
}

TEST_F(DaemonTest, ListDevicesAndTheStreamGaugeAgree) {
  Daemon::Options options = TestOptions();
  options.metrics_listen = "127.0.0.1:0";
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = weft::v1::Scheduler::NewStub(Channel((*daemon)->target()));
  auto check = [&](const std::string& when) {
    grpc::ClientContext ctx;
    weft::v1::ListDevicesResponse devices;
    ASSERT_TRUE(
        stub->ListDevices(&ctx, weft::v1::ListDevicesRequest(), &devices).ok());
    const std::string scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
    ASSERT_EQ(devices.devices_size(), 2) << when;
    for (const weft::v1::Device& d : devices.devices()) {
      EXPECT_EQ(StreamsGauge(scrape, d.index()), d.streams_total())
          << when << ", device " << d.index() << "\n"
          << scrape;
    }
  };
  check("idle, before any job");
  absl::StatusOr<JobInfo> done = RunToEnd(**daemon, stub.get(), Spins(4, 10));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state, JobState::kSucceeded);
  check("idle, after a job");
  (*daemon)->Stop();
}

TEST_F(DaemonTest, TraceJobsFlagTurnsTracingOff) {
  Daemon::Options options = TestOptions();
  options.trace_jobs = false;
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = weft::v1::Scheduler::NewStub(Channel((*daemon)->target()));
  absl::StatusOr<JobInfo> done = RunToEnd(**daemon, stub.get(), Spins(2, 10));
  ASSERT_TRUE(done.ok()) << done.status();
  grpc::ClientContext ctx;
  weft::v1::GetJobTraceRequest req;
  req.set_job_id(done->id);
  auto reader = stub->GetJobTrace(&ctx, req);
  weft::v1::GetJobTraceResponse chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--trace_jobs=false"));
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

// Three spins pinned to device 0: `load` reads `bytes` of host data, `s0`
// and `s1` touch buffers of their own.
weft::v1::Graph TransferAndTwoSpins(uint64_t bytes) {
  weft::v1::Graph g;
  g.set_name("transfer");
  weft::v1::Buffer* in = g.add_buffers();
  in->set_name("in");
  in->set_size_bytes(bytes);
  in->set_data("x");
  for (const char* name : {"a", "b"}) {
    weft::v1::Buffer* b = g.add_buffers();
    b->set_name(name);
    b->set_size_bytes(8);
  }
  const std::vector<std::pair<std::string, std::string>> nodes = {
      {"load", "in"}, {"s0", "a"}, {"s1", "b"}};
  for (const auto& [name, buffer] : nodes) {
    weft::v1::Node* node = g.add_nodes();
    node->set_name(name);
    node->set_op("spin");
    node->set_device(0);
    weft::v1::BufferArg* arg = node->add_args()->mutable_buffer();
    arg->set_name(buffer);
    arg->set_access(buffer == "in" ? weft::v1::READ : weft::v1::READ_WRITE);
    node->mutable_cost()->set_estimated_us(100);
    // The spins share the device: two halves fit side by side.
    if (buffer != "in") node->mutable_cost()->set_occupancy(0.5);
  }
  return g;
}

// The planned start of each node, by name.
std::map<std::string, double> PlannedStarts(Daemon* daemon,
                                            const weft::v1::Graph& graph) {
  auto stub = weft::v1::Scheduler::NewStub(grpc::CreateChannel(
      daemon->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  weft::v1::PlanGraphRequest req;
  *req.mutable_graph() = graph;
  weft::v1::PlanGraphResponse resp;
  grpc::Status s = stub->PlanGraph(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::map<std::string, double> starts;
  for (const weft::v1::PlannedNode& n : resp.plan().nodes()) {
    starts[n.name()] = n.estimated_start_us();
  }
  return starts;
}

TEST_F(DaemonTest, PlansWithTheSimulatorsBandwidthAndKernelSlots) {
  Daemon::Options options = TestOptions();
  options.backend.sim_bandwidth_gbps = 20;
  options.backend.sim_memory_bytes = 8 << 20;  // room for the 2 MB input
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::map<std::string, double> starts =
      PlannedStarts(daemon->get(), TransferAndTwoSpins(2000000));
  // 2 MB at 20 GB/s (20e3 bytes per microsecond).
  EXPECT_NEAR(starts["load"], 100, 1e-6);
  // The simulator runs the two half-occupancy spins at once on device 0.
  EXPECT_EQ(starts["s0"], 0);
  EXPECT_EQ(starts["s1"], 0);
}

TEST_F(DaemonTest, TopologyFileSetsThePlannersBandwidths) {
  Daemon::Options options = TestOptions();
  options.backend.topology_file = WriteTempFile(
      "topology_ok.csv", "From,To,GB/s\n-1,0,4\n-1,1,8\n0,1,50\n");
  options.backend.sim_memory_bytes = 8 << 20;  // room for the 2 MB input
  std::ostringstream log;
  options.log = &log;
  auto daemon = Daemon::BuildAndStart(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_THAT(log.str(),
              HasSubstr(absl::StrCat("weftd: copy bandwidths from ",
                                     options.backend.topology_file, "\n")));
  std::map<std::string, double> starts =
      PlannedStarts(daemon->get(), TransferAndTwoSpins(2000000));
  // 2 MB from the host to device 0 at 4 GB/s.
  EXPECT_NEAR(starts["load"], 500, 1e-6);
}

TEST_F(DaemonTest, BadTopologyFileIsAnErrorNamingFileAndLine) {
  Daemon::Options options = TestOptions();
  options.backend.topology_file =
      WriteTempFile("topology_bad.csv", "From,To,GB/s\n-1,0,4\n-1,one,8\n");
  auto daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(
                           "--topology: ", options.backend.topology_file,
                           ": topology line 3: "))));

  // Device 1 has no link to the host.
  options = TestOptions();
  options.backend.topology_file =
      WriteTempFile("topology_short.csv", "From,To,GB/s\n-1,0,4\n");
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(daemon.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(options.backend.topology_file)));

  options = TestOptions();
  options.backend.topology_file = "/nonexistent/topology.csv";
  daemon = Daemon::BuildAndStart(options);
  EXPECT_THAT(
      daemon.status(),
      StatusIs(
          absl::StatusCode::kNotFound,
          HasSubstr("--topology: cannot read '/nonexistent/topology.csv'")));
}

}  // namespace
}  // namespace weft::server
