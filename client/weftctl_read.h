// The weftctl commands that read what a finished job left behind: `read`
// fetches an output buffer of a SUCCEEDED job and prints its elements as
// text, as JSON or as raw bytes; `trace` fetches the job's Chrome/Perfetto
// trace-event JSON. Both write to stdout or --out.
#ifndef WEFT_CLIENT_WEFTCTL_READ_H_
#define WEFT_CLIENT_WEFTCTL_READ_H_

#include "client/weftctl_command.h"

namespace weft::client {

// weftctl read JOB BUFFER [--raw] [--out=FILE] [--chunk_bytes=N]
int RunRead(const CommandContext& context);
// weftctl trace JOB [--out=FILE]
int RunTrace(const CommandContext& context);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_READ_H_
