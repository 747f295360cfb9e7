// An HTTP error the server answers with: a status and one sentence, sent in
// the OpenAI error shape {"error": {"message", "type", "param", "code"}}.
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

}  // namespace ds4
