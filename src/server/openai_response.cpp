#include "server/openai_response.h"

#include "server/api_error.h"
#include "server/tool_call_memory.h"

namespace ds4 {

using json = nlohmann::json;

json openai_usage(const GenerateResult& r) {
    const int64_t completion = static_cast<int64_t>(r.tokens.size());
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", r.prompt_tokens + completion},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

OpenAIReply::OpenAIReply(bool chat, std::string id, std::string model, bool include_usage,
                         std::optional<ToolReading> tools)
    : chat_(chat), id_(std::move(id)), model_(std::move(model)), include_usage_(include_usage),
      tools_(std::move(tools)), created_(unix_time()) {
    if (tools_) parser_.emplace(tools_->think, tools_->opens_thinking, tools_->syntax, tools_->types);
}

std::string OpenAIReply::event(const json& choices, const json& usage) const {
    json body = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                 {"created", created_}, {"model", model_}, {"choices", choices}};
    if (!usage.is_null()) body["usage"] = usage;
    return "data: " + dump_json(body) + "\n\n";
}

json OpenAIReply::logprobs_json(std::span<const SampledLogprobs> tokens) {
    if (!chat_) return logprobs_->completion(tokens);
    return {{"content", logprobs_->chat_content(tokens)}, {"refusal", nullptr}};
}

void OpenAIReply::logprobs(std::span<const SampledLogprobs> tokens) {
    if (!logprobs_) return;
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    received_ += tokens.size();
}

// A chunk carries the log probabilities received since the last one.
std::string OpenAIReply::chunk(const json& delta_or_text, const json& finish) {
    json choice = {{"index", 0}, {"finish_reason", finish}};
    if (chat_) choice["delta"] = delta_or_text;
    else choice["text"] = delta_or_text;
    if (logprobs_) {
        choice["logprobs"] = pending_.empty() ? json(nullptr) : logprobs_json(pending_);
        pending_.clear();
    }
    return event(json::array({choice}), nullptr);
}

// One chunk per delta: the call's id, type and name open it (arguments
// ""), as OpenAI streams them; its arguments follow in pieces.
std::string OpenAIReply::deltas(const std::vector<ReplyDelta>& ds) {
    std::string out;
    for (const ReplyDelta& d : ds) {
        switch (d.kind) {
            case ReplyDelta::Kind::reasoning: out += chunk(json{{"reasoning_content", d.text}}, nullptr); break;
            case ReplyDelta::Kind::content: out += chunk(json{{"content", d.text}}, nullptr); break;
            case ReplyDelta::Kind::call_start:
                call_ids_.push_back(new_tool_call_id("call_"));
                out += chunk(json{{"tool_calls", json::array({{{"index", d.call},
                                                               {"id", call_ids_.back()},
                                                               {"type", "function"},
                                                               {"function", {{"name", d.text}, {"arguments", ""}}}}})}},
                             nullptr);
                break;
            case ReplyDelta::Kind::call_arguments:
                out += chunk(json{{"tool_calls", json::array({{{"index", d.call}, {"function", {{"arguments", d.text}}}}})}},
                             nullptr);
                break;
        }
    }
    return out;
}

const char* OpenAIReply::finish(const GenerateResult& r) const {
    if (parser_ && !parser_->reply().tool_calls.empty()) return "tool_calls";
    return finish_reason(r.reason);
}

void OpenAIReply::remember() const {
    if (!parser_ || !tools_->memory) return;
    const Reply& reply = parser_->reply();
    std::vector<ChatToolCall> calls;
    for (size_t i = 0; i < reply.tool_calls.size() && i < call_ids_.size(); ++i)
        calls.push_back({reply.tool_calls[i].name, reply.tool_calls[i].arguments, call_ids_[i]});
    tools_->memory->remember(calls, reply.tool_section);
}

json OpenAIReply::body(const GenerateResult& r) {
    json choice = {{"index", 0}};
    if (!chat_) {
        choice["text"] = r.text;
    } else if (!parser_) {
        choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    } else {
        std::vector<ReplyDelta> ds = parser_->push(tools_->forced + r.text);
        for (ReplyDelta& d : parser_->finish()) ds.push_back(std::move(d));
        for (const ReplyDelta& d : ds)
            if (d.kind == ReplyDelta::Kind::call_start) call_ids_.push_back(new_tool_call_id("call_"));
        const Reply& reply = parser_->reply();
        json message = {{"role", "assistant"}};
        message["content"] = reply.content.empty() && !reply.tool_calls.empty() ? json(nullptr) : json(reply.content);
        if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
        if (!reply.tool_calls.empty()) {
            json calls = json::array();
            for (size_t i = 0; i < reply.tool_calls.size(); ++i)
                calls.push_back({{"id", call_ids_[i]},
                                 {"type", "function"},
                                 {"function", {{"name", reply.tool_calls[i].name}, {"arguments", reply.tool_calls[i].arguments}}}});
            message["tool_calls"] = calls;
        }
        choice["message"] = message;
        remember();
    }
    if (logprobs_) choice["logprobs"] = logprobs_json(r.logprobs);
    choice["finish_reason"] = finish(r);
    return {{"id", id_},         {"object", chat_ ? "chat.completion" : "text_completion"},
            {"created", created_}, {"model", model_},
            {"choices", json::array({choice})}, {"usage", openai_usage(r)}};
}

std::string OpenAIReply::begin(int64_t) {
    if (!chat_) return "";
    std::string out = chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr);
    if (parser_ && !tools_->forced.empty()) out += deltas(parser_->push(tools_->forced));
    return out;
}

std::string OpenAIReply::text(std::string_view piece) {
    if (parser_) return deltas(parser_->push(piece));
    return chunk(chat_ ? json{{"content", piece}} : json(piece), nullptr);
}

std::string OpenAIReply::keep_alive() { return ": keep-alive\n\n"; }

std::string OpenAIReply::end(const GenerateResult& r) {
    if (r.reason == StopReason::failed)  // 503: a pipeline stage is gone; retry later
        return "data: " + openai_error_body(r.unavailable ? 503 : 500, r.error) + "\n\ndata: [DONE]\n\n";
    std::string out;
    if (parser_) {
        out += deltas(parser_->finish());
        remember();
    }
    // The tokens no piece carried: text held back, the end token (left out).
    if (logprobs_ && received_ < r.logprobs.size())
        pending_.insert(pending_.end(), r.logprobs.begin() + std::ptrdiff_t(received_), r.logprobs.end());
    out += chunk(chat_ ? json::object() : json(""), finish(r));
    if (include_usage_) out += event(json::array(), openai_usage(r));
    return out + "data: [DONE]\n\n";
}

}  // namespace ds4
