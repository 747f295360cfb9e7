#include "server/openai_logprobs.h"

#include "tokenizer/tokenizer.h"

namespace ds4 {

using json = nlohmann::json;

// A model's vocabulary may be padded past the tokenizer's (rows of logits
// no token names): such an id reads as no text.
std::string OpenAILogprobs::text_of(int32_t id) const {
    return id >= 0 && id < tokenizer_.n_vocab() ? tokenizer_.token_piece(id) : std::string();
}

json OpenAILogprobs::bytes_of(const std::string& text) const {
    json bytes = json::array();
    for (unsigned char c : text) bytes.push_back(int(c));
    return bytes;
}

json OpenAILogprobs::chat_content(std::span<const SampledLogprobs> tokens) const {
    json content = json::array();
    for (const SampledLogprobs& t : tokens) {
        if (tokenizer_.is_eog(t.sampled.id)) continue;
        const std::string text = text_of(t.sampled.id);
        json top = json::array();
        for (const TokenLogprob& alt : t.top) {
            const std::string alt_text = text_of(alt.id);
            top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", bytes_of(alt_text)}});
        }
        content.push_back({{"token", text}, {"logprob", t.sampled.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
    }
    return content;
}

json OpenAILogprobs::completion(std::span<const SampledLogprobs> tokens) {
    json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const SampledLogprobs& t : tokens) {
        if (tokenizer_.is_eog(t.sampled.id)) continue;
        const std::string text = text_of(t.sampled.id);
        json top = json::object();
        for (const TokenLogprob& alt : t.top) {
            const std::string key = text_of(alt.id);
            if (!top.contains(key)) top[key] = alt.logprob;  // the likelier of two ids spelled alike
        }
        out["tokens"].push_back(text);
        out["token_logprobs"].push_back(t.sampled.logprob);
        out["top_logprobs"].push_back(top);
        out["text_offset"].push_back(offset_);
        offset_ += static_cast<int64_t>(text.size());
    }
    return out;
}

}  // namespace ds4
