// An HTTP error the server answers with: a status and one sentence, sent in
// the shape of the API the client speaks: OpenAI's {"error": {"message",
// "type", "param", "code"}} or Anthropic's {"type": "error", "error":
// {"type", "message"}}.
#pragma once

#include <string>

#include "common/error.h"

namespace ds4 {

class ApiError : public Error {
public:
    ApiError(int status, std::string message, std::string param = {})
        : Error(std::move(message)), status_(status), param_(std::move(param)) {}
    int status() const { return status_; }
    const std::string& param() const { return param_; }

private:
    int status_;
    std::string param_;
};

// {"error": {...}} for a status and message; `type` follows OpenAI
// ("invalid_request_error", "authentication_error", "server_error", ...).
std::string openai_error_body(int status, const std::string& message, const std::string& param = {});

// {"type": "error", "error": {"type", "message"}}; `type` follows
// Anthropic ("invalid_request_error", "authentication_error",
// "not_found_error", "request_too_large", "rate_limit_error", "api_error",
// "overloaded_error").
std::string anthropic_error_body(int status, const std::string& message);

// Which shape a path's errors take: Anthropic's under /v1/messages,
// OpenAI's elsewhere.
bool is_anthropic_path(const std::string& path);
std::string error_body_for_path(const std::string& path, int status, const std::string& message,
                                const std::string& param = {});

}  // namespace ds4
