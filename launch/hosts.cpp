#include "hosts.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "acc/util/error.h"
#include "acc/util/strings.h"
#include "commands.h"

namespace acc::cli {

namespace {

constexpr const char* kSshPort = "22";

// Connects to one address within the deadline; an empty string on success, else why not.
std::string try_connect(const addrinfo& a, int timeout_ms) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK, a.ai_protocol);
  if (fd < 0) return std::strerror(errno);
  std::string why;
  if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0 && errno != EINPROGRESS) {
    why = std::strerror(errno);
  } else {
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    int error = 0;
    socklen_t len = sizeof error;
    if (ready == 0) why = "no answer within " + std::to_string(timeout_ms / 1000) + " s";
    else if (ready < 0) why = std::strerror(errno);
    else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0)
      why = std::strerror(error != 0 ? error : errno);
  }
  ::close(fd);
  return why;
}

}  // namespace

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  ACC_CHECK(in, "hostfile '", path, "' cannot be read");
  std::vector<Host> hosts;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = util::trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    Host h;
    words >> h.name;
    const std::string where = "hostfile " + path + " line " + std::to_string(number);
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      ACC_CHECK(eq != std::string::npos && (key == "slots" || key == "max_slots"), where, ": '", word,
                "' is not understood (expected 'host' or 'host slots=N')");
      if (key == "slots") h.slots = parse_count(word.substr(eq + 1), where + ": slots", 1);
    }
    hosts.push_back(h);
  }
  ACC_CHECK(!hosts.empty(), "hostfile '", path, "' names no host");
  return hosts;
}

std::vector<Host> parse_host_list(const std::string& list) {
  std::vector<Host> hosts;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    item = util::trim(item);
    ACC_CHECK(!item.empty(), "--hosts '", list, "': an empty host name");
    const auto colon = item.find(':');
    Host h{item.substr(0, colon), 0};
    if (colon != std::string::npos) h.slots = parse_count(item.substr(colon + 1), "--hosts " + list + ": slots", 1);
    hosts.push_back(h);
  }
  ACC_CHECK(!hosts.empty(), "--hosts names no host");
  return hosts;
}

bool is_local_host(const std::string& name) {
  if (name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0) return true;
  char own[256] = {};
  return ::gethostname(own, sizeof own - 1) == 0 && name == own;
}

void check_reachable(const Host& host, int timeout_seconds) {
  if (is_local_host(host.name)) return;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.name.c_str(), kSshPort, &hints, &found);
  ACC_CHECK(rc == 0, "host '", host.name, "' cannot be reached: its name does not resolve (",
            ::gai_strerror(rc), ")");
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  std::string why;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    why = try_connect(*a, timeout_seconds * 1000);
    if (why.empty()) return;
  }
  ACC_FAIL("host '", host.name, "' cannot be reached: its ssh port ", kSshPort,
           ", which mpirun starts ranks through, gave ", why);
}

}  // namespace acc::cli
