// Owning pointers for ggml/gguf contexts in the oracle tools, so an error
// path frees them too (the ASan build runs the tools and checks for leaks).
#pragma once

#include <memory>

#include "ggml.h"
#include "gguf.h"

namespace ds4::oracle {

struct GgufFree {
    void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlFree {
    void operator()(ggml_context* c) const { ggml_free(c); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufFree>;
using GgmlPtr = std::unique_ptr<ggml_context, GgmlFree>;

}  // namespace ds4::oracle
