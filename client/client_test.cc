#include "client/client.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/rpc/retry_info.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "weft/v1/weft.grpc.pb.h"

namespace weft::client {
namespace {

using ::weft::testing::StatusIs;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A stand-in daemon: answers from canned data so that the client's own
// behaviour (conversions, streaming, reassembly, metadata) is what is tested.
class FakeScheduler final : public weft::v1::Scheduler::Service {
 public:
  grpc::Status SubmitGraph(grpc::ServerContext* context,
                           const weft::v1::SubmitGraphRequest* request,
                           weft::v1::SubmitGraphResponse* response) override {
    if (request->graph().name() == "bad") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "graph.nodes[1].op: unknown op 'foo'");
    }
    if (request->graph().name() == "full") {
      google::rpc::RetryInfo info;
      info.mutable_retry_delay()->set_seconds(2);
      info.mutable_retry_delay()->set_nanos(500'000'000);
      google::rpc::Status details;
      details.set_code(8);
      details.set_message("admission queue is full");
      details.add_details()->PackFrom(info);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "admission queue is full",
                          details.SerializeAsString());
    }
    weft::v1::Job* job = response->mutable_job();
    job->set_id("j-0000000000000001");
    job->set_state(weft::v1::QUEUED);
    job->set_graph_name(request->graph().name());
    job->set_priority(request->priority());
    job->set_request_id(request->request_id());
    auto tenant = context->client_metadata().find("weft-tenant");
    if (tenant != context->client_metadata().end()) {
      job->set_tenant(
          std::string(tenant->second.data(), tenant->second.size()));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const weft::v1::GetJobRequest* req,
                      weft::v1::Job* job) override {
    if (req->job_id() != "j-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job '", req->job_id(), "' not found"));
    }
    job->set_id("j-1");
    job->set_state(weft::v1::RUNNING);
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(
      grpc::ServerContext*, const weft::v1::WatchJobRequest* req,
      grpc::ServerWriter<weft::v1::WatchJobResponse>* writer) override {
    weft::v1::WatchJobResponse m;
    m.mutable_job()->set_id(req->job_id());
    m.mutable_job()->set_state(weft::v1::RUNNING);
    writer->Write(m);
    weft::v1::NodeEvent* e = m.add_node_events();
    e->set_node("a");
    e->set_kind(weft::v1::NODE_FINISHED);
    writer->Write(m);
    m.clear_node_events();
    m.mutable_job()->set_state(weft::v1::SUCCEEDED);
    writer->Write(m);
    return grpc::Status::OK;
  }

  grpc::Status ReadBuffer(
      grpc::ServerContext*, const weft::v1::ReadBufferRequest* req,
      grpc::ServerWriter<weft::v1::ReadBufferResponse>* writer) override {
    const std::string data = "0123456789";
    const uint64_t chunk = req->chunk_bytes() == 0 ? 4 : req->chunk_bytes();
    for (uint64_t off = 0; off < data.size(); off += chunk) {
      // "gappy" skips the second chunk.
      if (req->buffer() == "gappy" && off == chunk) continue;
      weft::v1::ReadBufferResponse r;
      r.set_offset(off);
      r.set_data(data.substr(off, chunk));
      r.set_total_bytes(data.size());
      r.set_dtype(weft::v1::INT32);
      writer->Write(r);
    }
    return grpc::Status::OK;
  }

  // "j-1": a document in three chunks; "j-short": one chunk short of its
  // total; "j-running": not finished.
  grpc::Status GetJobTrace(
      grpc::ServerContext*, const weft::v1::GetJobTraceRequest* req,
      grpc::ServerWriter<weft::v1::GetJobTraceResponse>* writer) override {
    if (req->job_id() == "j-running") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "job j-running is RUNNING; its trace will be "
                          "available once it has finished");
    }
    const std::string json = R"({"traceEvents":[]})";
    const size_t chunk = 7;
    for (size_t off = 0; off < json.size(); off += chunk) {
      if (req->job_id() == "j-short" && off + chunk >= json.size()) break;
      weft::v1::GetJobTraceResponse r;
      r.set_chunk(json.substr(off, chunk));
      r.set_total_bytes(json.size());
      writer->Write(r);
    }
    return grpc::Status::OK;
  }

  grpc::Status ListDevices(grpc::ServerContext*,
                           const weft::v1::ListDevicesRequest*,
                           weft::v1::ListDevicesResponse* resp) override {
    resp->add_devices()->set_name("dev0");
    resp->add_devices()->set_name("dev1");
    return grpc::Status::OK;
  }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    socket_ = absl::StrCat("/tmp/weft-client-test-", getpid(), ".sock");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.AddListeningPort(absl::StrCat("unix:", socket_),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    server_->GetHealthCheckService()->SetServingStatus("weft.v1.Scheduler",
                                                       true);
    auto client = Client::Connect(absl::StrCat("127.0.0.1:", port_));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    server_->Shutdown();
    unlink(socket_.c_str());
  }

  FakeScheduler service_;
  std::string socket_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, SubmitCarriesRequestAndTenant) {
  Client::Options options;
  options.tenant = "team-a";
  auto client = Client::Connect(absl::StrCat("unix:", socket_), options);
  ASSERT_TRUE(client.ok());
  weft::v1::SubmitGraphRequest req;
  req.mutable_graph()->set_name("g");
  req.set_priority(4);
  req.set_request_id("r1");
  absl::StatusOr<weft::v1::Job> job = (*client)->Submit(req);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), "j-0000000000000001");
  EXPECT_EQ(job->priority(), 4);
  EXPECT_EQ(job->request_id(), "r1");
  EXPECT_EQ(job->tenant(), "team-a");
}

