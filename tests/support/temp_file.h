// A file with the given content under /tmp, removed when the object goes:
// the existing paths command-line tests need for model, prompt and
// certificate arguments.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace ds4::test {

class TempFile {
public:
    explicit TempFile(const std::string& content = "x") {
        char tmpl[] = "/tmp/ds4_test_file_XXXXXX";
        int fd = ::mkstemp(tmpl);
        if (fd < 0) throw std::runtime_error("mkstemp failed");
        ::close(fd);
        path_ = tmpl;
        std::ofstream(path_) << content;
    }
    ~TempFile() { std::remove(path_.c_str()); }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace ds4::test
