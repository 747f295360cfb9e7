// OpenAI's shapes: GET /v1/models, POST /v1/chat/completions and
// /v1/completions, whole or streamed (chunks, the finish reason, usage when
// asked for, then [DONE]).
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/prompt.h"
#include "server/server_context.h"

namespace ds4 {

namespace {

using json = nlohmann::json;

json usage_json(const GenerateResult& r) {
    const int64_t completion = static_cast<int64_t>(r.tokens.size());
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", r.prompt_tokens + completion},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

class OpenAIStream : public StreamFormat {
public:
    OpenAIStream(bool chat, std::string id, std::string model, bool include_usage)
        : chat_(chat), id_(std::move(id)), model_(std::move(model)), include_usage_(include_usage) {}

    std::string begin(int64_t) override { return chat_ ? chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr) : ""; }
    std::string text(std::string_view piece) override {
        return chunk(chat_ ? json{{"content", piece}} : json(piece), nullptr);
    }
    std::string keep_alive() override { return ": keep-alive\n\n"; }
    std::string end(const GenerateResult& g) override {
        if (g.reason == StopReason::failed)
            return "data: " + openai_error_body(g.unavailable ? 503 : 500, g.error) + "\n\ndata: [DONE]\n\n";
        std::string out = chunk(chat_ ? json::object() : json(""), finish_reason(g.reason));
        if (include_usage_) out += event(json::array(), usage_json(g));
        return out + "data: [DONE]\n\n";
    }

private:
    std::string chunk(const json& delta_or_text, const json& finish) const {
        json choice = {{"index", 0}, {"finish_reason", finish}};
        if (chat_) choice["delta"] = delta_or_text;
        else choice["text"] = delta_or_text;
        return event(json::array({choice}), nullptr);
    }
    std::string event(const json& choices, const json& usage) const {
        json body = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                     {"created", created_}, {"model", model_}, {"choices", choices}};
        if (!usage.is_null()) body["usage"] = usage;
        return "data: " + dump_json(body) + "\n\n";
    }

    bool chat_;
    std::string id_, model_;
    bool include_usage_;
    int64_t created_ = unix_time();
};

void complete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
    const uint64_t id = ctx.next_request++;
    CompletionRequest cr;
    std::shared_ptr<Generation> g;
    uint64_t sid = 0;
    try {
        const Engine& engine = ctx.ready();
        cr = parse_completion_request(req.body, chat);
        ServerPrompt p = chat ? chat_server_prompt(engine, cr.messages, cr.chat_options) : text_server_prompt(engine, cr.prompt);
        g = ctx.submit(std::move(p.tokens), cr.generate, chat ? "messages" : "prompt", res, sid);
    } catch (const ApiError& e) {
        res.status = e.status();
        res.set_content(openai_error_body(e.status(), e.what(), e.param()), "application/json");
        ctx.log_request(id, req, e.status(), nullptr);
        return;
    }
    const std::string rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
    const std::string model = cr.model.empty() ? ctx.opts.model_id : cr.model;
    if (cr.stream) {
        ctx.stream(res, g, sid, std::make_shared<OpenAIStream>(chat, rid, model, cr.include_usage), id, req);
        return;
    }
    const GenerateResult& r = ctx.wait(*g);
    if (r.reason == StopReason::failed) {
        const int status = r.unavailable ? 503 : 500;  // 503: a pipeline stage is gone; retry later
        res.status = status;
        res.set_content(openai_error_body(status, r.error), "application/json");
        ctx.log_request(id, req, status, g.get());
        return;
    }
    json choice = {{"index", 0}, {"finish_reason", finish_reason(r.reason)}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    else choice["text"] = r.text;
    const json body = {{"id", rid},         {"object", chat ? "chat.completion" : "text_completion"},
                       {"created", unix_time()}, {"model", model},
                       {"choices", json::array({choice})}, {"usage", usage_json(r)}};
    res.set_content(dump_json(body), "application/json");
    ctx.log_request(id, req, 200, g.get());
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerContext& ctx) {
    http.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
        const json m = {{"id", ctx.opts.model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ds4"}};
        res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
        complete(ctx, req, res, true);
    });
    http.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
        complete(ctx, req, res, false);
    });
}

}  // namespace ds4