TEST_F(ClientTest, ServerErrorsKeepCodeAndMessage) {
  weft::v1::SubmitGraphRequest req;
  req.mutable_graph()->set_name("bad");
  absl::StatusOr<weft::v1::Job> job = client_->Submit(req);
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(job.status().message(), "graph.nodes[1].op: unknown op 'foo'");
  absl::StatusOr<weft::v1::Job> missing = client_->Get("j-2");
  EXPECT_THAT(missing.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(missing.status().message(), HasSubstr("j-2"));
  // Not implemented by the fake.
  EXPECT_THAT(client_->List().status(),
              StatusIs(absl::StatusCode::kUnimplemented));
}

TEST_F(ClientTest, WatchDeliversEveryMessageAndReturnsTheLastJob) {
  std::vector<weft::v1::JobState> states;
  int events = 0;
  absl::StatusOr<weft::v1::Job> last =
      client_->Watch("j-1", [&](const weft::v1::WatchJobResponse& m) {
        states.push_back(m.job().state());
        events += m.node_events_size();
        return true;
      });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->state(), weft::v1::SUCCEEDED);
  EXPECT_THAT(states, ElementsAre(weft::v1::RUNNING, weft::v1::RUNNING,
                                  weft::v1::SUCCEEDED));
  EXPECT_EQ(events, 1);

  int seen = 0;
  last = client_->Watch(
      "j-1", [&](const weft::v1::WatchJobResponse&) { return ++seen < 1; });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(last->state(), weft::v1::RUNNING);
}

TEST_F(ClientTest, ReadBufferReassemblesChunks) {
  absl::StatusOr<BufferData> data = client_->ReadBuffer("j-1", "y", 3);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->data, "0123456789");
  EXPECT_EQ(data->dtype, weft::v1::INT32);
  absl::StatusOr<BufferData> gappy = client_->ReadBuffer("j-1", "gappy");
  EXPECT_THAT(gappy.status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(gappy.status().message(), HasSubstr("offset 8"));
}

TEST_F(ClientTest, TraceReassemblesChunks) {
  absl::StatusOr<std::string> trace = client_->Trace("j-1");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(*trace, R"({"traceEvents":[]})");
  absl::StatusOr<std::string> shorter = client_->Trace("j-short");
  EXPECT_THAT(shorter.status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(shorter.status().message(), HasSubstr("got 14 of 18 bytes"));
  absl::StatusOr<std::string> running = client_->Trace("j-running");
  EXPECT_THAT(running.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(running.status().message(), HasSubstr("once it has finished"));
}

TEST_F(ClientTest, DevicesAndHealth) {
  auto devices = client_->Devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].name(), "dev1");
  EXPECT_EQ(*client_->Health(), "SERVING");
  EXPECT_EQ(*client_->Health("weft.v1.Scheduler"), "SERVING");
  server_->GetHealthCheckService()->SetServingStatus(false);
  EXPECT_EQ(*client_->Health("weft.v1.Scheduler"), "NOT_SERVING");
  absl::StatusOr<std::string> unknown = client_->Health("no.such.Service");
  EXPECT_THAT(unknown.status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(ClientConnectTest, EmptyAddressIsInvalid) {
  auto client = Client::Connect("");
  EXPECT_THAT(client.status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClientConnectTest, NoDaemonIsUnavailable) {
  Client::Options options;
  options.timeout = absl::Seconds(2);
  auto client = Client::Connect("unix:/nonexistent/weftd.sock", options);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::vector<weft::v1::Device>> devices = (*client)->Devices();
  EXPECT_THAT(devices.status(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ClientTest, RetryInfoDetailBecomesARetryDelay) {
  weft::v1::SubmitGraphRequest request;
  request.mutable_graph()->set_name("full");
  absl::StatusOr<weft::v1::Job> job = client_->Submit(request);
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(job.status().message(), "admission queue is full");
  EXPECT_EQ(RetryDelayOf(job.status()), absl::Milliseconds(2500));

  request.mutable_graph()->set_name("bad");
  job = client_->Submit(request);
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(RetryDelayOf(job.status()), std::nullopt);
}

}  // namespace
}  // namespace weft::client
