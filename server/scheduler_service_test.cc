#include "server/scheduler_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "runtime/executor.h"
#include "runtime/forwarding_backend.h"
#include "runtime/sim/sim_backend.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "testing/status_matchers.h"
#include "testing/wire_graphs.h"
#include "weft/v1/weft.grpc.pb.h"

namespace weft::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

constexpr double kGateUs = 12345;

weft::v1::Graph ParseGraph(const std::string& text) {
  weft::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &graph));
  return graph;
}

// y = 3 * 2 + 1 = 7 everywhere; total[0] = 16 * 7 = 112.
weft::v1::Graph AxpyGraph() {
  return ParseGraph(R"pb(
    name: "axpy"
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 }
    buffers { name: "y" size_bytes: 64 dtype: FLOAT32 fill: 1 output: true }
    buffers { name: "total" size_bytes: 4 dtype: FLOAT32 output: true }
    nodes {
      name: "fill_x"
      op: "fill"
      args { buffer { name: "x" access: WRITE } }
      args { f32: 2 }
    }
    nodes {
      name: "axpy"
      op: "axpy"
      args { f32: 3 }
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: READ_WRITE } }
    }
    nodes {
      name: "sum"
      op: "reduce_sum"
      args { buffer { name: "y" access: READ } }
      args { buffer { name: "total" access: WRITE } }
    }
  )pb");
}

weft::v1::Graph SpinGraph(int n, double us) {
  weft::v1::Graph g;
  g.set_name("spins");
  weft::v1::Buffer* b = g.add_buffers();
  b->set_name("b");
  b->set_size_bytes(8);
  b->set_output(true);
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

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class SchedulerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::SimBackend::Options sim;
    sim.num_devices = 2;
    sim.memory_bytes = 1 << 20;
    sim.launch_fault = [this](int, const runtime::KernelLaunch& launch) {
      if (launch.cost_us == kGateUs) {
        gated_.fetch_add(1);
        gate_.WaitForNotification();
      }
      return absl::OkStatus();
    };
    backend_ = *runtime::SimBackend::Create(sim);
    runtime::Executor::Options exec;
    exec.backend = backend_.get();
    executor_ = *runtime::Executor::Create(exec);
    JobManager::Options jobs;
    jobs.executor = executor_.get();
    // One at a time by default, so that a gated job holds the next one in
    // the queue.
    jobs.max_running_jobs = max_running_jobs_;
    jobs_ = *JobManager::Create(jobs);
    SchedulerService::Options service;
    service.jobs = jobs_.get();
    service.backend = backend_.get();
    service.executor = executor_.get();
    service.metrics = &metrics_;
    service.max_watchers = max_watchers_;
    service.cancel_wait = cancel_wait_;
    // Small, so that traces come in several chunks.
    service.default_chunk_bytes = 1024;
    service.max_chunk_bytes = 4096;
    service_ = std::make_unique<SchedulerService>(service);

    grpc::ServerBuilder builder;
    if (grpc_max_threads_ > 0) {
      grpc::ResourceQuota quota("test");
      quota.SetMaxThreads(grpc_max_threads_);
      builder.SetResourceQuota(quota);
    }
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(64 << 20);  // as weftd's default
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = weft::v1::Scheduler::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }

  void TearDown() override {
    if (!gate_.HasBeenNotified()) gate_.Notify();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    server_.reset();
    jobs_.reset();
    executor_.reset();
    backend_.reset();
  }

  weft::v1::Job Submit(const weft::v1::Graph& graph) {
    grpc::ClientContext ctx;
    weft::v1::SubmitGraphRequest req;
    *req.mutable_graph() = graph;
    weft::v1::SubmitGraphResponse resp;
    grpc::Status s = stub_->SubmitGraph(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job();
  }

  // Submits a job whose first kernel waits for gate_ and returns its id
  // once that kernel waits: a job that, cancelled, cannot drain until the
  // gate opens. Empty if the kernel does not start.
  std::string SubmitGated() {
    const int before = gated_.load();
    const std::string id = Submit(SpinGraph(2, kGateUs)).id();
    const absl::Time end = absl::Now() + absl::Seconds(20);
    while (gated_.load() <= before) {
      if (absl::Now() > end) return "";
      absl::SleepFor(absl::Milliseconds(5));
    }
    return id;
  }

  // Watches to the end; returns every message.
  std::vector<weft::v1::WatchJobResponse> WatchAll(const std::string& id,
                                                   grpc::Status* status) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    weft::v1::WatchJobRequest req;
    req.set_job_id(id);
    auto reader = stub_->WatchJob(&ctx, req);
    std::vector<weft::v1::WatchJobResponse> messages;
    weft::v1::WatchJobResponse msg;
    while (reader->Read(&msg)) messages.push_back(msg);
    *status = reader->Finish();
    return messages;
  }

  grpc::Status ReadAll(const std::string& id, const std::string& buffer,
                       uint32_t chunk,
                       std::vector<weft::v1::ReadBufferResponse>* chunks) {
    grpc::ClientContext ctx;
    weft::v1::ReadBufferRequest req;
    req.set_job_id(id);
    req.set_buffer(buffer);
    req.set_chunk_bytes(chunk);
    auto reader = stub_->ReadBuffer(&ctx, req);
    weft::v1::ReadBufferResponse msg;
    while (reader->Read(&msg)) chunks->push_back(msg);
    return reader->Finish();
  }

  grpc::Status TraceAll(const std::string& id,
                        std::vector<weft::v1::GetJobTraceResponse>* chunks) {
    grpc::ClientContext ctx;
    weft::v1::GetJobTraceRequest req;
    req.set_job_id(id);
    auto reader = stub_->GetJobTrace(&ctx, req);
    weft::v1::GetJobTraceResponse msg;
    while (reader->Read(&msg)) chunks->push_back(msg);
    return reader->Finish();
  }

  // The plan cache's lookups by result, as /metrics shows them, a line
  // each in the order of their text.
  std::string PlanCacheLookups() {
    const std::string text =
        prometheus::TextSerializer().Serialize(registry_.Collect());
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::StartsWith(line, "weft_plan_cache_lookups_total{")) {
        lines.emplace_back(line);
      }
    }
    std::sort(lines.begin(), lines.end());
    std::string lookups;
    for (const std::string& line : lines) absl::StrAppend(&lookups, line, "\n");
    return lookups;
  }

  int max_watchers_ = 4096;
  int max_running_jobs_ = 1;
  absl::Duration cancel_wait_ = absl::Seconds(10);
  int grpc_max_threads_ = 0;  // 0: no quota
  // Launches of kGateUs kernels waiting for gate_ (or past it).
  std::atomic<int> gated_{0};
  absl::Notification gate_;
  prometheus::Registry registry_;
  Metrics metrics_{&registry_};
  std::unique_ptr<runtime::SimBackend> backend_;
  std::unique_ptr<runtime::Executor> executor_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<weft::v1::Scheduler::Stub> stub_;
};

