// Load benchmark of weftd's submission path, on loopback only.
//
//   bazel run -c opt //tests/service:load_bench -- --seconds=10
//
// Echo phase (baseline): an in-process gRPC echo server receives the bytes
// of a serialized SubmitGraphRequest from --clients concurrent clients for
// --seconds and answers at once.
// Weft phase: weftd (a subprocess, simulated GPUs) receives the same
// request from the same number of clients for the same time. Every client
// submits in a closed loop; a RESOURCE_EXHAUSTED answer is counted (and,
// with --honour_retry, waited out as its RetryInfo asks). Every client
// submits the same graph, whose plan weftd keeps after the first
// submission (server/plan_cache.h); with --distinct_graphs each graph has a
// name of its own, and weftd builds and plans every one.
// The two phases alternate --rounds times (each weft phase starts once the
// jobs of the one before have ended), so that each round's weft phase is
// compared with the echo phase just before it: a shared machine's speed
// drifts between phases, and a ratio from one pair of phases moves with it.
//
// Then it waits for every accepted job to end and checks that nothing was
// lost: every accepted job is known to weftd and terminal, and every
// rejection was RESOURCE_EXHAUSTED carrying a RetryInfo. It prints
// throughput, submit-to-done latency percentiles (and where they went) over
// all rounds, and Weft's submission throughput and p99 submit-to-done
// latency as ratios of the echo server's throughput and p99 call latency,
// for each round and their median. Exit status 0 only when the checks hold.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "tests/service/echo.grpc.pb.h"
#include "weft/v1/weft.pb.h"

ABSL_FLAG(int32_t, seconds, 10, "Length of each phase in seconds.");
ABSL_FLAG(int32_t, rounds, 3,
          "Rounds of an echo phase followed by a weft phase.");
ABSL_FLAG(int32_t, clients, 16, "Concurrent clients.");
ABSL_FLAG(int32_t, nodes, 2, "Nodes per submitted graph.");
ABSL_FLAG(int32_t, sim_devices, 2, "Simulated GPUs of weftd.");
ABSL_FLAG(int32_t, max_queued_jobs, 1024, "weftd --max_queued_jobs.");
ABSL_FLAG(int32_t, max_running_jobs, 0,
          "weftd --max_running_jobs; 0: weftd's default.");
ABSL_FLAG(bool, trace_jobs, true, "weftd --trace_jobs (per-job traces).");
ABSL_FLAG(bool, distinct_graphs, false,
          "Give every submitted graph a name of its own, so that weftd "
          "builds and plans each one (no plan is kept from an earlier "
          "submission).");
ABSL_FLAG(bool, honour_retry, false,
          "Wait out the RetryInfo delay after RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, weftd, "",
          "Path of the weftd binary; default: from the runfiles.");
ABSL_FLAG(int32_t, drain_seconds, 120,
          "Longest wait for the accepted jobs to end.");

namespace weft::bench {
namespace {

// ------------------------------------------------------------ helpers --

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

// CPU time (user and system) of process `pid` so far; 0 when unknown.
double ProcessCpuSeconds(pid_t pid) {
  FILE* f = fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return 0;
  char buf[1024];
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  // Fields after the command name, which ends at the last ')'.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  unsigned long utime = 0, stime = 0;
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
             &utime, &stime) != 2) {
    return 0;
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

// A channel of its own (no subchannel sharing), as a separate client
// process would have.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

weft::v1::SubmitGraphRequest SmallGraph(int nodes) {
  weft::v1::SubmitGraphRequest request;
  weft::v1::Graph* g = request.mutable_graph();
  g->set_name("bench");
  weft::v1::Buffer* x = g->add_buffers();
  x->set_name("x");
  x->set_size_bytes(256);
  x->set_dtype(weft::v1::FLOAT32);
  x->set_output(true);
  for (int i = 0; i < nodes; ++i) {
    weft::v1::Node* n = g->add_nodes();
    n->set_name(absl::StrCat("n", i));
    if (i == 0) {
      n->set_op("fill");
      weft::v1::BufferArg* b = n->add_args()->mutable_buffer();
      b->set_name("x");
      b->set_access(weft::v1::WRITE);
      n->add_args()->set_f32(1.0f);
    } else {
      n->set_op("scale");
      n->add_args()->set_f32(2.0f);
      weft::v1::BufferArg* b = n->add_args()->mutable_buffer();
      b->set_name("x");
      b->set_access(weft::v1::READ_WRITE);
    }
  }
  return request;
}

// --------------------------------------------------------------- echo --

class EchoService final : public weft::bench::Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const EchoRequest* request,
                    EchoReply* reply) override {
    reply->set_size(request->payload().size());
    return grpc::Status::OK;
  }
};

