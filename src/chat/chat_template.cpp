// Choosing a renderer: by name, or from the Jinja source a GGUF carries,
// through the chat family table (chat_family.h).
#include <array>

#include "chat/chat_family.h"
#include "common/error.h"

namespace ds4 {

std::span<const ChatFamily* const> chat_families() {
    static const std::array<const ChatFamily*, 4> families = {&qwen3_chat_family(), &deepseek4_chat_family(),
                                                              &glm46_chat_family(), &glm47_chat_family()};
    return families;
}

bool contains_all(std::string_view source, std::span<const std::string_view> fragments) {
    for (std::string_view fragment : fragments) {
        if (source.find(fragment) == std::string_view::npos) return false;
    }
    return true;
}

const std::vector<std::string>& chat_template_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const ChatFamily* f : chat_families())
            for (const ChatRenderer& r : f->renderers) v.emplace_back(r.name);
        return v;
    }();
    return names;
}

std::string chat_template_list() {
    std::string list;
    for (const std::string& name : chat_template_names()) list += (list.empty() ? "" : ", ") + name;
    return list;
}

std::string render_raw(const std::vector<ChatMessage>& messages) {
    std::string text;
    for (const ChatMessage& m : messages) text += m.content;
    return text;
}

std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
    for (const ChatFamily* f : chat_families())
        for (const ChatRenderer& r : f->renderers)
            if (r.name == template_name) return r.render(messages, options);
    if (template_name == kRawChat) return render_raw(messages);
    throw Error("unknown chat template \"" + std::string(template_name) + "\"; ds4 knows: " + chat_template_list() +
                " (and " + std::string(kRawChat) + ").");
}

std::string detect_chat_template(std::string_view jinja_source) {
    for (const ChatFamily* f : chat_families())
        if (std::string name = f->detect(jinja_source); !name.empty()) return name;
    return "";
}

}  // namespace ds4