TEST_F(SchedulerServiceTest, SubmitWatchAndReadOutputs) {
  // A gated job holds the only slot, so the watch attaches while the job
  // under test is still queued and sees all of its events.
  weft::v1::Graph gate;
  gate.set_name("gate");
  gate.add_buffers()->set_name("g");
  gate.mutable_buffers(0)->set_size_bytes(4);
  weft::v1::Node* wait = gate.add_nodes();
  wait->set_name("wait");
  wait->set_op("spin");
  wait->add_args()->mutable_buffer()->set_name("g");
  wait->mutable_args(0)->mutable_buffer()->set_access(weft::v1::READ_WRITE);
  wait->mutable_cost()->set_estimated_us(kGateUs);
  Submit(gate);
  weft::v1::Job job = Submit(AxpyGraph());
  EXPECT_EQ(job.state(), weft::v1::QUEUED);
  ASSERT_FALSE(job.id().empty());

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  weft::v1::WatchJobRequest req;
  req.set_job_id(job.id());
  auto reader = stub_->WatchJob(&ctx, req);
  std::vector<weft::v1::WatchJobResponse> messages(1);
  ASSERT_TRUE(reader->Read(&messages[0]));
  EXPECT_EQ(messages[0].job().state(), weft::v1::QUEUED);
  gate_.Notify();
  weft::v1::WatchJobResponse msg;
  while (reader->Read(&msg)) messages.push_back(msg);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.front().job().id(), job.id());
  EXPECT_EQ(messages.front().node_events_size(), 0);
  EXPECT_EQ(messages.back().job().state(), weft::v1::SUCCEEDED);
  EXPECT_EQ(messages.back().job().nodes_done(), 3);
  int finished = 0;
  for (const auto& m : messages) {
    for (const auto& e : m.node_events()) {
      if (e.kind() == weft::v1::NODE_FINISHED) ++finished;
    }
  }
  EXPECT_EQ(finished, 3);

  std::vector<weft::v1::ReadBufferResponse> chunks;
  ASSERT_TRUE(ReadAll(job.id(), "y", 0, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].total_bytes(), 64u);
  EXPECT_EQ(chunks[0].dtype(), weft::v1::FLOAT32);
  for (float v : Floats(chunks[0].data())) EXPECT_EQ(v, 7.0f);

  chunks.clear();
  ASSERT_TRUE(ReadAll(job.id(), "total", 0, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_THAT(Floats(chunks[0].data()), ElementsAre(112.0f));
}

TEST_F(SchedulerServiceTest, AGraphSubmittedAgainIsNotPlannedAgain) {
  // y = 3 * 2 + 1 = 7 every time, whether the plan is new or kept.
  auto expect_outputs = [this](const std::string& id) {
    grpc::Status status;
    std::vector<weft::v1::WatchJobResponse> messages = WatchAll(id, &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back().job().state(), weft::v1::SUCCEEDED);
    std::vector<weft::v1::ReadBufferResponse> chunks;
    ASSERT_TRUE(ReadAll(id, "y", 0, &chunks).ok());
    ASSERT_EQ(chunks.size(), 1u);
    for (float v : Floats(chunks[0].data())) EXPECT_EQ(v, 7.0f);
  };
  const weft::v1::Graph graph = AxpyGraph();
  expect_outputs(Submit(graph).id());
  expect_outputs(Submit(graph).id());
  EXPECT_EQ(PlanCacheLookups(),
            "weft_plan_cache_lookups_total{result=\"hit\"} 1\n"
            "weft_plan_cache_lookups_total{result=\"miss\"} 1\n");

  // Other options or another graph: planned anew, and kept too.
  weft::v1::SubmitGraphRequest request;
  *request.mutable_graph() = graph;
  request.mutable_options()->set_max_streams_per_device(2);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    weft::v1::SubmitGraphResponse response;
    ASSERT_TRUE(stub_->SubmitGraph(&ctx, request, &response).ok());
    expect_outputs(response.job().id());
  }
  weft::v1::Graph renamed = graph;
  renamed.set_name("axpy2");
  expect_outputs(Submit(renamed).id());
  EXPECT_EQ(PlanCacheLookups(),
            "weft_plan_cache_lookups_total{result=\"hit\"} 2\n"
            "weft_plan_cache_lookups_total{result=\"miss\"} 3\n");

  // STREAM_AWARE weighs the streams other jobs keep busy at each
  // submission: never looked up.
  request.mutable_options()->set_device_policy(weft::v1::STREAM_AWARE);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    weft::v1::SubmitGraphResponse response;
    ASSERT_TRUE(stub_->SubmitGraph(&ctx, request, &response).ok());
    expect_outputs(response.job().id());
  }
  EXPECT_EQ(PlanCacheLookups(),
            "weft_plan_cache_lookups_total{result=\"hit\"} 2\n"
            "weft_plan_cache_lookups_total{result=\"miss\"} 3\n");
}

TEST_F(SchedulerServiceTest, ReadBufferStreamsChunks) {
  weft::v1::Job job = Submit(AxpyGraph());
  ASSERT_TRUE(
      jobs_->WaitUntilTerminal(job.id(), absl::Now() + absl::Seconds(20)).ok());
  std::vector<weft::v1::ReadBufferResponse> chunks;
  ASSERT_TRUE(ReadAll(job.id(), "y", 24, &chunks).ok());
  ASSERT_EQ(chunks.size(), 3u);
  std::string all;
  std::vector<uint64_t> offsets;
  for (const auto& c : chunks) {
    offsets.push_back(c.offset());
    EXPECT_EQ(c.total_bytes(), 64u);
    all += c.data();
  }
  EXPECT_THAT(offsets, ElementsAre(0, 24, 48));
  ASSERT_EQ(all.size(), 64u);
  for (float v : Floats(all)) EXPECT_EQ(v, 7.0f);
}

