// The API key a request presents: `Authorization: Bearer KEY` (the scheme
// matched without regard to case and followed by one or more spaces, as
// RFC 9110 11.1 and 11.4 define credentials: clients and proxies send
// "bearer" too), else `x-api-key: KEY` (Anthropic's header). Whether the
// key is one the server accepts is server.cpp's question.
#pragma once

#include <httplib.h>

#include <string>

namespace ds4 {

// "" when the request presents none.
std::string presented_api_key(const httplib::Request& req);

}  // namespace ds4
