// llama_chat_tokens MODEL.gguf REQUEST.json RESPONSE.json: llama.cpp's own
// chat prompt for each conversation, and its token ids, from the model file's
// template and vocabulary, the way llama-server and llama-cli build a prompt:
//   jinja    common_chat_templates_init(model) + common_chat_templates_apply
//            (use_jinja: llama.cpp's Jinja engine on tokenizer.chat_template)
//   builtin  llama_chat_apply_template(tokenizer.chat_template) (libllama's
//            built-in renderers, picked by looking at the template source)
// and llama_tokenize(vocab, text, add_special=true, parse_special=true) of
// each rendering and of an optional "text" (another engine's rendering).
//
// REQUEST:  {"cases": [{"messages": [{"role", "content", "reasoning_content"?,
//                                     "tool_calls"?: [OpenAI calls, arguments as text],
//                                     "tool_call_id"?}],
//                       "tools"?: [OpenAI tool specs],
//                       "add_generation_prompt": bool, "enable_thinking": bool,
//                       "reasoning_effort": string?, "text": string?}]}
// (tools and tool calls go to the Jinja engine only: the built-in renderers
// know neither)
// RESPONSE: {"cases": [{"jinja": {"prompt", "ids"} | {"error"},
//                       "builtin": {"prompt", "ids"} | {"error"},
//                       "text_ids": [...]?}]}
// Built over llama.cpp's common library (built from the bundled source by
// scripts/setup-tests.sh), not the prebuilt one: libllama's C API has no Jinja.
#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat.h"
#include "llama.h"

using nlohmann::json;

namespace {

json tokenize(const llama_vocab* vocab, const std::string& text) {
    std::vector<llama_token> ids(text.size() + 16);
    int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()),
                               /*add_special=*/true, /*parse_special=*/true);
    if (n < 0) {
        ids.resize(size_t(-n));
        n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), true, true);
    }
    if (n < 0) throw std::runtime_error("llama_tokenize failed");
    ids.resize(size_t(n));
    return json(ids);
}

json render_jinja(const common_chat_templates* tmpls, const json& c) {
    common_chat_templates_inputs in;
    for (const json& m : c.at("messages")) {
        common_chat_msg msg;
        msg.role = m.at("role").get<std::string>();
        msg.content = m.at("content").get<std::string>();
        if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
        if (m.contains("tool_calls")) {
            for (const json& t : m["tool_calls"]) {
                msg.tool_calls.push_back({t.at("function").at("name").get<std::string>(),
                                          t.at("function").at("arguments").get<std::string>(), t.value("id", "")});
            }
        }
        if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
        in.messages.push_back(std::move(msg));
    }
    if (c.contains("tools")) {
        for (const json& t : c["tools"]) {
            const json& f = t.at("function");
            in.tools.push_back({f.at("name").get<std::string>(), f.value("description", ""), f.at("parameters").dump()});
        }
    }
    in.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    in.use_jinja = true;
    in.enable_thinking = c.at("enable_thinking").get<bool>();
    if (c.contains("reasoning_effort")) in.chat_template_kwargs["reasoning_effort"] = c["reasoning_effort"].dump();
    return json(common_chat_templates_apply(tmpls, in).prompt);
}

json render_builtin(const char* tmpl, const json& c) {
    std::vector<llama_chat_message> chat;
    std::vector<std::string> roles, contents;
    for (const json& m : c.at("messages")) {
        roles.push_back(m.at("role").get<std::string>());
        contents.push_back(m.at("content").get<std::string>());
    }
    size_t size = 64;
    for (size_t i = 0; i < roles.size(); ++i) {
        chat.push_back({roles[i].c_str(), contents[i].c_str()});
        size += 2 * (roles[i].size() + contents[i].size()) + 64;
    }
    std::vector<char> buf(size);
    const bool add_ass = c.at("add_generation_prompt").get<bool>();
    int32_t n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_ass, buf.data(), int32_t(buf.size()));
    if (n > int32_t(buf.size())) {
        buf.resize(size_t(n));
        n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_ass, buf.data(), int32_t(buf.size()));
    }
    if (n < 0) throw std::runtime_error("llama_chat_apply_template has no built-in renderer for this template");
    return json(std::string(buf.data(), size_t(n)));
}

// {"prompt", "ids"} or {"error"}: one engine's result for one case.
template <class Render>
json attempt(const llama_vocab* vocab, Render render) {
    try {
        const std::string prompt = render().template get<std::string>();
        return json{{"prompt", prompt}, {"ids", tokenize(vocab, prompt)}};
    } catch (const std::exception& e) {
        return json{{"error", e.what()}};
    }
}

std::string read_file(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf REQUEST.json RESPONSE.json\n", argv[0]);
        return 2;
    }
    llama_model* model = nullptr;
    try {
        const json request = json::parse(read_file(argv[2]));
        llama_backend_init();
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;  // the vocabulary and the metadata are all this needs
        model = llama_model_load_from_file(argv[1], mp);
        if (model == nullptr) throw std::runtime_error(std::string("llama.cpp cannot load ") + argv[1]);
        const llama_vocab* vocab = llama_model_get_vocab(model);
        const char* tmpl = llama_model_chat_template(model, nullptr);
        if (tmpl == nullptr) throw std::runtime_error(std::string(argv[1]) + " has no tokenizer.chat_template");
        const common_chat_templates_ptr tmpls = common_chat_templates_init(model, "");

        json cases = json::array();
        for (const json& c : request.at("cases")) {
            json r;
            r["jinja"] = attempt(vocab, [&] { return render_jinja(tmpls.get(), c); });
            r["builtin"] = attempt(vocab, [&] { return render_builtin(tmpl, c); });
            if (c.contains("text")) r["text_ids"] = tokenize(vocab, c["text"].get<std::string>());
            cases.push_back(std::move(r));
        }
        std::ofstream out(argv[3], std::ios::binary);
        out << json{{"cases", cases}}.dump();
        if (!out.flush()) throw std::runtime_error(std::string("cannot write ") + argv[3]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_chat_tokens: %s\n", e.what());
        if (model != nullptr) llama_model_free(model);
        return 1;
    }
    llama_model_free(model);
    return 0;
}