TEST_F(SchedulerServiceTest, ReadBufferErrors) {
  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  std::vector<weft::v1::ReadBufferResponse> chunks;
  grpc::Status early = ReadAll(gated.id(), "b", 0, &chunks);
  EXPECT_EQ(early.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(early.error_message(), HasSubstr(gated.id()));
  gate_.Notify();
  ASSERT_TRUE(
      jobs_->WaitUntilTerminal(gated.id(), absl::Now() + absl::Seconds(20))
          .ok());

  grpc::Status missing = ReadAll(gated.id(), "nope", 0, &chunks);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.error_message(), HasSubstr("'nope'"));
  grpc::Status unknown_job = ReadAll("j-feedfeedfeedfeed", "b", 0, &chunks);
  EXPECT_EQ(unknown_job.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown_job.error_message(), HasSubstr("j-feedfeedfeedfeed"));
  EXPECT_TRUE(chunks.empty());
}

TEST_F(SchedulerServiceTest, RejectsBadGraphsWithFieldPath) {
  weft::v1::Graph unknown_op = AxpyGraph();
  unknown_op.mutable_nodes(1)->set_op("foo");
  grpc::ClientContext ctx;
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = unknown_op;
  weft::v1::SubmitGraphResponse resp;
  grpc::Status s = stub_->SubmitGraph(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("graph.nodes[1]"));
  EXPECT_THAT(s.error_message(), HasSubstr("foo"));

  weft::v1::Graph pinned = AxpyGraph();
  pinned.mutable_nodes(0)->set_device(7);
  grpc::ClientContext ctx2;
  *req.mutable_graph() = pinned;
  s = stub_->SubmitGraph(&ctx2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("graph.nodes[0].device"));

  grpc::ClientContext ctx3;
  req.set_request_id(std::string(300, 'r'));
  *req.mutable_graph() = AxpyGraph();
  s = stub_->SubmitGraph(&ctx3, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("request_id"));
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty());
}

TEST_F(SchedulerServiceTest, LargeSubmissionsArePlannedOnTheSubmitWorkers) {
  const int large = SchedulerService::kInlineSubmitNodes + 1;
  // Small graphs are admitted on the thread that received them.
  Submit(SpinGraph(SchedulerService::kInlineSubmitNodes, 1));
  EXPECT_EQ(service_->calls_on_workers(), 0);

  std::vector<std::thread> clients;
  std::vector<std::string> ids(6);
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] { ids[c] = Submit(SpinGraph(large, 1)).id(); });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(service_->calls_on_workers(), 6);
  for (const std::string& id : ids) {
    ASSERT_FALSE(id.empty());
    grpc::Status status;
    std::vector<weft::v1::WatchJobResponse> messages = WatchAll(id, &status);
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back().job().state(), weft::v1::SUCCEEDED);
  }

  // Errors come back from the workers as they do inline.
  weft::v1::Graph bad = SpinGraph(large, 1);
  bad.mutable_nodes(large - 1)->set_op("foo");
  grpc::ClientContext ctx;
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = bad;
  weft::v1::SubmitGraphResponse resp;
  grpc::Status s = stub_->SubmitGraph(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr(absl::StrCat("graph.nodes[", large - 1, "]")));

  // A loop counts its body: one node on top, many inside.
  weft::v1::Graph loop;
  loop.set_name("loop");
  weft::v1::Buffer* flag = loop.add_buffers();
  flag->set_name("flag");
  flag->set_size_bytes(4);
  flag->set_dtype(weft::v1::INT32);
  weft::v1::Node* node = loop.add_nodes();
  node->set_name("w");
  node->mutable_while_loop()->set_condition("flag");
  node->mutable_while_loop()->set_max_iterations(1);
  for (int i = 0; i < large; ++i) {
    weft::v1::Node* body = node->mutable_while_loop()->add_body();
    body->set_name(absl::StrCat("b", i));
    body->set_op("fill");
    weft::v1::BufferArg* arg = body->add_args()->mutable_buffer();
    arg->set_name("flag");
    arg->set_access(weft::v1::WRITE);
    body->add_args()->set_f32(0);
  }
  const std::string loop_id = Submit(loop).id();
  EXPECT_FALSE(loop_id.empty());
  EXPECT_EQ(service_->calls_on_workers(), 8);
}

// A call of `method` with raw bytes, as a client built from another proto
// would send them.
grpc::Status CallWithBytes(grpc::Server& server, const std::string& method,
                           const std::string& bytes,
                           google::protobuf::Message* response) {
  grpc::GenericStub stub(server.InProcessChannel(grpc::ChannelArguments()));
  // The call keeps a pointer to the path until it ends.
  const std::string path = "/weft.v1.Scheduler/" + method;
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, path, request, &cq);
  call->StartCall();
  grpc::ByteBuffer answer;
  grpc::Status status;
  call->Finish(&answer, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (status.ok()) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(answer.Dump(&slices).ok());
    std::string out;
    for (const grpc::Slice& s : slices) {
      out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    EXPECT_TRUE(response->ParseFromString(out));
  }
  return status;
}

TEST_F(SchedulerServiceTest, BytesThatAreNotARequestAreInvalidArgument) {
  weft::v1::SubmitGraphResponse response;
  // A truncated varint, small (parsed where it arrives) and large (parsed
  // on the submit workers).
  for (const std::string& bytes :
       {std::string("\xff\xff\xff\xff\x0f"),
        std::string(SchedulerService::kInlineParseBytes + 10, '\xff')}) {
    grpc::Status s = CallWithBytes(*server_, "SubmitGraph", bytes, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("request: not a weft.v1.SubmitGraphRequest"));
  }
  // The other unary methods on the callback API answer the same way.
  for (const auto& [method, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"GetJob", "weft.v1.GetJobRequest"},
           {"ListJobs", "weft.v1.ListJobsRequest"},
           {"PlanGraph", "weft.v1.PlanGraphRequest"},
           {"ListDevices", "weft.v1.ListDevicesRequest"},
           {"CancelJob", "weft.v1.CancelJobRequest"}}) {
    weft::v1::Job ignored;
    grpc::Status s = CallWithBytes(
        *server_, method, std::string("\xff\xff\xff\xff\x0f"), &ignored);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(s.error_message(), HasSubstr(message)) << method;
  }
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty());
  // Well-formed bytes of a large request are admitted from the workers.
  weft::v1::SubmitGraphRequest request;
  *request.mutable_graph() = SpinGraph(3000, 1);
  const std::string bytes = request.SerializeAsString();
  ASSERT_GT(bytes.size(), SchedulerService::kInlineParseBytes);
  grpc::Status s = CallWithBytes(*server_, "SubmitGraph", bytes, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(response.job().id().empty());
}

