#include "server/responses_response.h"

#include "server/tool_call_memory.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

using json = nlohmann::json;

ResponsesReply::ResponsesReply(ResponsesReplySetup setup)
    : s_(std::move(setup)), parser_(s_.think, s_.opens_thinking, s_.syntax, s_.types), created_(unix_time()) {
    if (s_.logprobs && s_.tokenizer) logprobs_.emplace(*s_.tokenizer, s_.forced.size());
}

const char* ResponsesReply::status(const GenerateResult& r) const {
    switch (r.reason) {
        case StopReason::max_tokens:
        case StopReason::context_full: return "incomplete";
        case StopReason::failed:
        case StopReason::cancelled: return "failed";
        default: return "completed";
    }
}

json ResponsesReply::usage(const GenerateResult& r) const {
    const int64_t output = static_cast<int64_t>(r.tokens.size());
    // The tokens sampled up to the one that completes the reasoning's close
    // marker (all of them when it never closed).
    int64_t reasoning = 0;
    if (s_.tokenizer && s_.think && !parser_.reply().reasoning.empty()) {
        std::string text;
        reasoning = output;
        for (size_t i = 0; i < r.tokens.size(); ++i) {
            if (r.tokens[i] >= 0 && r.tokens[i] < s_.tokenizer->n_vocab()) text += s_.tokenizer->token_piece(r.tokens[i]);
            if (text.find(s_.think->close) != std::string::npos) {
                reasoning = static_cast<int64_t>(i + 1);
                break;
            }
        }
    }
    return {{"input_tokens", r.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", r.cached_tokens}}},
            {"output_tokens", output},
            {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
            {"total_tokens", r.prompt_tokens + output}};
}

// The response object; `r` null while it is in progress.
json ResponsesReply::object(const char* st, const GenerateResult* r) const {
    json o = s_.echo;
    o["id"] = s_.id;
    o["object"] = "response";
    o["created_at"] = created_;
    o["status"] = st;
    o["model"] = s_.model;
    o["output"] = done_;
    o["error"] = nullptr;
    o["incomplete_details"] = nullptr;
    o["usage"] = r ? usage(*r) : json(nullptr);
    if (std::string_view(st) == "incomplete") o["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (r && std::string_view(st) == "failed") {
        const std::string why = r->reason == StopReason::failed ? r->error : "the generation was cancelled (the server is stopping).";
        o["error"] = {{"code", "server_error"}, {"message", why}};
    }
    return o;
}

json ResponsesReply::item_json(const Item& it, const char* st) const {
    switch (it.kind) {
        case Kind::reasoning:
            return {{"id", it.id}, {"type", "reasoning"}, {"status", st}, {"summary", json::array()},
                    {"content", json::array({{{"type", "reasoning_text"}, {"text", it.text}}})}};
        case Kind::message:
            return {{"id", it.id}, {"type", "message"}, {"status", st}, {"role", "assistant"},
                    {"content", json::array({{{"type", "output_text"}, {"text", it.text}, {"annotations", json::array()},
                                              {"logprobs", it.logprobs}}})}};
        case Kind::function_call:
            return {{"id", it.id}, {"type", "function_call"}, {"status", st}, {"call_id", it.call_id},
                    {"name", it.name}, {"arguments", it.text}};
    }
    return nullptr;
}

std::string ResponsesReply::emit(const char* type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return std::string("event: ") + type + "\ndata: " + dump_json(data) + "\n\n";
}

std::string ResponsesReply::open(Kind kind, std::string name) {
    std::string out = close("completed", kind == Kind::function_call);
    Item it{kind, new_tool_call_id(kind == Kind::reasoning ? "rs_" : kind == Kind::message ? "msg_" : "fc_"), "", "",
            std::move(name)};
    if (kind == Kind::function_call) it.call_id = new_tool_call_id("call_");
    items_.push_back(it);
    open_ = true;
    const size_t index = items_.size() - 1;
    json added = item_json(it, "in_progress");
    if (kind != Kind::function_call) added["content"] = json::array();  // parts arrive as content_part.added
    out += emit("response.output_item.added", {{"output_index", index}, {"item", added}});
    if (kind == Kind::message)
        out += emit("response.content_part.added",
                    {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                     {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()},
                               {"logprobs", json::array()}}}});
    if (kind == Kind::reasoning)
        out += emit("response.content_part.added", {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                                                    {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    return out;
}

// Ends the open item. A function_call item is complete when the next call
// starts (the parser announces a call only after the one before it
// closed) or when the reply holds the call (one the stream announced may
// never close; anything but a call follows it only once the reply ended,
// when the reply is final).
std::string ResponsesReply::close(const char* st, bool next_is_call) {
    if (!open_) return {};
    open_ = false;
    const Item& it = items_.back();
    const size_t index = items_.size() - 1;
    std::string out;
    json item;
    switch (it.kind) {
        case Kind::message:
            item = item_json(it, st);
            out += emit("response.output_text.done", {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                                                      {"text", it.text}, {"logprobs", it.logprobs}});
            out += emit("response.content_part.done", {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                                                       {"part", item["content"][0]}});
            break;
        case Kind::reasoning:
            item = item_json(it, st);
            out += emit("response.reasoning_text.done",
                        {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"text", it.text}});
            out += emit("response.content_part.done", {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                                                       {"part", item["content"][0]}});
            break;
        case Kind::function_call:
            item = item_json(it, next_is_call || calls_ <= parser_.reply().tool_calls.size() ? "completed" : "incomplete");
            out += emit("response.function_call_arguments.done",
                        {{"item_id", it.id}, {"output_index", index}, {"name", it.name}, {"arguments", it.text}});
            break;
    }
    done_.push_back(item);
    return out + emit("response.output_item.done", {{"output_index", index}, {"item", item}});
}

std::string ResponsesReply::events(const std::vector<ReplyDelta>& deltas) {
    std::string out;
    for (const ReplyDelta& d : deltas) {
        const Kind kind = d.kind == ReplyDelta::Kind::reasoning ? Kind::reasoning
                          : d.kind == ReplyDelta::Kind::content ? Kind::message
                                                                : Kind::function_call;
        if (d.kind == ReplyDelta::Kind::call_start) {
            out += open(Kind::function_call, d.text);
            ++calls_;
            continue;
        }
        if (!open_ || items_.back().kind != kind) out += open(kind);
        Item& it = items_.back();
        it.text += d.text;
        const size_t index = items_.size() - 1;
        switch (kind) {
            case Kind::message: {
                json lp = json::array();
                content_sent_ += d.text.size();
                if (logprobs_) {
                    const size_t at = parser_.answer_offset();  // known: content is answer
                    lp = logprobs_->take(at, at + content_sent_);
                    for (const json& e : lp) it.logprobs.push_back(e);
                }
                out += emit("response.output_text.delta", {{"item_id", it.id}, {"output_index", index}, {"content_index", 0},
                                                           {"delta", d.text}, {"logprobs", lp}});
                break;
            }
            case Kind::reasoning:
                out += emit("response.reasoning_text.delta",
                            {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"delta", d.text}});
                break;
            case Kind::function_call:
                out += emit("response.function_call_arguments.delta",
                            {{"item_id", it.id}, {"output_index", index}, {"delta", d.text}});
                break;
        }
    }
    return out;
}

void ResponsesReply::remember() {
    if (!s_.memory) return;
    const Reply& reply = parser_.reply();
    std::vector<ChatToolCall> calls;
    for (const Item& it : items_)
        if (it.kind == Kind::function_call && calls.size() < reply.tool_calls.size()) {
            const ToolCallText& c = reply.tool_calls[calls.size()];
            calls.push_back({c.name, c.arguments, it.call_id});
        }
    s_.memory->remember(calls, reply.tool_section);
}

json ResponsesReply::response(const GenerateResult& r) {
    parser_.push(s_.forced + r.text);
    parser_.finish();
    const Reply& reply = parser_.reply();
    if (!reply.reasoning.empty()) items_.push_back({Kind::reasoning, new_tool_call_id("rs_"), reply.reasoning, "", ""});
    // (a reply with nothing at all shows one empty message, as a stream does)
    if (!reply.content.empty() || (reply.reasoning.empty() && reply.tool_calls.empty())) {
        items_.push_back({Kind::message, new_tool_call_id("msg_"), reply.content, "", ""});
        if (const size_t at = parser_.answer_offset(); logprobs_ && at != std::string::npos) {
            logprobs_->add(r.logprobs);
            items_.back().logprobs = logprobs_->take(at, at + reply.content.size());
        }
    }
    for (const ToolCallText& c : reply.tool_calls)
        items_.push_back({Kind::function_call, new_tool_call_id("fc_"), c.arguments, new_tool_call_id("call_"), c.name});
    const char* st = status(r);
    // The last item is cut off when the reply was (a call in the reply is whole).
    for (size_t i = 0; i < items_.size(); ++i) {
        const bool cut = i + 1 == items_.size() && items_[i].kind != Kind::function_call && std::string_view(st) == "incomplete";
        done_.push_back(item_json(items_[i], cut ? "incomplete" : "completed"));
    }
    remember();
    return object(st, &r);
}

std::string ResponsesReply::begin(int64_t) {
    const json in_progress = object("in_progress", nullptr);
    std::string out = emit("response.created", {{"response", in_progress}});
    out += emit("response.in_progress", {{"response", in_progress}});
    return out + events(parser_.push(s_.forced));
}

void ResponsesReply::logprobs(std::span<const SampledLogprobs> tokens) {
    if (!logprobs_) return;
    logprobs_->add(tokens);
    received_ += tokens.size();
}

std::string ResponsesReply::text(std::string_view piece) { return events(parser_.push(piece)); }

std::string ResponsesReply::keep_alive() { return ": keep-alive\n\n"; }

std::string ResponsesReply::end(const GenerateResult& r) {
    const char* st = status(r);
    if (std::string_view(st) == "failed") return emit("response.failed", {{"response", object(st, &r)}});
    // The tokens no piece carried (text held back at the end).
    if (logprobs_ && received_ < r.logprobs.size())
        logprobs_->add(std::span<const SampledLogprobs>(r.logprobs).subspan(received_));
    std::string out = events(parser_.finish());
    if (items_.empty()) out += open(Kind::message);  // no text at all: one empty message
    out += close(std::string_view(st) == "incomplete" ? "incomplete" : "completed");
    remember();
    return out + emit(std::string_view(st) == "incomplete" ? "response.incomplete" : "response.completed",
                      {{"response", object(st, &r)}});
}

}  // namespace ds4
