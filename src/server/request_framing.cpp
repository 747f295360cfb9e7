#include "server/request_framing.h"

#include <memory>

namespace ds4 {

std::optional<FramingRefusal> framing_refusal(const httplib::Request& req) {
    if (req.has_header("Transfer-Encoding"))
        return FramingRefusal{411, "send the request body with a Content-Length (Transfer-Encoding is not accepted)."};
    const size_t n = req.get_header_value_count("Content-Length");
    // Without one httplib reads a POST's body until the client closes (a
    // request's body is empty then, RFC 9112 6.3): the client would wait.
    if (n == 0 && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH"))
        return FramingRefusal{411, "send the request body with a Content-Length."};
    for (size_t i = 0; i < n; ++i) {
        const std::string v = req.get_header_value("Content-Length", i);
        if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos ||
            v != req.get_header_value("Content-Length", 0))
            return FramingRefusal{400, "the Content-Length header must be one decimal number."};
    }
    const std::string enc = req.get_header_value("Content-Encoding");
    if (req.has_header("Content-Encoding") && enc != "identity")
        return FramingRefusal{415, "send the request body uncompressed (Content-Encoding '" + enc.substr(0, 40) +
                                       "' is not accepted)."};
    return std::nullopt;
}

void read_body_as_is(const httplib::Request& req) {
    // The pre-routing handler gets the request const, but httplib's own
    // Request (routing()'s) is not const: the header can go.
    const_cast<httplib::Request&>(req).headers.erase("Content-Type");
}

void ignore_ranges(const httplib::Request& req) { const_cast<httplib::Request&>(req).ranges.clear(); }

bool carries_body(const httplib::Request& req) {
    return req.has_header("Transfer-Encoding") ||
           (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

void close_after(httplib::Response& res) {
    if (res.body.empty()) return;
    auto body = std::make_shared<std::string>(std::move(res.body));
    res.body.clear();
    std::string type = res.get_header_value("Content-Type");
    res.headers.erase("Content-Type");
    res.set_header("Connection", "close");
    res.set_content_provider(body->size(), type, [body](size_t offset, size_t length, httplib::DataSink& sink) {
        sink.write(body->data() + offset, length);
        return false;  // written whole; failing now makes httplib close the connection
    });
}

}  // namespace ds4
