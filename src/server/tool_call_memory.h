// The exact text the model sampled for each reply's tool calls, remembered
// by tool-call id. Clients send a tool call back as a name and arguments;
// the template would re-render it in its own spelling, which differs from
// the sampled bytes wherever the model spaced or ordered its JSON otherwise,
// and from that byte on the next turn's prompt shares no KV prefix with the
// sequence that produced the call. With the sampled text put back
// (ChatMessage::sampled_tool_calls), the turn re-renders byte for byte.
//
// It is only put back when the message carries exactly the calls the
// reply made (same ids, names and arguments as JSON values): a client that
// edits a call gets the template's rendering of its edit. Bounded: the
// oldest replies are forgotten first (then the template renders them).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/chat.h"

namespace ds4 {

class ToolCallMemory {
public:
    explicit ToolCallMemory(size_t max_replies = 4096) : max_replies_(max_replies) {}

    // One reply's calls (ids set) and the text after its content.
    void remember(const std::vector<ChatToolCall>& calls, const std::string& sampled_text);
    // Sets sampled_tool_calls on every assistant message whose calls are
    // one remembered reply's. Thread-safe, as is remember().
    void restore(std::vector<ChatMessage>& messages);

    size_t size() const;

private:
    struct Entry {
        std::vector<ChatToolCall> calls;
        std::string text;
    };
    using Order = std::list<std::shared_ptr<Entry>>;

    mutable std::mutex mu_;
    size_t max_replies_;
    Order order_;  // oldest first
    std::unordered_map<std::string, Order::iterator> by_id_;
};

// A fresh id: prefix ("call_" for OpenAI, "toolu_" for Anthropic) and 24
// random hex digits.
std::string new_tool_call_id(const std::string& prefix);

}  // namespace ds4
