#include "server/api_key.h"

#include <strings.h>

namespace ds4 {

std::string presented_api_key(const httplib::Request& req) {
    const std::string auth = req.get_header_value("Authorization");
    const size_t sp = auth.find(' ');
    if (sp == 6 && ::strncasecmp(auth.c_str(), "Bearer", 6) == 0) {
        const size_t key = auth.find_first_not_of(' ', sp);
        return key == std::string::npos ? std::string() : auth.substr(key);
    }
    return req.get_header_value("x-api-key");
}

}  // namespace ds4
