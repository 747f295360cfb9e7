// GLM's chat families: the GLM-4.5/4.6 template and the GLM-4.7 one (the
// format of the GLM-5 generation), as llama.cpp ships them, and how their
// Jinja sources are recognised. Two families, not one: the two write tool
// calls with different spacing, and a call the server forces must be
// opened the way the model was taught.
#include <array>

#include "chat/chat_family.h"

namespace ds4 {
namespace {

// What every GLM template since 4.5 has: the [gMASK]<sop> prefix, the
// visible_text macro, the last-user rule for reasoning, the <think> split
// of inline reasoning and the <arg_key>/<arg_value> arguments.
constexpr std::array<std::string_view, 7> kGlmShared = {
    "[gMASK]<sop>",
    "{%- macro visible_text(content) -%}",
    "{%- set ns = namespace(last_user_index=-1) %}",
    "content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n')",
    "{{ tool | tojson(ensure_ascii=False) }}",
    "{{ v | tojson(ensure_ascii=False) if v is not string else v }}",
    "{{- '<|observation|>' }}",
};

// GLM-4.5/4.6: newlines after the markers, "/nothink" on user turns.
std::string detect_glm46(std::string_view source) {
    static constexpr std::array<std::string_view, 7> kFragments = {
        "{%- if m.role == 'user' -%}<|user|>\n{{ visible_text(m.content) }}\n",
        "{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not "
        "visible_text(m.content).endswith(\"/nothink\")) else '' -}}",
        "{%- if loop.index0 > ns.last_user_index and reasoning_content -%}",
        "{{ '\\n<think>' + reasoning_content.strip() +  '</think>'}}",
        "{{ '\\n<tool_call>' + tc.name }}",
        "{{- '\\n<tool_response>\\n' }}",
        "<|assistant|>{{- '\\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' -}}",
    };
    return contains_all(source, kGlmShared) && contains_all(source, kFragments) ? "glm-4.6" : "";
}

// GLM-4.7: tight markers, clear_thinking, the prompt opens <think>.
std::string detect_glm47(std::string_view source) {
    static constexpr std::array<std::string_view, 6> kFragments = {
        "{%- if m.role == 'user' -%}<|user|>{{ visible_text(m.content) }}\n",
        "{%- if ((clear_thinking is defined and not clear_thinking) or loop.index0 > ns.last_user_index) and "
        "reasoning_content -%}",
        "{{ '<think>' + reasoning_content.strip() +  '</think>'}}",
        "{{- '<tool_call>' + tc.name -}}",
        "{% set _args = tc.arguments %}{% for k, v in _args.items() %}<arg_key>{{ k }}</arg_key><arg_value>",
        "<|assistant|>{{- '</think>' if (enable_thinking is defined and not enable_thinking) else '<think>' -}}",
    };
    if (source.find("/nothink") != std::string_view::npos) return "";  // a mix with the 4.6 body
    return contains_all(source, kGlmShared) && contains_all(source, kFragments) ? "glm-4.7" : "";
}

std::string render_glm46(const std::vector<ChatMessage>& m, const ChatOptions& o) {
    return render_glm(m, o, GlmVariant::glm46);
}
std::string render_glm47(const std::vector<ChatMessage>& m, const ChatOptions& o) {
    return render_glm(m, o, GlmVariant::glm47);
}

}  // namespace

// Both templates strip the answer when they render a turn (content.strip()),
// so whitespace the model writes before it (GLM-4.6 answers "\n..." after a
// pre-filled "\n<think></think>") is not content.
const ChatFamily& glm46_chat_family() {
    static const ChatFamily family{"glm-4.6", {{"glm-4.6", render_glm46}}, detect_glm46,
                                   {"<think>", "</think>", /*trim_answer_start=*/true}, ToolCallSyntax::glm46};
    return family;
}

const ChatFamily& glm47_chat_family() {
    static const ChatFamily family{"glm-4.7", {{"glm-4.7", render_glm47}}, detect_glm47,
                                   {"<think>", "</think>", /*trim_answer_start=*/true}, ToolCallSyntax::glm47};
    return family;
}

}  // namespace ds4
