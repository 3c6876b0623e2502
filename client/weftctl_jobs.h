// The weftctl commands about jobs: submit (and, with --watch, follow) a
// graph, get a job, watch it with a progress bar or a line per event, cancel
// it and list jobs. Each prints the job as text or, with --json, as proto3
// JSON, and returns weftctl's exit status: watching exits 0 only when the
// job SUCCEEDED.
#ifndef WEFT_CLIENT_WEFTCTL_JOBS_H_
#define WEFT_CLIENT_WEFTCTL_JOBS_H_

#include "client/weftctl_command.h"

namespace weft::client {

// weftctl submit FILE [--watch] [--priority=N] [--request_id=ID] and the
// schedule flags (weftctl_schedule_flags.h).
int RunSubmit(const CommandContext& context);
// weftctl get JOB
int RunGet(const CommandContext& context);
// weftctl watch JOB [--progress=auto|bar|lines]
int RunWatch(const CommandContext& context);
// weftctl cancel JOB
int RunCancel(const CommandContext& context);
// weftctl list [--state=...] [--limit=N]
int RunList(const CommandContext& context);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_JOBS_H_
