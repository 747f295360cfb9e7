// Request bodies httplib 0.11 must not read on its own terms. It counts only
// a Content-Length against --max-body-mb (a chunked body, or a compressed
// one once inflated, grows without bound), reads a malformed Content-Length
// as 0 (the body is then read as the next request), reads a POST without
// one until the client closes, and answers a form body
// over 8 KiB with a 413 naming the wrong limit. The pre-routing handler
// refuses the first two before any byte of the body is read, and closes the
// connection after any refusal of a request that still holds its body.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

namespace ds4 {

struct FramingRefusal {
    int status;           // 400, 411 or 415
    std::string message;  // one sentence
};

// The refusal for a body httplib would read unbounded or misframed:
// Transfer-Encoding or a POST without a Content-Length (411: send one), a
// Content-Length that is not one decimal number (400), a Content-Encoding
// other than identity (415). nullopt for every other request.
std::optional<FramingRefusal> framing_refusal(const httplib::Request& req);

// Every body is read as JSON whatever its Content-Type says: the label is
// dropped before httplib reads the body, so a body labelled
// application/x-www-form-urlencoded (curl -d's default) or multipart is read
// as it is, up to --max-body-mb.
void read_body_as_is(const httplib::Request& req);

// Every answer is whole: a Range header is ignored (RFC 9110 14.2: a
// server may ignore it, and must for POST, where ranges mean nothing).
// httplib 0.11 would answer 206 with a slice of the JSON (or of an event
// stream), so the parsed ranges are dropped before routing. A Range it
// cannot parse it refuses itself, before any handler runs: 416, with an
// error body in the API's shape (server.cpp's error handler).
void ignore_ranges(const httplib::Request& req);

// A request whose body httplib has not read yet, were it refused now.
bool carries_body(const httplib::Request& req);

// The response, once written whole, closes the connection (the unread body
// must not be read as the next request): its body is moved into a provider
// that writes it and then reports failure, which makes httplib close.
void close_after(httplib::Response& res);

}  // namespace ds4
