// Cross-origin access (--cors): a web page served from another origin may
// call the API from a browser only when the server says so. Each response
// names the allowed origin (Access-Control-Allow-Origin: the request's own
// Origin when listed, with Vary: Origin so caches keep one copy per origin;
// "*" when any origin is allowed), and the browser's preflight (OPTIONS with
// Access-Control-Request-Method) is answered before the API key is checked:
// browsers send it without credentials. Without --cors nothing changes.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace ds4 {

class CorsPolicy {
public:
    // `origins`: as --cors checked them (lowercase scheme://host[:port], or
    // "*" alone); empty: CORS is off.
    explicit CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {}

    bool enabled() const { return !origins_.empty(); }
    // The Access-Control-Allow-Origin value for a request's Origin header,
    // "" when that origin is not allowed (or CORS is off).
    std::string allowed_origin(const std::string& origin) const;
    // Sets the CORS headers every response of `req` carries.
    void apply(const httplib::Request& req, httplib::Response& res) const;
    // A preflight (and CORS on): answers it on `res` (204 for an allowed
    // origin, 403 otherwise) and returns true.
    bool answer_preflight(const httplib::Request& req, httplib::Response& res) const;

private:
    std::vector<std::string> origins_;
};

}  // namespace ds4
