#include "server/responses_logprobs.h"

#include <vector>

#include "tokenizer/tokenizer.h"

namespace ds4 {

ResponsesLogprobs::ResponsesLogprobs(const Tokenizer& tokenizer, size_t first_byte)
    : tokenizer_(tokenizer), format_(tokenizer), next_byte_(first_byte) {}

void ResponsesLogprobs::add(std::span<const SampledLogprobs> tokens) {
    for (const SampledLogprobs& t : tokens) {
        const int32_t id = t.sampled.id;
        // The end token writes no text; an id past the tokenizer's
        // vocabulary (a padded output row) reads as none either.
        const size_t n = id < 0 || id >= tokenizer_.n_vocab() || tokenizer_.is_eog(id) ? 0 : tokenizer_.token_piece(id).size();
        pending_.push_back({t, next_byte_, next_byte_ + n});
        next_byte_ += n;
    }
}

nlohmann::json ResponsesLogprobs::take(size_t begin, size_t end) {
    std::vector<SampledLogprobs> chosen;
    while (!pending_.empty() && pending_.front().from < end) {
        const Token& t = pending_.front();
        if (t.to > begin || (t.from == t.to && t.from >= begin)) chosen.push_back(t.logprobs);
        pending_.pop_front();
    }
    return format_.chat_content(chosen);
}

}  // namespace ds4
