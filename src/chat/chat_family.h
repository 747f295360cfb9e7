// The chat family table: each family's renderers by name and the detector
// that recognises its Jinja sources. A family adds one entry (its own
// *_chat_family.cpp); render_chat, detect_chat_template and the name lists
// read only the table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat.h"
#include "chat/thinking.h"
#include "chat/tool_calls.h"

namespace ds4 {

struct ChatRenderer {
    std::string_view name;  // what --chat-template accepts
    std::string (*render)(const std::vector<ChatMessage>&, const ChatOptions&);
};

struct ChatFamily {
    std::string_view family;
    std::vector<ChatRenderer> renderers;
    // The renderer name for a Jinja source of this family, or "" when the
    // source is not one ds4 has been checked against.
    std::string (*detect)(std::string_view jinja_source);
    // How its models mark their reasoning in a reply (chat/thinking.h).
    ThinkMarkers think;
    // How its models write tool calls (chat/tool_calls.h).
    ToolCallSyntax tool_calls;
};

const ChatFamily& qwen3_chat_family();
const ChatFamily& deepseek4_chat_family();
const ChatFamily& glm46_chat_family();
const ChatFamily& glm47_chat_family();
// Every family, in the order names are listed.
std::span<const ChatFamily* const> chat_families();

// Whether every fragment occurs in `source` (the detectors' building block).
bool contains_all(std::string_view source, std::span<const std::string_view> fragments);

}  // namespace ds4
