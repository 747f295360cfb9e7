// Where the library's messages go. Library code never writes to stderr
// itself: it logs here, and the program (or a test, or the server) decides
// where lines end up. The default sink writes information lines to stderr
// as they are ("model map: 1 region ...") and warnings as "ds4: warning:
// <line>", which is what the command-line programs want.
#pragma once

#include <functional>
#include <string_view>

namespace ds4 {

enum class LogLevel { debug, info, warning, error };

// Receives one line (no trailing newline). Called from any thread, one call
// at a time.
using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the process-wide sink; an empty sink restores the default.
// Returns the previous one, so a scope can put it back.
LogSink set_log_sink(LogSink sink);

void log_line(LogLevel level, std::string_view line);
inline void log_info(std::string_view line) { log_line(LogLevel::info, line); }
inline void log_warning(std::string_view line) { log_line(LogLevel::warning, line); }

}  // namespace ds4
