// One error type for the whole engine. Its message is one sentence meant for
// the user: which file, which tensor, which layer, what went wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace ds4 {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& sentence) : std::runtime_error(sentence) {}
};

// Bad command line: reported with exit code 2 before anything is loaded.
class UsageError : public Error {
public:
    explicit UsageError(const std::string& sentence) : Error(sentence) {}
};

}  // namespace ds4
