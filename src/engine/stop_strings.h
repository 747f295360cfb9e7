// Stop strings over streamed text: generation ends at the first occurrence
// of any stop string, and the text returned (or streamed) ends just before
// it. While streaming, text that might be the start of a stop string is
// held back until the next pieces decide it, so a client never sees part of
// a stop string that later completes (llama.cpp's server and the OpenAI API
// behave the same way).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/detokenizer.h"

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

// A reply's text as it streams: sampled ids through the detokenizer, then
// the stop strings, so what comes out is whole characters and never part
// of a stop string. generate() and the scheduler's requests both use it.
class ReplyText {
public:
    ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stops)
        : detok_(tokenizer), stops_(std::move(stops)) {}
    // Text safe to show after token `id` ("" once a stop string completed).
    std::string push(int32_t id) { return stops_.push(detok_.push(id)); }
    // At the end of generation: the bytes of an unfinished character, then
    // text held back for a stop string that never completed (the tail may
    // itself complete one; stopped() says so). Nothing after a stop.
    std::string finish() {
        if (stops_.stopped()) return {};
        std::string tail = stops_.push(detok_.flush());
        if (!stops_.stopped()) tail += stops_.flush();
        return tail;
    }
    bool stopped() const { return stops_.stopped(); }
    // The stop string that ended the reply ("" if none did).
    const std::string& matched_stop() const { return stops_.matched(); }

private:
    Detokenizer detok_;
    StopStrings stops_;
};

}  // namespace ds4
