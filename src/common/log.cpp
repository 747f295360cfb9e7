#include "common/log.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace ds4 {
namespace {

std::mutex g_mutex;
LogSink g_sink;  // empty: the default, stderr

// Information lines as they are ("model map: ..."), problems marked.
void default_sink(LogLevel level, std::string_view line) {
    const char* tag = level == LogLevel::warning ? "ds4: warning: " : level == LogLevel::error ? "ds4: error: " : "";
    std::fprintf(stderr, "%s%.*s\n", tag, static_cast<int>(line.size()), line.data());
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return std::exchange(g_sink, std::move(sink));
}

void log_line(LogLevel level, std::string_view line) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_sink) g_sink(level, line);
    else default_sink(level, line);
}

}  // namespace ds4
