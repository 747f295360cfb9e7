#include "engine/stop_strings.h"

#include <algorithm>

namespace ds4 {

StopStrings::StopStrings(std::vector<std::string> stops) {
    for (std::string& s : stops)
        if (!s.empty()) {
            longest_ = std::max(longest_, s.size());
            stops_.push_back(std::move(s));
        }
}

std::string StopStrings::push(std::string_view piece) {
    if (stopped_) return {};
    held_.append(piece);
    // The earliest stop string in what is held: everything before it goes
    // out, the rest is dropped. (Emitted text never contains the start of a
    // stop string, so a match cannot begin before held_.)
    size_t first = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = held_.find(s);
        if (at < first || (at == first && at != std::string::npos && s.size() > matched_.size())) {
            first = at;
            matched_ = s;
        }
    }
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    matched_.clear();
    // Keep the longest suffix that is a proper prefix of some stop string.
    size_t keep = 0;
    for (size_t n = std::min(held_.size(), longest_ - 1); n > 0 && keep == 0; --n) {
        const std::string_view tail = std::string_view(held_).substr(held_.size() - n);
        for (const std::string& s : stops_)
            if (s.size() > n && std::string_view(s).substr(0, n) == tail) {
                keep = n;
                break;
            }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

}  // namespace ds4
