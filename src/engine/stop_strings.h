// Stop strings over streamed text: generation ends at the first occurrence
// of any stop string, and the text returned (or streamed) ends just before
// it. While streaming, text that might be the start of a stop string is
// held back until the next pieces decide it, so a client never sees part of
// a stop string that later completes (llama.cpp's server and the OpenAI API
// behave the same way).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

class StopStrings {
public:
    // Empty strings are ignored (they would stop before anything is said).
    explicit StopStrings(std::vector<std::string> stops);

    // Appends a piece; returns the text now safe to emit. After a stop
    // string completes, stopped() is true and nothing more is emitted.
    std::string push(std::string_view piece);
    // The held-back text, at the end of generation (none after a stop).
    std::string flush();
    bool stopped() const { return stopped_; }
    // The stop string that ended generation ("" if none did).
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string held_;  // not yet emitted: might begin a stop string
    size_t longest_ = 0;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace ds4
