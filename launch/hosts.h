#pragma once
// The machines of a multi-machine launch: read from an OpenMPI hostfile or a --hosts list, and
// checked before mpirun starts so that a machine that cannot be reached is an error naming it
// within seconds, not a hang inside ssh.
#include <string>
#include <vector>

namespace acc::cli {

struct Host {
  std::string name;
  int slots = 0;  // 0: not given
};

// "host", "host slots=N" (OpenMPI's hostfile format; '#' starts a comment), one per line.
std::vector<Host> read_hostfile(const std::string& path);
// "h1,h2" or "h1:2,h2:2" (mpirun's --host syntax).
std::vector<Host> parse_host_list(const std::string& list);

// True for names that are this machine (localhost, 127.x.x.x, ::1, its host name).
bool is_local_host(const std::string& name);

// Throws acc::Error naming the host when it does not resolve or its ssh port (which mpirun
// starts remote ranks through) does not accept a connection within `timeout_seconds`.
// Local names are not checked.
void check_reachable(const Host& host, int timeout_seconds);

}  // namespace acc::cli