TEST_F(SchedulerServiceTest, UnknownJobsAreNotFoundWithTheirId) {
  grpc::ClientContext c1;
  weft::v1::GetJobRequest get;
  get.set_job_id("j-0123456789abcdef");
  weft::v1::Job job;
  grpc::Status s = stub_->GetJob(&c1, get, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("j-0123456789abcdef"));

  grpc::ClientContext c2;
  weft::v1::CancelJobRequest cancel;
  cancel.set_job_id("j-missing");
  s = stub_->CancelJob(&c2, cancel, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("j-missing"));

  grpc::Status watch_status;
  WatchAll("j-missing", &watch_status);
  EXPECT_EQ(watch_status.error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext c3;
  get.set_job_id("");
  s = stub_->GetJob(&c3, get, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id"));
}

TEST_F(SchedulerServiceTest, CancelRunningJobAnswersCancelled) {
  weft::v1::Job job = Submit(SpinGraph(60, 5000));
  {
    // Wait until it runs: the first node event.
    grpc::ClientContext ctx;
    weft::v1::WatchJobRequest req;
    req.set_job_id(job.id());
    auto reader = stub_->WatchJob(&ctx, req);
    weft::v1::WatchJobResponse msg;
    while (reader->Read(&msg) && msg.node_events_size() == 0) {
    }
    ctx.TryCancel();
    reader->Finish();
  }
  grpc::ClientContext ctx;
  weft::v1::CancelJobRequest req;
  req.set_job_id(job.id());
  weft::v1::Job cancelled;
  grpc::Status s = stub_->CancelJob(&ctx, req, &cancelled);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(cancelled.state(), weft::v1::CANCELLED);
  EXPECT_EQ(cancelled.error().code(), grpc::StatusCode::CANCELLED);

  grpc::ClientContext again;
  s = stub_->CancelJob(&again, req, &cancelled);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(cancelled.state(), weft::v1::CANCELLED);
}

TEST_F(SchedulerServiceTest, WatchHonoursClientDeadline) {
  weft::v1::Job job = Submit(SpinGraph(1, kGateUs));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(200));
  weft::v1::WatchJobRequest req;
  req.set_job_id(job.id());
  auto reader = stub_->WatchJob(&ctx, req);
  weft::v1::WatchJobResponse msg;
  int n = 0;
  while (reader->Read(&msg)) ++n;
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(n, 1);
}

// The threads of this process, from /proc/self/status.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// Waits (bounded) until `done` holds; returns whether it does.
template <typename Predicate>
bool WaitFor(Predicate done, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time end = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST_F(SchedulerServiceTest, WatchIsWokenByTheJobEndingLongAfterItsLastEvent) {
  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  weft::v1::WatchJobRequest req;
  req.set_job_id(gated.id());
  auto reader = stub_->WatchJob(&ctx, req);
  weft::v1::WatchJobResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  // Nothing happens for a while: the watch waits without a message.
  absl::SleepFor(absl::Milliseconds(300));
  gate_.Notify();
  const absl::Time released = absl::Now();
  weft::v1::JobState last = msg.job().state();
  while (reader->Read(&msg)) last = msg.job().state();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last, weft::v1::SUCCEEDED);
  // Generous: the wake is immediate, a missed one would wait out the
  // call's deadline.
  EXPECT_LT(absl::Now() - released, absl::Seconds(20));
}

TEST_F(SchedulerServiceTest, CancelledWatchEndsAndGivesItsSlotBack) {
  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  grpc::ClientContext ctx;
  weft::v1::WatchJobRequest req;
  req.set_job_id(gated.id());
  auto reader = stub_->WatchJob(&ctx, req);
  weft::v1::WatchJobResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(service_->watchers(), 1);
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([this] { return service_->watchers() == 0; }));
  gate_.Notify();
}

class SchedulerServiceWatcherCapTest : public SchedulerServiceTest {
 protected:
  void SetUp() override {
    max_watchers_ = 2;
    SchedulerServiceTest::SetUp();
  }
};

TEST_F(SchedulerServiceWatcherCapTest, WatchBeyondTheCapIsResourceExhausted) {
  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  weft::v1::WatchJobRequest req;
  req.set_job_id(gated.id());
  weft::v1::WatchJobResponse msg;
  grpc::ClientContext first_ctx, second_ctx;
  auto first = stub_->WatchJob(&first_ctx, req);
  auto second = stub_->WatchJob(&second_ctx, req);
  ASSERT_TRUE(first->Read(&msg));
  ASSERT_TRUE(second->Read(&msg));

  grpc::ClientContext third_ctx;
  auto third = stub_->WatchJob(&third_ctx, req);
  EXPECT_FALSE(third->Read(&msg));
  grpc::Status refused = third->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_watchers"));
  EXPECT_THAT(refused.error_message(), HasSubstr(gated.id()));
  auto pushback =
      third_ctx.GetServerTrailingMetadata().find("grpc-retry-pushback-ms");
  ASSERT_NE(pushback, third_ctx.GetServerTrailingMetadata().end());
  EXPECT_EQ(std::string(pushback->second.data(), pushback->second.size()),
            "1000");
  EXPECT_FALSE(refused.error_details().empty()) << "no RetryInfo detail";

  // A slot given back is a slot for the next watch.
  first_ctx.TryCancel();
  while (first->Read(&msg)) {
  }
  first->Finish();
  ASSERT_TRUE(WaitFor([this] { return service_->watchers() == 1; }));
  grpc::ClientContext fourth_ctx;
  auto fourth = stub_->WatchJob(&fourth_ctx, req);
  EXPECT_TRUE(fourth->Read(&msg));
  gate_.Notify();
  while (second->Read(&msg)) {
  }
  EXPECT_TRUE(second->Finish().ok());
  while (fourth->Read(&msg)) {
  }
  EXPECT_TRUE(fourth->Finish().ok());
  EXPECT_EQ(msg.job().state(), weft::v1::SUCCEEDED);
}