struct PhaseResult {
  int64_t calls = 0;
  std::vector<double> latency_us;
  absl::Time start;
  absl::Duration elapsed;
};

// The echo server, in this process, serving until destroyed.
class EchoServer {
 public:
  EchoServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~EchoServer() { server_->Shutdown(); }

  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  EchoService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

PhaseResult RunEcho(const std::string& target, const std::string& payload,
                    int clients, absl::Duration length) {
  EchoRequest request;
  request.set_payload(payload);
  absl::Mutex mu;
  PhaseResult result;
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  const absl::Time end = start + length;
  result.start = start;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = weft::bench::Echo::NewStub(OwnChannel(target));
      std::vector<double> latency;
      while (absl::Now() < end) {
        grpc::ClientContext context;
        EchoReply reply;
        const absl::Time t0 = absl::Now();
        if (stub->Echo(&context, request, &reply).ok()) {
          latency.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        }
      }
      absl::MutexLock lock(&mu);
      result.calls += static_cast<int64_t>(latency.size());
      result.latency_us.insert(result.latency_us.end(), latency.begin(),
                               latency.end());
    });
  }
  for (std::thread& t : threads) t.join();
  result.elapsed = absl::Now() - start;
  return result;
}

// -------------------------------------------------------------- weftd --

// weftd as a child process; reads its stderr for the address.
class WeftdProcess {
 public:
  ~WeftdProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  absl::Status Start(const std::string& binary,
                     const std::vector<std::string>& flags) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<std::string> argv_strings = {binary};
    argv_strings.insert(argv_strings.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr,
                               argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (rc != 0) {
      close(pipe_fds[0]);
      return absl::NotFoundError(absl::StrCat("cannot start ", binary));
    }
    reader_ = std::thread([this, fd = pipe_fds[0]] { ReadLog(fd); });
    absl::MutexLock lock(&mu_);
    auto ready = [this] {
      mu_.AssertHeld();
      return ready_ || eof_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(60));
    if (!ready_ || address_.empty()) {
      return absl::UnavailableError(
          absl::StrCat("weftd did not start:\n", log_));
    }
    return absl::OkStatus();
  }

  pid_t pid() const { return pid_; }

  std::string address() {
    absl::MutexLock lock(&mu_);
    return address_;
  }

  // SIGTERM, then the exit status (-1 on a signal death).
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }

 private:
  void ReadLog(int fd) {
    std::string partial;
    char buf[4096];
    while (true) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      partial.append(buf, n);
      size_t eol;
      while ((eol = partial.find('\n')) != std::string::npos) {
        const std::string line = partial.substr(0, eol);
        partial.erase(0, eol + 1);
        absl::MutexLock lock(&mu_);
        absl::StrAppend(&log_, line, "\n");
        constexpr absl::string_view kServing =
            "weftd: serving weft.v1.Scheduler on ";
        if (absl::StartsWith(line, kServing) &&
            !absl::StrContains(line, "unix:")) {
          address_ = line.substr(kServing.size());
        }
        if (line == "weftd: ready") ready_ = true;
      }
    }
    close(fd);
    absl::MutexLock lock(&mu_);
    eof_ = true;
  }

  pid_t pid_ = -1;
  std::thread reader_;
  absl::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

struct Accepted {
  std::string id;
  absl::Time submitted;
};

