#include "client/client.h"

#include <chrono>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"

namespace weft::client {
namespace {

constexpr char kTenantMetadataKey[] = "weft-tenant";

// grpc.health.v1 messages have one field each; they are encoded by hand so
// that the library needs no generated health stubs.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);  // field 1, length-delimited
  size_t n = service.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += service;
  return out;
}

std::string HealthStatusName(const std::string& response) {
  int status = 0;  // UNKNOWN when the field is absent
  if (response.size() >= 2 && response[0] == 0x08) status = response[1];
  switch (status) {
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
    default:
      return "UNKNOWN";
  }
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message());
  google::rpc::Status details;
  if (!status.error_details().empty() &&
      details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& detail : details.details()) {
      out.SetPayload(detail.type_url(), absl::Cord(detail.value()));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& address, Options options) {
  if (address.empty()) {
    return absl::InvalidArgumentError(
        "empty daemon address; use host:port or unix:/path");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create a channel to '", address, "'"));
  }
  return FromChannel(std::move(channel), std::move(options));
}

std::unique_ptr<Client> Client::FromChannel(
    std::shared_ptr<grpc::Channel> channel, Options options) {
  return std::unique_ptr<Client>(
      new Client(std::move(channel), std::move(options)));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(weft::v1::Scheduler::NewStub(channel_)) {}

void Client::Prepare(grpc::ClientContext* context) const {
  Prepare(context, absl::Now() + options_.timeout);
}

void Client::Prepare(grpc::ClientContext* context, absl::Time deadline) const {
  if (deadline != absl::InfiniteFuture()) {
    context->set_deadline(absl::ToChronoTime(deadline));
  }
  if (!options_.tenant.empty()) {
    context->AddMetadata(kTenantMetadataKey, options_.tenant);
  }
}

absl::StatusOr<weft::v1::Job> Client::Submit(
    const weft::v1::SubmitGraphRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::SubmitGraphResponse response;
  absl::Status s =
      FromGrpcStatus(stub_->SubmitGraph(&context, request, &response));
  if (!s.ok()) return s;
  return std::move(*response.mutable_job());
}

absl::StatusOr<weft::v1::Job> Client::Get(const std::string& job_id) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::GetJobRequest request;
  request.set_job_id(job_id);
  weft::v1::Job job;
  absl::Status s = FromGrpcStatus(stub_->GetJob(&context, request, &job));
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<weft::v1::Job> Client::Watch(
    const std::string& job_id,
    const std::function<bool(const weft::v1::WatchJobResponse&)>& on_message,
    absl::Time deadline) {
  grpc::ClientContext context;
  Prepare(&context, deadline);
  weft::v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<weft::v1::WatchJobResponse>> reader =
      stub_->WatchJob(&context, request);
  weft::v1::WatchJobResponse message;
  weft::v1::Job last;
  bool stopped = false;
  while (reader->Read(&message)) {
    last = message.job();
    if (on_message && !on_message(message)) {
      stopped = true;
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (stopped) return last;
  absl::Status s = FromGrpcStatus(status);
  if (!s.ok()) return s;
  return last;
}

absl::StatusOr<weft::v1::Job> Client::Cancel(const std::string& job_id) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  weft::v1::Job job;
  absl::Status s = FromGrpcStatus(stub_->CancelJob(&context, request, &job));
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<std::vector<weft::v1::Job>> Client::List(
    weft::v1::JobState state, int page_size) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::ListJobsRequest request;
  request.set_state(state);
  request.set_page_size(page_size);
  weft::v1::ListJobsResponse response;
  absl::Status s =
      FromGrpcStatus(stub_->ListJobs(&context, request, &response));
  if (!s.ok()) return s;
  return std::vector<weft::v1::Job>(response.jobs().begin(),
                                    response.jobs().end());
}

absl::StatusOr<weft::v1::Plan> Client::Plan(
    const weft::v1::Graph& graph, const weft::v1::ScheduleOptions& options) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::PlanGraphRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_options() = options;
  weft::v1::PlanGraphResponse response;
  absl::Status s =
      FromGrpcStatus(stub_->PlanGraph(&context, request, &response));
  if (!s.ok()) return s;
  return std::move(*response.mutable_plan());
}

absl::StatusOr<std::vector<weft::v1::Device>> Client::Devices() {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::ListDevicesResponse response;
  absl::Status s = FromGrpcStatus(
      stub_->ListDevices(&context, weft::v1::ListDevicesRequest(), &response));
  if (!s.ok()) return s;
  return std::vector<weft::v1::Device>(response.devices().begin(),
                                       response.devices().end());
}

absl::StatusOr<BufferData> Client::ReadBuffer(const std::string& job_id,
                                              const std::string& buffer,
                                              uint32_t chunk_bytes) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::ReadBufferRequest request;
  request.set_job_id(job_id);
  request.set_buffer(buffer);
  request.set_chunk_bytes(chunk_bytes);
  std::unique_ptr<grpc::ClientReader<weft::v1::ReadBufferResponse>> reader =
      stub_->ReadBuffer(&context, request);
  BufferData out;
  weft::v1::ReadBufferResponse chunk;
  uint64_t total = 0;
  bool first = true;
  absl::Status broken;
  while (reader->Read(&chunk)) {
    if (first) {
      total = chunk.total_bytes();
      out.dtype = chunk.dtype();
      out.data.reserve(total);
      first = false;
    }
    if (broken.ok() && chunk.offset() != out.data.size()) {
      broken = absl::DataLossError(
          absl::StrCat("buffer '", buffer, "': chunk at offset ",
                       chunk.offset(), " after ", out.data.size(), " bytes"));
      context.TryCancel();
    }
    out.data += chunk.data();
  }
  absl::Status s = FromGrpcStatus(reader->Finish());
  if (!broken.ok()) return broken;
  if (!s.ok()) return s;
  if (out.data.size() != total) {
    return absl::DataLossError(absl::StrCat("buffer '", buffer, "': got ",
                                            out.data.size(), " of ", total,
                                            " bytes"));
  }
  return out;
}

absl::StatusOr<std::string> Client::Trace(const std::string& job_id) {
  grpc::ClientContext context;
  Prepare(&context);
  weft::v1::GetJobTraceRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<weft::v1::GetJobTraceResponse>> reader =
      stub_->GetJobTrace(&context, request);
  std::string out;
  weft::v1::GetJobTraceResponse chunk;
  uint64_t total = 0;
  bool first = true;
  absl::Status broken;
  while (reader->Read(&chunk)) {
    if (first) {
      total = chunk.total_bytes();
      out.reserve(total);
      first = false;
    }
    if (broken.ok() && chunk.total_bytes() != total) {
      broken = absl::DataLossError(absl::StrCat(
          "trace of job ", job_id, ": total size changed from ", total, " to ",
          chunk.total_bytes(), " bytes mid-stream"));
      context.TryCancel();
    }
    out += chunk.chunk();
  }
  absl::Status s = FromGrpcStatus(reader->Finish());
  if (!broken.ok()) return broken;
  if (!s.ok()) return s;
  if (out.size() != total) {
    return absl::DataLossError(absl::StrCat("trace of job ", job_id, ": got ",
                                            out.size(), " of ", total,
                                            " bytes"));
  }
  return out;
}

absl::StatusOr<std::string> Client::Health(const std::string& service) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  Prepare(&context);
  grpc::Slice slice(EncodeHealthRequest(service));
  grpc::ByteBuffer request(&slice, 1);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request,
                            &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  absl::Status s = FromGrpcStatus(status);
  if (!s.ok()) return s;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::DataLossError("unreadable health response");
  }
  std::string bytes;
  for (const grpc::Slice& piece : slices) {
    bytes.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
  }
  return HealthStatusName(bytes);
}

}  // namespace weft::client
