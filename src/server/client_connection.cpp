#include "server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <array>
#include <cstdlib>
#include <string>

namespace ds4 {

namespace {

// An address as httplib prints it into Request::remote_addr / local_addr
// (getnameinfo, numeric), and its port.
bool address_of(const sockaddr_storage& a, socklen_t len, std::string& ip, int& port) {
    if (a.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    else if (a.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
    else return false;
    std::array<char, NI_MAXHOST> host{};
    if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) != 0)
        return false;
    ip = host.data();
    return true;
}

bool is_connection_of(int fd, const httplib::Request& req) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    std::string ip;
    int port = -1;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !address_of(a, len, ip, port) ||
        port != req.remote_port || ip != req.remote_addr)
        return false;
    len = sizeof a;
    return ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && address_of(a, len, ip, port) &&
           port == req.local_port && ip == req.local_addr;
}

int find_socket(const httplib::Request& req) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (req.ssl) return SSL_get_fd(req.ssl);
#endif
    if (req.remote_port < 0 || req.local_port < 0) return -1;
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return -1;
    const int own = ::dirfd(dir);
    int found = -1;
    while (const dirent* e = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == own) continue;
        if (is_connection_of(static_cast<int>(fd), req)) {
            found = static_cast<int>(fd);
            break;
        }
    }
    ::closedir(dir);
    return found;
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& req) : fd_(find_socket(req)) {}

bool ClientConnection::gone() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace ds4