// 1,000 watches of one job at once, on the asynchronous client API so that
// the client holds no thread per call either: the process keeps a small,
// fixed number of threads, every watch sees the job end when it ends, and
// the count returns to where it was.
TEST_F(SchedulerServiceTest, ThousandWatchesHoldNoThreadEach) {
  constexpr int kWatches = 1000;
  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  // Let gRPC and the executor start whatever threads they keep.
  weft::v1::Job warm = Submit(AxpyGraph());
  (void)warm;
  const int threads_before = ThreadCount();
  ASSERT_GT(threads_before, 0);

  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientAsyncReader<weft::v1::WatchJobResponse>> reader;
    weft::v1::WatchJobResponse msg;
    grpc::Status status;
    int messages = 0;
    weft::v1::JobState last = weft::v1::JOB_STATE_UNSPECIFIED;
    bool finished = false;
  };
  enum Op : intptr_t { kStarted = 0, kRead = 1, kFinished = 2 };
  auto tag = [](int i, Op op) {
    return reinterpret_cast<void*>(static_cast<intptr_t>(i) * 4 + op);
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Watch>> watches;
  weft::v1::WatchJobRequest req;
  req.set_job_id(gated.id());
  for (int i = 0; i < kWatches; ++i) {
    watches.push_back(std::make_unique<Watch>());
    Watch& w = *watches.back();
    w.ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(120));
    w.reader = stub_->AsyncWatchJob(&w.ctx, req, &cq, tag(i, kStarted));
  }
  int reading = 0, finished = 0;
  // Handles one completion; false when the queue gave none in time.
  auto step = [&]() {
    void* got = nullptr;
    bool ok = false;
    if (cq.AsyncNext(
            &got, &ok,
            std::chrono::system_clock::now() + std::chrono::seconds(30)) !=
        grpc::CompletionQueue::GOT_EVENT) {
      return false;
    }
    const intptr_t value = reinterpret_cast<intptr_t>(got);
    Watch& w = *watches[value / 4];
    switch (static_cast<Op>(value % 4)) {
      case kStarted:
        w.reader->Read(&w.msg, tag(value / 4, kRead));
        break;
      case kRead:
        if (ok) {
          if (w.messages++ == 0) ++reading;
          w.last = w.msg.job().state();
          w.reader->Read(&w.msg, tag(value / 4, kRead));
        } else {
          w.reader->Finish(&w.status, tag(value / 4, kFinished));
        }
        break;
      case kFinished:
        w.finished = true;
        ++finished;
        break;
    }
    return true;
  };
  while (reading < kWatches) ASSERT_TRUE(step()) << reading << " reading";
  EXPECT_EQ(service_->watchers(), kWatches);
  const int threads_watching = ThreadCount();
  EXPECT_LT(threads_watching, 100);
  EXPECT_LE(threads_watching, threads_before + 10);

  gate_.Notify();
  while (finished < kWatches) ASSERT_TRUE(step()) << finished << " finished";
  for (const auto& w : watches) {
    EXPECT_TRUE(w->status.ok()) << w->status.error_message();
    EXPECT_EQ(w->last, weft::v1::SUCCEEDED);
  }
  EXPECT_TRUE(WaitFor([this] { return service_->watchers() == 0; }));
  const int threads_after = ThreadCount();
  EXPECT_LE(threads_after, threads_before + 10);
  std::cout << "threads: " << threads_before << " before, " << threads_watching
            << " with " << kWatches << " watches, " << threads_after << " after"
            << std::endl;
  cq.Shutdown();
  void* got;
  bool ok;
  while (cq.Next(&got, &ok)) {
  }
}

// CancelJob takes raw bytes like the other unary methods: bytes that are
// not a CancelJobRequest, small or large (parsed on the submit workers),
// are INVALID_ARGUMENT saying so and cancel nothing.
TEST_F(SchedulerServiceTest,
       CancelJobBytesThatAreNotARequestAreInvalidArgument) {
  const std::string gated = Submit(SpinGraph(1, kGateUs)).id();
  const std::string queued = Submit(AxpyGraph()).id();
  for (const std::string& bytes :
       {std::string("\xff\xff\xff\xff\x0f"),
        std::string(SchedulerService::kInlineParseBytes + 10, '\xff')}) {
    weft::v1::Job ignored;
    grpc::Status s = CallWithBytes(*server_, "CancelJob", bytes, &ignored);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("request: not a weft.v1.CancelJobRequest in "
                          "protobuf's wire format"));
  }
  EXPECT_EQ(service_->calls_on_workers(), 1);
  for (const std::string& id : {gated, queued}) {
    absl::StatusOr<JobInfo> job = jobs_->Get(id);
    ASSERT_TRUE(job.ok());
    EXPECT_FALSE(IsTerminal(job->state)) << id;
  }
  // Well-formed bytes cancel: a queued job at once.
  weft::v1::CancelJobRequest request;
  request.set_job_id(queued);
  weft::v1::Job answer;
  grpc::Status s = CallWithBytes(*server_, "CancelJob",
                                 request.SerializeAsString(), &answer);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answer.id(), queued);
  EXPECT_EQ(answer.state(), weft::v1::CANCELLED);
  // A large request is answered from the workers.
  request.set_job_id(std::string(SchedulerService::kInlineParseBytes, 'j'));
  s = CallWithBytes(*server_, "CancelJob", request.SerializeAsString(),
                    &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id"));
  EXPECT_EQ(service_->calls_on_workers(), 2);
}

TEST_F(SchedulerServiceTest, CancelWaitsForTheRunningJobToEndAndAnswersItsEnd) {
  const std::string id = SubmitGated();
  ASSERT_FALSE(id.empty());
  const absl::Time start = absl::Now();
  std::thread opener([this] {
    absl::SleepFor(absl::Milliseconds(300));
    gate_.Notify();
  });
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  weft::v1::CancelJobRequest req;
  req.set_job_id(id);
  weft::v1::Job answer;
  grpc::Status s = stub_->CancelJob(&ctx, req, &answer);
  const absl::Duration waited = absl::Now() - start;
  opener.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answer.state(), weft::v1::CANCELLED);
  EXPECT_EQ(answer.error().code(), grpc::StatusCode::CANCELLED);
  EXPECT_GE(waited, absl::Milliseconds(250));
  // The job's end, not cancel_wait (10 s), ends the wait.
  EXPECT_LT(waited, absl::Seconds(8));
}

