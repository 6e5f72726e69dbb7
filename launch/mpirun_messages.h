#pragma once
// mpirun's own messages, minus the noise of an end acc has already explained. When a rank
// ends the job (acc's terminate handler calls MPI_Abort after printing the error), OpenMPI adds
// an 8-line MPI_ABORT banner, "N more processes have sent help message ... mpi-abort" with a
// hint about orte_base_help_aggregate, and sometimes an ORTE_ERROR_LOG line from show_help.c
// racing the shutdown; when a rank exits non-zero, two banners ("Primary job terminated
// normally, but ..." and "mpirun detected that one or more processes exited with non-zero
// status"). Those become one line naming the rank and its status, and mpirun's "Forwarding
// signal" goes (launch says why it sent the signal); every other message of mpirun passes
// unchanged, so a real OpenMPI error still shows. With `raw` nothing is filtered
// (ACC_LOG_LEVEL=debug or trace).
#include <string>
#include <vector>

namespace acc::cli {

class MpirunMessages {
 public:
  explicit MpirunMessages(bool raw = false) : raw_(raw) {}
  // The lines to print for one line mpirun printed (none while a banner is being read).
  std::vector<std::string> take(const std::string& line);
  // What is still held when mpirun's output ends.
  std::vector<std::string> finish();

 private:
  bool raw_;
  bool in_banner_ = false;
  bool dropped_aggregate_ = false;  // the next "Set MCA parameter" hint goes with it
  std::vector<std::string> banner_;
};

}  // namespace acc::cli