struct WeftResult {
  PhaseResult submits;  // answered submissions, accepted or rejected
  std::vector<Accepted> accepted;
  int64_t rejected = 0;
  int64_t rejected_without_retry_info = 0;
  int64_t unexpected_errors = 0;
  std::string first_unexpected;
};

WeftResult RunWeft(const std::string& target,
                   const weft::v1::SubmitGraphRequest& request, int clients,
                   absl::Duration length, bool honour_retry) {
  absl::Mutex mu;
  WeftResult result;
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  const absl::Time end = start + length;
  result.submits.start = start;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      client::Client::Options options;
      options.tenant = absl::StrCat("client-", c % 4);
      std::unique_ptr<client::Client> client =
          client::Client::FromChannel(OwnChannel(target), options);
      const bool distinct = absl::GetFlag(FLAGS_distinct_graphs);
      weft::v1::SubmitGraphRequest mine = request;
      int64_t submitted = 0;
      std::vector<Accepted> accepted;
      std::vector<double> latency;
      int64_t rejected = 0, no_hint = 0, unexpected = 0;
      std::string first_unexpected;
      while (absl::Now() < end) {
        const absl::Time t0 = absl::Now();
        if (distinct) {
          mine.mutable_graph()->set_name(
              absl::StrCat("bench-", c, "-", submitted++));
        }
        absl::StatusOr<weft::v1::Job> job = client->Submit(mine);
        latency.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        if (job.ok()) {
          accepted.push_back({job->id(), t0});
          continue;
        }
        if (job.status().code() == absl::StatusCode::kResourceExhausted) {
          ++rejected;
          std::optional<absl::Duration> delay = RetryDelayOf(job.status());
          if (!delay) ++no_hint;
          if (honour_retry && delay) {
            absl::SleepFor(std::min(*delay, end - absl::Now()));
          }
          continue;
        }
        latency.pop_back();
        if (unexpected++ == 0) first_unexpected = job.status().ToString();
      }
      absl::MutexLock lock(&mu);
      result.submits.calls += static_cast<int64_t>(latency.size());
      result.submits.latency_us.insert(result.submits.latency_us.end(),
                                       latency.begin(), latency.end());
      result.accepted.insert(result.accepted.end(), accepted.begin(),
                             accepted.end());
      result.rejected += rejected;
      result.rejected_without_retry_info += no_hint;
      result.unexpected_errors += unexpected;
      if (result.first_unexpected.empty()) {
        result.first_unexpected = first_unexpected;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  result.submits.elapsed = absl::Now() - start;
  return result;
}

std::string DefaultWeftd(const char* argv0) {
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = getenv(env)) {
      std::string path = absl::StrCat(dir, "/weft/server/weftd");
      if (access(path.c_str(), X_OK) == 0) return path;
    }
  }
  std::string path = absl::StrCat(argv0, ".runfiles/weft/server/weftd");
  if (access(path.c_str(), X_OK) == 0) return path;
  return "bazel-bin/server/weftd";
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // This build's absl checks every lock order for deadlocks unless told
  // not to; weftd turns that off, and so do both phases here, so that
  // neither the echo server nor the clients pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const int clients = absl::GetFlag(FLAGS_clients);
  const absl::Duration length = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const weft::v1::SubmitGraphRequest request =
      SmallGraph(std::max(1, absl::GetFlag(FLAGS_nodes)));
  const std::string payload = request.SerializeAsString();
  std::cout << absl::StrFormat(
                   "load_bench: %d clients, %s per phase, %d-node graphs "
                   "(%d request bytes), %d simulated GPUs",
                   clients, absl::FormatDuration(length),
                   request.graph().nodes_size(), payload.size(),
                   absl::GetFlag(FLAGS_sim_devices))
            << std::endl;

  std::string binary = absl::GetFlag(FLAGS_weftd);
  if (binary.empty()) binary = DefaultWeftd(argv[0]);
  std::vector<std::string> flags = {
      "--listen=127.0.0.1:0",
      "--unix_socket=",
      "--metrics_listen=",
      "--backend=sim",
      absl::StrCat("--sim_devices=", absl::GetFlag(FLAGS_sim_devices)),
      absl::StrCat("--max_queued_jobs=", absl::GetFlag(FLAGS_max_queued_jobs)),
      absl::StrCat("--trace_jobs=",
                   absl::GetFlag(FLAGS_trace_jobs) ? "true" : "false"),
      "--retain_jobs=100000000",
      "--drain_timeout=60s"};
  if (absl::GetFlag(FLAGS_max_running_jobs) > 0) {
    flags.push_back(absl::StrCat("--max_running_jobs=",
                                 absl::GetFlag(FLAGS_max_running_jobs)));
  }
  WeftdProcess weftd;
  absl::Status started = weftd.Start(binary, flags);
  if (!started.ok()) {
    std::cerr << "load_bench: " << started << std::endl;
    return 1;
  }
  const std::string target = weftd.address();
  auto reader = client::Client::FromChannel(OwnChannel(target), {});
  // Whether weftd has no queued or running job, waiting up to `timeout`.
  auto drain = [&reader](absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (true) {
      auto queued = reader->List(weft::v1::QUEUED);
      auto running = reader->List(weft::v1::RUNNING);
      if (queued.ok() && running.ok() && queued->empty() && running->empty()) {
        return true;
      }
      if (absl::Now() >= end) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
  };

  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  EchoServer echo_server;
  std::vector<PhaseResult> echoes;
  std::vector<WeftResult> wefts;
  // CPU of this process (clients, and the echo server in its phases) and
  // of weftd, summed over the phases.
  double echo_cpu = 0, client_cpu = 0, weftd_cpu = 0;
  bool drained = true;
  for (int round = 0; round < rounds; ++round) {
    double cpu = ProcessCpuSeconds(getpid());
    echoes.push_back(RunEcho(echo_server.target(), payload, clients, length));
    echo_cpu += ProcessCpuSeconds(getpid()) - cpu;
    cpu = ProcessCpuSeconds(getpid());
    const double weftd_cpu_start = ProcessCpuSeconds(weftd.pid());
    wefts.push_back(RunWeft(target, request, clients, length,
                            absl::GetFlag(FLAGS_honour_retry)));
    client_cpu += ProcessCpuSeconds(getpid()) - cpu;
    // Every accepted job must end, and be reported as ended; weftd's CPU
    // counts the phase's jobs to their end.
    drained =
        drained && drain(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
    weftd_cpu += ProcessCpuSeconds(weftd.pid()) - weftd_cpu_start;
  }
  absl::StatusOr<std::vector<weft::v1::Job>> all = reader->List();
  if (!all.ok()) {
    std::cerr << "load_bench: ListJobs: " << all.status() << std::endl;
    return 1;
  }
  absl::flat_hash_map<std::string, const weft::v1::Job*> by_id;
  for (const weft::v1::Job& job : *all) by_id[job.id()] = &job;

  // All rounds together, then each.
  PhaseResult echo;
  WeftResult weft;
  for (int round = 0; round < rounds; ++round) {
    const PhaseResult& e = echoes[round];
    echo.calls += e.calls;
    echo.elapsed += e.elapsed;
    echo.latency_us.insert(echo.latency_us.end(), e.latency_us.begin(),
                           e.latency_us.end());
    const WeftResult& w = wefts[round];
    weft.submits.calls += w.submits.calls;
    weft.submits.elapsed += w.submits.elapsed;
    weft.submits.latency_us.insert(weft.submits.latency_us.end(),
                                   w.submits.latency_us.begin(),
                                   w.submits.latency_us.end());
    weft.accepted.insert(weft.accepted.end(), w.accepted.begin(),
                         w.accepted.end());
    weft.rejected += w.rejected;
    weft.rejected_without_retry_info += w.rejected_without_retry_info;
    weft.unexpected_errors += w.unexpected_errors;
    if (weft.first_unexpected.empty()) {
      weft.first_unexpected = w.first_unexpected;
    }
  }
  const double echo_rate = echo.calls / absl::ToDoubleSeconds(echo.elapsed);
  const double submit_rate =
      weft.submits.calls / absl::ToDoubleSeconds(weft.submits.elapsed);
  const double accept_rate =
      weft.accepted.size() / absl::ToDoubleSeconds(weft.submits.elapsed);

  int64_t lost = 0, not_terminal = 0, succeeded = 0, failed = 0, cancelled = 0;
  std::vector<double> done_ms;
  // Where submit-to-done went: until the job was created (the submission,
  // planning included), queued (created to started), running (started to
  // ended).
  std::vector<double> admit_ms, queued_ms, run_ms;
  // Per round: submit-to-done, and the time from the round's first
  // submission to its last end (jobs completed per second).
  std::vector<std::vector<double>> round_done_ms(rounds);
  double completed_seconds = 0;
  for (int round = 0; round < rounds; ++round) {
    absl::Time last_end = wefts[round].submits.start;
    for (const Accepted& a : wefts[round].accepted) {
      auto it = by_id.find(a.id);
      if (it == by_id.end()) {
        ++lost;
        continue;
      }
      const weft::v1::Job& job = *it->second;
      switch (job.state()) {
        case weft::v1::SUCCEEDED:
          ++succeeded;
          break;
        case weft::v1::FAILED:
          ++failed;
          break;
        case weft::v1::CANCELLED:
          ++cancelled;
          break;
        default:
          ++not_terminal;
          continue;
      }
      const absl::Time ended = ToTime(job.end_time());
      last_end = std::max(last_end, ended);
      done_ms.push_back(absl::ToDoubleMilliseconds(ended - a.submitted));
      round_done_ms[round].push_back(done_ms.back());
      const absl::Time created = ToTime(job.create_time());
      const absl::Time started = ToTime(job.start_time());
      admit_ms.push_back(absl::ToDoubleMilliseconds(created - a.submitted));
      queued_ms.push_back(absl::ToDoubleMilliseconds(started - created));
      run_ms.push_back(absl::ToDoubleMilliseconds(ended - started));
    }
    completed_seconds +=
        absl::ToDoubleSeconds(last_end - wefts[round].submits.start);
  }
  const int64_t strangers = static_cast<int64_t>(all->size()) -
                            static_cast<int64_t>(weft.accepted.size()) + lost;
  const int exit_status = weftd.Stop();
  const double completed_rate = succeeded / std::max(1e-9, completed_seconds);

  std::cout << absl::StrFormat(
                   "echo:  %d calls, %.0f calls/s, call latency p50 %.0f us "
                   "p99 %.0f us",
                   echo.calls, echo_rate, Percentile(echo.latency_us, 0.5),
                   Percentile(echo.latency_us, 0.99))
            << std::endl;
  std::cout << absl::StrFormat(
                   "weft:  %d submissions answered, %.0f/s (accepted %d = "
                   "%.0f/s, rejected RESOURCE_EXHAUSTED %d); submit latency "
                   "p50 %.0f us p99 %.0f us",
                   weft.submits.calls, submit_rate, weft.accepted.size(),
                   accept_rate, weft.rejected,
                   Percentile(weft.submits.latency_us, 0.5),
                   Percentile(weft.submits.latency_us, 0.99))
            << std::endl;
  std::cout << absl::StrFormat(
                   "jobs:  %d succeeded, %d failed, %d cancelled, %.0f "
                   "completed/s; submit-to-done p50 %.1f ms p99 %.1f ms",
                   succeeded, failed, cancelled, completed_rate,
                   Percentile(done_ms, 0.5), Percentile(done_ms, 0.99))
            << std::endl;
  std::cout << absl::StrFormat(
                   "       of which until created p50 %.1f ms p99 %.1f ms, "
                   "queued p50 %.1f ms p99 %.1f ms, running p50 %.1f ms "
                   "p99 %.1f ms",
                   Percentile(admit_ms, 0.5), Percentile(admit_ms, 0.99),
                   Percentile(queued_ms, 0.5), Percentile(queued_ms, 0.99),
                   Percentile(run_ms, 0.5), Percentile(run_ms, 0.99))
            << std::endl;
  // Each round's weft phase against the echo phase just before it.
  std::vector<double> rate_ratios, p99_ratios;
  for (int round = 0; round < rounds; ++round) {
    const PhaseResult& e = echoes[round];
    const PhaseResult& w = wefts[round].submits;
    const double e_rate = e.calls / absl::ToDoubleSeconds(e.elapsed);
    const double w_rate = w.calls / absl::ToDoubleSeconds(w.elapsed);
    const double e_p99 = Percentile(e.latency_us, 0.99);
    const double w_p99 = Percentile(round_done_ms[round], 0.99);
    rate_ratios.push_back(w_rate / std::max(1.0, e_rate));
    p99_ratios.push_back(w_p99 * 1000 / std::max(1.0, e_p99));
    std::cout << absl::StrFormat(
                     "round %d: echo %.0f calls/s, p99 %.1f ms; weft %.0f "
                     "submissions/s, submit-to-done p99 %.1f ms; ratios "
                     "%.2f, %.2f",
                     round + 1, e_rate, e_p99 / 1000, w_rate, w_p99,
                     rate_ratios.back(), p99_ratios.back())
              << std::endl;
  }
  std::cout << absl::StrFormat(
                   "ratio: weft submissions / echo calls = %.2f (median of "
                   "%d rounds; target >= 0.7); submit-to-done p99 / echo call "
                   "p99 = %.2f (median; target <= 2)",
                   Percentile(rate_ratios, 0.5), rounds,
                   Percentile(p99_ratios, 0.5))
            << std::endl;

  // CPU per answered call, less noisy than rates on a shared machine: the
  // echo phases' process (clients and server) against the weft phases'
  // clients plus weftd (submissions and the jobs they ran).
  const double echo_us = echo_cpu * 1e6 / std::max<int64_t>(1, echo.calls);
  const double client_us =
      client_cpu * 1e6 / std::max<int64_t>(1, weft.submits.calls);
  const double weftd_us =
      weftd_cpu * 1e6 / std::max<int64_t>(1, weft.submits.calls);
  std::cout << absl::StrFormat(
                   "cpu:   echo %.0f us per call (clients and server); weft "
                   "%.0f us per submission (clients %.0f us, weftd %.0f us, "
                   "its job included); echo / weft = %.2f",
                   echo_us, client_us + weftd_us, client_us, weftd_us,
                   echo_us / std::max(1.0, client_us + weftd_us))
            << std::endl;

  bool ok = true;
  auto check = [&ok](bool condition, const std::string& what) {
    std::cout << (condition ? "ok:    " : "FAIL:  ") << what << std::endl;
    ok = ok && condition;
  };
  check(drained, "every accepted job ended within --drain_seconds");
  check(lost == 0 && not_terminal == 0,
        absl::StrFormat("no accepted job lost (%d missing, %d not terminal)",
                        lost, not_terminal));
  check(strangers == 0,
        absl::StrFormat("weftd knows no job nobody submitted (%d)", strangers));
  check(weft.unexpected_errors == 0,
        absl::StrCat("every rejection was RESOURCE_EXHAUSTED (",
                     weft.unexpected_errors, " others",
                     weft.first_unexpected.empty()
                         ? ""
                         : absl::StrCat(", first: ", weft.first_unexpected),
                     ")"));
  check(weft.rejected_without_retry_info == 0,
        absl::StrFormat("every RESOURCE_EXHAUSTED carried RetryInfo (%d did "
                        "not)",
                        weft.rejected_without_retry_info));
  check(exit_status == 0,
        absl::StrCat("weftd exited 0 on SIGTERM (", exit_status, ")"));
  if (!ok) std::cerr << "--- weftd log ---\n" << weftd.log();
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  return weft::bench::Main(argc, argv);
}
