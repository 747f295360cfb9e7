#include "server/tool_call_memory.h"

#include <nlohmann/json.hpp>
#include <random>

namespace ds4 {

namespace {

// Arguments compare as JSON values: clients re-serialize them freely.
bool same_arguments(const std::string& a, const std::string& b) {
    if (a == b) return true;
    const auto ja = nlohmann::json::parse(a, nullptr, false);
    const auto jb = nlohmann::json::parse(b, nullptr, false);
    return !ja.is_discarded() && !jb.is_discarded() && ja == jb;
}

}  // namespace

void ToolCallMemory::remember(const std::vector<ChatToolCall>& calls, const std::string& sampled_text) {
    if (calls.empty() || sampled_text.empty()) return;
    auto entry = std::make_shared<Entry>(Entry{calls, sampled_text});
    std::lock_guard<std::mutex> lock(mu_);
    order_.push_back(entry);
    const auto it = std::prev(order_.end());
    for (const ChatToolCall& c : calls) by_id_[c.id] = it;
    while (order_.size() > max_replies_) {
        for (const ChatToolCall& c : order_.front()->calls) {
            auto found = by_id_.find(c.id);
            if (found != by_id_.end() && found->second == order_.begin()) by_id_.erase(found);
        }
        order_.pop_front();
    }
}

void ToolCallMemory::restore(std::vector<ChatMessage>& messages) {
    std::lock_guard<std::mutex> lock(mu_);
    for (ChatMessage& m : messages) {
        if (m.role != "assistant" || m.tool_calls.empty()) continue;
        auto found = by_id_.find(m.tool_calls.front().id);
        if (found == by_id_.end()) continue;
        const Entry& e = **found->second;
        if (e.calls.size() != m.tool_calls.size()) continue;
        bool same = true;
        for (size_t i = 0; same && i < e.calls.size(); ++i) {
            same = e.calls[i].id == m.tool_calls[i].id && e.calls[i].name == m.tool_calls[i].name &&
                   same_arguments(e.calls[i].arguments, m.tool_calls[i].arguments);
        }
        if (same) m.sampled_tool_calls = e.text;
    }
}

size_t ToolCallMemory::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_.size();
}

std::string new_tool_call_id(const std::string& prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id = prefix;
    for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
    return id;
}

}  // namespace ds4