TEST_F(SchedulerServiceTest, CancelAnswersWhenItsCallerGoesAway) {
  const std::string id = SubmitGated();
  ASSERT_FALSE(id.empty());
  const absl::Time start = absl::Now();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(300));
  weft::v1::CancelJobRequest req;
  req.set_job_id(id);
  weft::v1::Job answer;
  grpc::Status s = stub_->CancelJob(&ctx, req, &answer);
  const absl::Duration waited = absl::Now() - start;
  // The service stops waiting for the job at the call's deadline and
  // answers with the job as it is, racing the deadline on the client: either
  // the caller has gone, or it hears that the cancellation is under way.
  if (s.ok()) {
    EXPECT_EQ(answer.id(), id);
    EXPECT_EQ(answer.state(), weft::v1::RUNNING);
  } else {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_LT(waited, absl::Seconds(8));
  // The cancellation was requested all the same.
  gate_.Notify();
  absl::StatusOr<JobInfo> after =
      jobs_->WaitUntilTerminal(id, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kCancelled);
}

class SchedulerServiceShortCancelWaitTest : public SchedulerServiceTest {
 protected:
  void SetUp() override {
    cancel_wait_ = absl::Milliseconds(300);
    SchedulerServiceTest::SetUp();
  }
};

TEST_F(SchedulerServiceShortCancelWaitTest,
       CancelOfAJobThatDoesNotDrainInTimeAnswersRunning) {
  const std::string id = SubmitGated();
  ASSERT_FALSE(id.empty());
  const absl::Time start = absl::Now();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  weft::v1::CancelJobRequest req;
  req.set_job_id(id);
  weft::v1::Job answer;
  grpc::Status s = stub_->CancelJob(&ctx, req, &answer);
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answer.id(), id);
  EXPECT_EQ(answer.state(), weft::v1::RUNNING);
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Seconds(8));
  // The cancellation is under way: the job ends CANCELLED once it drains.
  gate_.Notify();
  absl::StatusOr<JobInfo> after =
      jobs_->WaitUntilTerminal(id, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kCancelled);
}

// Three jobs running at once (one tenant runs at most max_running_jobs - 1)
// and a gRPC quota of 4 threads.
class SchedulerServiceManyCancelsTest : public SchedulerServiceTest {
 protected:
  void SetUp() override {
    max_running_jobs_ = 4;
    grpc_max_threads_ = 4;
    SchedulerServiceTest::SetUp();
  }
};

// Many more cancellations waiting at once than gRPC's quota has threads,
// on the asynchronous client API: none is refused, none holds a thread,
// other calls are answered meanwhile, and all answer when their jobs end.
TEST_F(SchedulerServiceManyCancelsTest, ManyWaitingCancelsHoldNoThreadEach) {
  constexpr int kJobs = 3;
  constexpr int kCancels = 256;
  std::vector<std::string> ids;
  for (int j = 0; j < kJobs; ++j) {
    ids.push_back(Submit(SpinGraph(2, kGateUs)).id());
  }
  ASSERT_TRUE(WaitFor([this] { return gated_.load() >= kJobs; }));
  const int threads_before = ThreadCount();
  ASSERT_GT(threads_before, 0);

  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientAsyncResponseReader<weft::v1::Job>> reader;
    weft::v1::Job answer;
    grpc::Status status;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCancels; ++i) {
    calls.push_back(std::make_unique<Call>());
    Call& c = *calls.back();
    c.ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
    weft::v1::CancelJobRequest req;
    req.set_job_id(ids[i % kJobs]);
    c.reader = stub_->AsyncCancelJob(&c.ctx, req, &cq);
    c.reader->Finish(&c.answer, &c.status,
                     reinterpret_cast<void*>(static_cast<intptr_t>(i)));
  }
  // Nothing answers while the jobs cannot drain...
  void* got = nullptr;
  bool ok = false;
  EXPECT_EQ(cq.AsyncNext(&got, &ok,
                         std::chrono::system_clock::now() +
                             std::chrono::milliseconds(300)),
            grpc::CompletionQueue::TIMEOUT);
  // ...the other calls are answered meanwhile...
  grpc::ClientContext get_ctx;
  weft::v1::GetJobRequest get;
  get.set_job_id(ids[0]);
  weft::v1::Job running;
  ASSERT_TRUE(stub_->GetJob(&get_ctx, get, &running).ok());
  EXPECT_EQ(running.state(), weft::v1::RUNNING);
  // ...and the waits hold no thread.
  const int threads_waiting = ThreadCount();
  EXPECT_LE(threads_waiting, threads_before + 10);

  gate_.Notify();
  for (int done = 0; done < kCancels; ++done) {
    ASSERT_EQ(cq.AsyncNext(
                  &got, &ok,
                  std::chrono::system_clock::now() + std::chrono::seconds(30)),
              grpc::CompletionQueue::GOT_EVENT)
        << done << " answered";
    EXPECT_TRUE(ok);
  }
  for (const std::unique_ptr<Call>& c : calls) {
    EXPECT_TRUE(c->status.ok()) << c->status.error_message();
    EXPECT_EQ(c->answer.state(), weft::v1::CANCELLED);
  }
  std::cout << "threads: " << threads_before << " before, " << threads_waiting
            << " with " << kCancels << " cancels waiting" << std::endl;
  cq.Shutdown();
  while (cq.Next(&got, &ok)) {
  }
}

// Budgets reach the planner with the devices' memory (1 MiB each here):
// above it they are clamped, and a node whose arguments exceed one is
// refused by both RPCs with the planner's code.
TEST_F(SchedulerServiceTest, MemoryBudget) {
  grpc::ClientContext c1;
  weft::v1::PlanGraphRequest plan_req;
  *plan_req.mutable_graph() = AxpyGraph();
  plan_req.mutable_options()->set_memory_budget_bytes(int64_t{1} << 30);
  weft::v1::PlanGraphResponse plan;
  grpc::Status s = stub_->PlanGraph(&c1, plan_req, &plan);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(plan.plan().memory_size(), 1);
  for (const weft::v1::DeviceMemory& m : plan.plan().memory()) {
    EXPECT_EQ(m.budget_bytes(), 1 << 20);
    EXPECT_TRUE(m.budget_clamped());
  }

  // axpy reads x and y: 2 * 256 bytes once aligned.
  plan_req.mutable_options()->set_memory_budget_bytes(300);
  grpc::ClientContext c2;
  s = stub_->PlanGraph(&c2, plan_req, &plan);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("node 'axpy'"));
  EXPECT_THAT(s.error_message(), HasSubstr("512 bytes"));

  grpc::ClientContext c3;
  weft::v1::SubmitGraphRequest submit_req;
  *submit_req.mutable_graph() = AxpyGraph();
  submit_req.mutable_options()->set_memory_budget_bytes(300);
  weft::v1::SubmitGraphResponse submitted;
  s = stub_->SubmitGraph(&c3, submit_req, &submitted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("node 'axpy'"));
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty());
}

