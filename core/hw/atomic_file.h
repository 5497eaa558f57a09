// Files replaced whole or not at all, even when the process is killed (SIGKILL) mid-write: the
// new contents go to an unnamed file in the target's directory (Linux O_TMPFILE), are flushed to
// disk, then get a temporary name and are renamed over the target. A reader sees the old file or
// the new one, never part of one, and a kill while writing leaves nothing behind. The temporary
// name exists only between that link and the rename; one left by a process killed in that instant
// (".NAME.gpusim-tmp-PID-N") is removed by the next write in the directory once PID is gone.
// Where the filesystem has no O_TMPFILE the named temporary is used throughout (same sweep).
//
// Usage:
//   if (auto s = gpusim::write_file_atomic("cache/tuning.json", text); !s) ... s.error().message
#pragma once


#include <string>
#include <string_view>

#include "gpusim/result.h"

namespace gpusim {

// Replaces `path` with `bytes` (creating it if absent; the directory must exist).
Status write_file_atomic(const std::string& path, std::string_view bytes);

// Removes the temporaries write_file_atomic left in `dir` whose writing process has exited;
// returns how many. write_file_atomic calls it on the target's directory before writing.
int sweep_stale_temporaries(const std::string& dir);

}  // namespace gpusim
