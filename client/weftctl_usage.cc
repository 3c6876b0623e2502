#include "client/weftctl_usage.h"

namespace weft::client {

const char kWeftctlUsage[] =
    R"(weftctl: command-line client for weftd, the Weft GPU graph scheduler.

Usage: weftctl [global flags] COMMAND [arguments] [flags]

Commands:
  submit FILE      Submit a graph (.json: proto3 JSON; .textproto, .txtpb,
                   .pbtxt: text format). Prints "job <id> <STATE>".
                   Module files named by sourceFile/ptxFile are read
                   relative to FILE and sent inline.
                     --watch                     then watch it; exit 0 only
                                                 if it SUCCEEDED
                     --priority=N                higher runs first
                     --request_id=ID             idempotency key: a repeat
                                                 returns the original job
                     --policy=lookahead_finish_time|min_finish_time|
                              round_robin|stream_aware|min_transfer_size|
                              minmin_transfer_time|minmax_transfer_time
                                                 device policy; by default
                                                 lookahead_finish_time: each
                                                 node where it and what
                                                 follows it finish first
                     --stream_mode=multi|single
                     --max_streams_per_device=N
                     --data_threshold=F          fraction of a node's
                                                 argument bytes a device must
                                                 hold to be preferred by the
                                                 transfer policies, in [0, 1]
                                                 (default 0.1)
                     --restrict_to_parent_devices
                                                 keep a node on a
                                                 predecessor's device when
                                                 that is no worse
                     --max_nodes_per_stream=N    split longer streams (at
                                                 least 3)
                     --memory_order=auto|submitted|memory_aware
                                                 issue order: the graph's
                                                 (auto, submitted) or one
                                                 that keeps fewer bytes live
                     --launch_mode=auto|streams|graphs
                                                 issue device work node by
                                                 node (streams) or as
                                                 cached device graphs
                                                 (graphs); auto: graphs on
                                                 GPUs, streams on simulated
                                                 ones
                     --control_mode=auto|host|device
                                                 where loops and case..of
                                                 read their conditions
                     --progress=auto|bar|lines   (with --watch)
  get JOB          Show a job.
  watch JOB        Follow a job; exit 0 only if it SUCCEEDED. On a terminal:
                   a progress bar (nodes done/total, elapsed); otherwise one
                   line per node event and state change.
                     --progress=auto|bar|lines   force the bar or the lines
  cancel JOB       Cancel a queued or running job; prints its state after.
  list             List jobs as a table.
                     --state=queued|running|succeeded|failed|cancelled|all
                     --limit=N                   only the N most recent
  plan FILE        Plan a graph without running it. The table has one line
                   per node in issue order: device, stream, dependencies,
                   event waits and signal, estimated start and end, and why
                   this device and this stream; then the streams and the
                   totals (makespan, critical path, lower bound, events);
                   then, when weftd planned memory (graphs of up to 20,000
                   nodes, or --memory_order=memory_aware), one line per
                   device: arena, peak live bytes, lower bound, budget,
                   spilled bytes, orderings added.
                     --policy=...  --stream_mode=...  --max_streams_per_device=N
                     --data_threshold=F  --restrict_to_parent_devices
                     --max_nodes_per_stream=N  --memory_order=...
                                                 as for submit
                     --format=table|json|trace|dot|svg
                                 json: the Plan as proto3 JSON (as --json);
                                 trace: Chrome/Perfetto trace-event JSON, a
                                 process per GPU and a thread per stream,
                                 arrows for waits between streams, and a
                                 "live bytes" counter per GPU (open in
                                 ui.perfetto.dev or chrome://tracing);
                                 dot: Graphviz, a cluster per GPU, dashed
                                 edges between streams;
                                 svg: a picture (open in a browser): a lane
                                 per stream with a bar per node (hover for
                                 its name and times), and per GPU a chart of
                                 live bytes with its arena and budget
                     --simulate                  table: add each node's
                                                 duration and each stream's
                                                 busy time and utilisation.
                                                 weftd simulates every plan,
                                                 so the estimated times are
                                                 in every format regardless
                     --out=FILE                  write to FILE, not stdout
  devices          List the devices with memory and stream load.
  read JOB BUFFER  Print an output buffer of a SUCCEEDED job, one element per
                   line (float32/float64 as %.9g, integers in decimal, bytes
                   as two hex digits).
                     --raw                       the bytes as they are
                     --out=FILE                  write to FILE, not stdout
                     --chunk_bytes=N             transfer chunk size
  trace JOB        Write the trace of a finished job (SUCCEEDED, FAILED or
                   CANCELLED) as Chrome/Perfetto trace-event JSON: a process
                   per device, a thread per device stream and copy engine,
                   kernel and copy spans, and arrows for the event waits
                   between streams. Open it in ui.perfetto.dev or
                   chrome://tracing. weftd traces every job unless run with
                   --trace_jobs=false, or the job has more nodes than its
                   --trace_max_nodes.
                     --out=FILE                  write to FILE, not stdout
  health           Ask the grpc.health.v1 service; exit 0 only if SERVING.
                     --service=NAME              default: the whole server

Global flags (anywhere on the line):
  --addr=ADDR      daemon address, host:port or unix:/path
                   (default 127.0.0.1:50051)
  --json           machine-readable output: one proto3 JSON object per line
  --timeout=DUR    deadline of each call (default 30s); watching has no
                   deadline unless --timeout is given
  --tenant=NAME    submit on behalf of this tenant (sent as metadata)
  --help           this text
)";

std::vector<FlagSpec> WeftctlFlags() {
  return {
      {"addr"},
      {"json", false},
      {"timeout"},
      {"tenant"},
      {"help", false},
      {"watch", false},
      {"priority"},
      {"request_id"},
      {"policy"},
      {"stream_mode"},
      {"max_streams_per_device"},
      {"data_threshold"},
      {"restrict_to_parent_devices", false},
      {"max_nodes_per_stream"},
      {"launch_mode"},
      {"control_mode"},
      {"state"},
      {"limit"},
      {"raw", false},
      {"out"},
      {"chunk_bytes"},
      {"service"},
      {"progress"},
      {"format"},
      {"simulate", false},
      {"memory_order"},
  };
}

}  // namespace weft::client