// PlanGraph fits plans to their budgets (spills and fills) for graphs of
// up to JobManager::kMaxMemoryPlanNodes nodes; a larger plan
// over its budget is refused, naming the device, the bytes and the limit,
// instead of being fitted at a cost that grows with every round.
TEST_F(SchedulerServiceTest, PlansAreFittedToTheirBudgetsUpToALimit) {
  // A chain whose every 64th buffer is an output, live to the end: 4 KiB
  // each, above a budget of 64 KiB once there are more than 16.
  auto chain = [](int n) {
    weft::v1::Graph g = weft::testing::AddChain(n);
    for (int i = 64; i < n; i += 64) {
      g.mutable_buffers(i + 1)->set_output(true);  // b<i>
    }
    return g;
  };
  weft::v1::PlanGraphRequest small;
  *small.mutable_graph() = chain(2000);
  small.mutable_options()->set_memory_budget_bytes(64 << 10);
  weft::v1::PlanGraphResponse plan;
  grpc::ClientContext c1;
  grpc::Status s = stub_->PlanGraph(&c1, small, &plan);
  ASSERT_TRUE(s.ok()) << s.error_message();
  int spills = 0;
  for (const weft::v1::PlannedNode& node : plan.plan().nodes()) {
    spills += absl::StartsWith(node.name(), "spill:");
  }
  EXPECT_GT(spills, 0);
  for (const weft::v1::DeviceMemory& m : plan.plan().memory()) {
    EXPECT_LE(m.arena_bytes(), 64 << 10);
  }

  constexpr int kNodes = JobManager::kMaxMemoryPlanNodes + 1;
  weft::v1::PlanGraphRequest large = small;
  *large.mutable_graph() = chain(kNodes);
  grpc::ClientContext c2;
  s = stub_->PlanGraph(&c2, large, &plan);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_THAT(
      s.error_message(),
      AllOf(HasSubstr("above the memory budget of 65536 bytes"),
            HasSubstr(absl::StrCat("graphs of up to ", kNodes - 1,
                                   " nodes, and this one has ", kNodes))));
}

TEST_F(SchedulerServiceTest, PlanDevicesAndList) {
  grpc::ClientContext c1;
  weft::v1::PlanGraphRequest plan_req;
  *plan_req.mutable_graph() = AxpyGraph();
  weft::v1::PlanGraphResponse plan;
  grpc::Status s = stub_->PlanGraph(&c1, plan_req, &plan);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(plan.plan().nodes_size(), 3);
  EXPECT_EQ(plan.plan().num_devices(), 2);
  EXPECT_GE(plan.plan().streams_size(), 1);
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty()) << "plan ran a job";

  grpc::ClientContext c2;
  weft::v1::ListDevicesResponse devices;
  s = stub_->ListDevices(&c2, weft::v1::ListDevicesRequest(), &devices);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(devices.devices_size(), 2);
  EXPECT_EQ(devices.devices(1).index(), 1);
  EXPECT_EQ(devices.devices(1).memory_total_bytes(), 1u << 20);
  EXPECT_TRUE(devices.devices(0).simulated());
  EXPECT_FALSE(devices.devices(0).uuid().empty());

  weft::v1::Job a = Submit(AxpyGraph());
  ASSERT_TRUE(
      jobs_->WaitUntilTerminal(a.id(), absl::Now() + absl::Seconds(20)).ok());
  weft::v1::Job b = Submit(SpinGraph(1, kGateUs));
  grpc::ClientContext c3;
  weft::v1::ListJobsRequest list_req;
  weft::v1::ListJobsResponse list;
  s = stub_->ListJobs(&c3, list_req, &list);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(list.jobs_size(), 2);
  EXPECT_EQ(list.jobs(0).id(), a.id());
  grpc::ClientContext c4;
  list_req.set_state(weft::v1::SUCCEEDED);
  s = stub_->ListJobs(&c4, list_req, &list);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).id(), a.id());
  gate_.Notify();
}

TEST_F(SchedulerServiceTest, NodeLargerThanADeviceIsRefusedAtSubmission) {
  weft::v1::Graph big = SpinGraph(1, 10);
  big.set_name("big");
  big.mutable_buffers(0)->set_size_bytes(2 << 20);  // twice a device
  grpc::ClientContext submit_ctx;
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = big;
  weft::v1::SubmitGraphResponse resp;
  const grpc::Status refused = stub_->SubmitGraph(&submit_ctx, req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              AllOf(HasSubstr("node 's0': its arguments need 2097152 bytes"),
                    HasSubstr("(the device's memory)")));

  // The service carries on; memory in use is what jobs hold, not what the
  // pools keep cached for the next job.
  weft::v1::Job next = Submit(AxpyGraph());
  absl::StatusOr<JobInfo> end =
      jobs_->WaitUntilTerminal(next.id(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->state, JobState::kSucceeded);
  grpc::ClientContext ctx;
  weft::v1::ListDevicesResponse devices;
  ASSERT_TRUE(
      stub_->ListDevices(&ctx, weft::v1::ListDevicesRequest(), &devices).ok());
  ASSERT_EQ(devices.devices_size(), 2);
  uint64_t cached = 0;
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(devices.devices(d).memory_used_bytes(), 0u) << "device " << d;
    cached += backend_->memory_used_bytes(d);
  }
  EXPECT_GT(cached, 0u);
}

TEST_F(SchedulerServiceTest, PlannerErrorsAreInvalidArgumentAtSubmission) {
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = AxpyGraph();
  req.mutable_graph()->mutable_nodes(1)->set_stream_label("io");
  req.mutable_options()->set_stream_mode(weft::v1::SINGLE);
  grpc::ClientContext ctx;
  weft::v1::SubmitGraphResponse resp;
  grpc::Status s = stub_->SubmitGraph(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("graph.nodes[1].stream_label"));
  EXPECT_EQ(jobs_->retained(), 0);
}

TEST_F(SchedulerServiceTest, TenantComesFromMetadataAndIsChecked) {
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = AxpyGraph();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("weft-tenant", "team-7.ml_ops");
    weft::v1::SubmitGraphResponse resp;
    ASSERT_TRUE(stub_->SubmitGraph(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.job().tenant(), "team-7.ml_ops");
  }
  for (const std::string& bad :
       {std::string("has space"), std::string("semi;colon"),
        std::string(65, 'x')}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("weft-tenant", bad);
    weft::v1::SubmitGraphResponse resp;
    grpc::Status s = stub_->SubmitGraph(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(s.error_message(), HasSubstr("weft-tenant metadata")) << bad;
  }
  EXPECT_EQ(jobs_->retained(), 1);
}

TEST_F(SchedulerServiceTest, RepeatedRequestIdReturnsSameJob) {
  weft::v1::SubmitGraphRequest req;
  *req.mutable_graph() = AxpyGraph();
  req.set_request_id("once");
  weft::v1::SubmitGraphResponse first, second;
  grpc::ClientContext c1, c2;
  ASSERT_TRUE(stub_->SubmitGraph(&c1, req, &first).ok());
  ASSERT_TRUE(stub_->SubmitGraph(&c2, req, &second).ok());
  EXPECT_EQ(first.job().id(), second.job().id());
}

TEST_F(SchedulerServiceTest, GetJobTraceStreamsTheTraceInChunks) {
  weft::v1::Job job = Submit(SpinGraph(40, 1));
  ASSERT_EQ(jobs_->WaitUntilTerminal(job.id(), absl::Now() + absl::Seconds(20))
                ->state,
            JobState::kSucceeded);
  std::vector<weft::v1::GetJobTraceResponse> chunks;
  grpc::Status s = TraceAll(job.id(), &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(chunks.size(), 2u);
  std::string all;
  for (const auto& c : chunks) {
    EXPECT_LE(c.chunk().size(), 4096u);
    all += c.chunk();
  }
  for (const auto& c : chunks) EXPECT_EQ(c.total_bytes(), all.size());
  absl::StatusOr<std::string> direct = jobs_->TraceJson(job.id());
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(all, *direct);
  EXPECT_THAT(all, HasSubstr(R"({"ph":"X","name":"s39","cat":"kernel")"));
}

TEST_F(SchedulerServiceTest, GetJobTraceErrors) {
  std::vector<weft::v1::GetJobTraceResponse> chunks;
  grpc::Status unknown = TraceAll("j-feedfeedfeedfeed", &chunks);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("j-feedfeedfeedfeed"));
  grpc::Status empty = TraceAll("", &chunks);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.error_message(), HasSubstr("job_id"));

  weft::v1::Job gated = Submit(SpinGraph(1, kGateUs));
  grpc::Status early = TraceAll(gated.id(), &chunks);
  EXPECT_EQ(early.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(early.error_message(), HasSubstr(gated.id()));
  EXPECT_THAT(early.error_message(), HasSubstr("once it has finished"));
  EXPECT_TRUE(chunks.empty());
  gate_.Notify();
  ASSERT_TRUE(
      jobs_->WaitUntilTerminal(gated.id(), absl::Now() + absl::Seconds(20))
          .ok());
  ASSERT_TRUE(TraceAll(gated.id(), &chunks).ok());
  EXPECT_FALSE(chunks.empty());
}

// A backend whose modules fail to compile when their code says so, as a
// GPU backend's would; everything else is the simulator's.
class CompilingBackend : public runtime::ForwardingBackend {
 public:
  explicit CompilingBackend(runtime::Backend* backend)
      : ForwardingBackend(backend) {}
  absl::Status PrepareModules(const scheduler::Graph& graph) const override {
    ++prepared;
    for (size_t i = 0; i < graph.modules().size(); ++i) {
      if (graph.modules()[i].code.find("syntax error") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "graph.modules[", i, "]: module '", graph.modules()[i].name,
            "' does not compile: line 1: syntax error"));
      }
    }
    return absl::OkStatus();
  }
  mutable int prepared = 0;
};

TEST(SchedulerServiceModulesTest, CompileErrorsRejectTheSubmission) {
  runtime::SimBackend::Options sim;
  sim.num_devices = 1;
  auto sim_backend = *runtime::SimBackend::Create(sim);
  CompilingBackend backend(sim_backend.get());
  runtime::Executor::Options exec;
  exec.backend = &backend;
  auto executor = *runtime::Executor::Create(exec);
  JobManager::Options jobs_options;
  jobs_options.executor = executor.get();
  auto jobs = *JobManager::Create(jobs_options);
  SchedulerService::Options options;
  options.jobs = jobs.get();
  options.backend = &backend;
  options.executor = executor.get();
  SchedulerService service(options);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = weft::v1::Scheduler::NewStub(
      server->InProcessChannel(grpc::ChannelArguments()));

  weft::v1::SubmitGraphRequest req;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1 output: true }
        modules { name: "m" cuda_source: "syntax error" }
        nodes {
          name: "k"
          kernel {
            module: "m"
            kernel: "k"
            grid { x: 1 }
            block { x: 4 }
          }
          args { buffer { name: "x" access: READ_WRITE } }
          cost { estimated_us: 5 }
        }
      )pb",
      req.mutable_graph()));
  weft::v1::SubmitGraphResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->SubmitGraph(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("graph.modules[0]: module 'm' does not compile"));
  }
  EXPECT_EQ(backend.prepared, 1);
  EXPECT_TRUE(jobs->List(std::nullopt, 0).empty());

  // Fixed code: the job runs (on the simulator, the kernel only takes time).
  req.mutable_graph()->mutable_modules(0)->set_cuda_source(
      "extern \"C\" __global__ void k(float* x) {}");
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->SubmitGraph(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(backend.prepared, 2);
  EXPECT_EQ(jobs->List(std::nullopt, 0).size(), 1u);
  // Graphs without modules do not ask the backend.
  req.mutable_graph()->clear_modules();
  req.mutable_graph()->mutable_nodes(0)->clear_kernel();
  req.mutable_graph()->mutable_nodes(0)->set_op("spin");
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->SubmitGraph(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(backend.prepared, 2);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace weft::server
