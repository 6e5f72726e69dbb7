#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "error_matchers.h"
#include "launch_command.h"
#include "mpirun_messages.h"
#include "rank_output.h"
#include "support/test_support.h"

using namespace acc::cli;

namespace {
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST(Launch, ParsesOptionsAndProgram) {
  const auto o = parse_launch_args({"--num_processes=3", "--dry_run", "prog", "--lr", "1"});
  EXPECT_EQ(o.num_processes, 3);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--lr", "1"}));
  EXPECT_EQ(parse_launch_args({"--num_processes", "2", "--", "--weird"}).program,
            (std::vector<std::string>{"--weird"}));
}

TEST(Launch, BadArgumentsAreNamed) {
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes", "0", "p"}), {"--num_processes '0'"});
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes"}), {"--num_processes needs a value"});
  EXPECT_ACC_ERROR(parse_launch_args({"--config_file", "/no/such.yaml", "p"}),
                   {"--config_file '/no/such.yaml' is not a file"});
  EXPECT_ACC_ERROR(parse_launch_args({"--bogus", "p"}), {"unknown option '--bogus'"});
  EXPECT_ACC_ERROR(resolve_launch(parse_launch_args({"--fsdp_sharding_strategy", "HALF", "p"})),
                   {"--fsdp_sharding_strategy HALF", "allowed"});
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes", "2"}), {"no program to launch"});
  // A program taken as the value of an option that was given none: named.
  EXPECT_ACC_ERROR(parse_launch_args({"--microbatches", "/bin/true"}),
                   {"no program to launch (--microbatches took the file '/bin/true' as its value)"});
}

TEST(Launch, ConfigKeysOverrideTheFile) {
  const auto r = resolve_launch(parse_launch_args(
      {"--config_file", ACC_SOURCE_DIR "/configs/fsdp_full_shard.yaml", "--mixed_precision", "bf16",
       "--fsdp_sharding_strategy=SHARD_GRAD_OP", "--num_processes", "3", "prog"}));
  EXPECT_TRUE(r.config.compute.bf16);
  EXPECT_EQ(r.config.dist.fsdp.sharding_strategy, acc::ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_EQ(r.num_processes, 3);
  EXPECT_NE(r.source.find("+ --mixed_precision bf16"), std::string::npos) << r.source;
}

TEST(Launch, AnFsdpKeyMakesADefaultConfigFsdp) {
  ::setenv("ACC_CONFIG_HOME", "/nonexistent-acc-config-home", 1);
  const auto r = resolve_launch(parse_launch_args({"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "prog"}));
  ::unsetenv("ACC_CONFIG_HOME");
  EXPECT_EQ(r.config.strategy_name(), "SHARD_GRAD_OP");
}

// ... but not a config that names its strategy: the key is warned about and changes nothing.
TEST(Launch, AnFsdpKeyLeavesANamedStrategy) {
  const auto r = resolve_launch(parse_launch_args({"--config_file", ACC_SOURCE_DIR "/configs/pipeline_1f1b.yaml",
                                                   "--fsdp_state_dict_type", "FULL_STATE_DICT", "prog"}));
  EXPECT_EQ(r.config.strategy_name(), "PIPELINE");
  EXPECT_EQ(r.config.dist.distributed_type, acc::DistributedType::NO);
  EXPECT_FALSE(r.config.strategy_reads("fsdp_config"));
}

TEST(Launch, OversubscribesOnlyBeyondCoresAndAllowsRootOnlyForRoot) {
  LaunchOptions o;
  o.program = {"prog"};
  ResolvedLaunch r;
  r.num_processes = 4;
  const auto over = mpirun_args(o, r, 2, false);
  EXPECT_TRUE(has(over, "--oversubscribe"));
  EXPECT_FALSE(has(over, "--allow-run-as-root"));
  EXPECT_TRUE(has(over, "--tag-output"));
  r.num_processes = 2;
  const auto fit = mpirun_args(o, r, 4, true);
  EXPECT_FALSE(has(fit, "--oversubscribe"));
  EXPECT_TRUE(has(fit, "slot:PE=2"));  // each rank gets its share of cores
  EXPECT_TRUE(has(fit, "--allow-run-as-root"));
  EXPECT_EQ(fit.back(), "prog");
}

TEST(Launch, RewritesMpirunTagsToRankPrefixes) {
  const auto line = parse_tagged_line("[1,12]<stderr>:loss 3.5 [x]");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->rank, 12);
  EXPECT_TRUE(line->is_stderr);
  EXPECT_EQ(rank_prefixed(*line), "[rank 12] loss 3.5 [x]");
  EXPECT_EQ(parse_tagged_line("[1,0]<stdout>:")->text, "");
  EXPECT_FALSE(parse_tagged_line("-----------"));
  EXPECT_FALSE(parse_tagged_line("[warn] something"));
  EXPECT_FALSE(parse_tagged_line("[1,x]<stdout>:a"));
}

// The same error from several ranks is shown once, the others named at the end; other lines and
// different errors all pass.
TEST(Launch, ShowsAnErrorEveryRankPrintsOnce) {
  RepeatedErrors repeated;
  auto held = [&](const char* line) { return repeated.held_back(*parse_tagged_line(line)); };
  EXPECT_FALSE(held("[1,2]<stderr>:train_gpt2: error: pipeline_config.split_points: 'x' is no layer"));
  EXPECT_FALSE(held("[1,0]<stdout>:step 1"));
  EXPECT_FALSE(held("[1,1]<stdout>:step 1"));
  EXPECT_TRUE(held("[1,3]<stderr>:train_gpt2: error: pipeline_config.split_points: 'x' is no layer"));
  EXPECT_TRUE(held("[1,0]<stderr>:train_gpt2: error: pipeline_config.split_points: 'x' is no layer"));
  EXPECT_FALSE(held("[1,1]<stderr>:train_gpt2: error: another one"));
  EXPECT_FALSE(held("[1,1]<stderr>:a warning, twice"));
  EXPECT_FALSE(held("[1,2]<stderr>:a warning, twice"));
  EXPECT_EQ(repeated.finish(), std::vector<std::string>{"[ranks 0, 3] the same error as rank 2"});
}

// mpirun's output after a rank aborted the job, as OpenMPI 4.1 prints it, then a message of
// its own that is not about the abort.
std::vector<std::string> shown(const std::vector<std::string>& lines, bool raw = false) {
  acc::cli::MpirunMessages messages(raw);
  std::vector<std::string> out;
  for (const auto& line : lines)
    for (auto& kept : messages.take(line)) out.push_back(kept);
  for (auto& kept : messages.finish()) out.push_back(kept);
  return out;
}

TEST(Launch, AnAbortIsOneLineAndOtherMpirunMessagesPass) {
  const std::string rule(74, '-');
  const std::vector<std::string> abort = {
      "[vm:19797] [[8619,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/util/show_help.c at line 501",
      rule,
      "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
      "with errorcode 1.",
      "",
      "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
      "You may or may not see output from other processes, depending on",
      "exactly when Open MPI kills them.",
      rule,
      "[vm:19769] 1 more process has sent help message help-mpi-api.txt / mpi-abort",
      "[vm:19769] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages"};
  const std::vector<std::string> other = {rule, "There are not enough slots available in the system", rule,
                                          "[vm:1] Set MCA parameter \"orte_base_help_aggregate\" to 0"};
  auto lines = abort;
  lines.insert(lines.end(), other.begin(), other.end());
  std::vector<std::string> expected = {"accelerate launch: rank 1 ended the job (MPI_ABORT, error code 1); its error is above"};
  expected.insert(expected.end(), other.begin(), other.end());
  EXPECT_EQ(shown(lines), expected);
  EXPECT_EQ(shown(lines, /*raw=*/true), lines);
  // A rank that exited non-zero (a program's error, or a preempted run's 75): one line.
  const std::string short_rule(55, '-');
  EXPECT_EQ(shown({short_rule, "Primary job  terminated normally, but 1 process returned",
                   "a non-zero exit code. Per user-direction, the job has been aborted.", short_rule, rule,
                   "mpirun detected that one or more processes exited with non-zero status, thus causing",
                   "the job to be terminated. The first process to do so was:", "",
                   "  Process name: [[52083,1],1]", "  Exit code:    75", rule,
                   "mpirun: Forwarding signal 10 to job"}),
            (std::vector<std::string>{"accelerate launch: rank 1 exited with status 75"}));
  // A banner cut off by the end of the output is shown as it is.
  EXPECT_EQ(shown({rule, "MPI_ABORT was invoked on rank 0"}), (std::vector<std::string>{rule, "MPI_ABORT was invoked on rank 0"}));
}

namespace {

std::string write_hostfile(const std::string& text) {
  const auto path = acc::test::fresh_dir("hostfile") / "hosts";
  std::ofstream(path) << text;
  return path.string();
}

TEST(LaunchMachines, HostfileAndHostListAreRead) {
  const auto hosts = read_hostfile(write_hostfile("# cluster\nnode-a slots=4\n\nnode-b   # spare\n"));
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "node-a");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].slots, 0);
  const auto listed = parse_host_list("node-a:2, node-b:2");
  EXPECT_EQ(listed[1].name, "node-b");
  EXPECT_EQ(listed[1].slots, 2);
  EXPECT_ACC_ERROR(read_hostfile(write_hostfile("node-a cpus=4\n")), {"line 1", "'cpus=4' is not understood"});
  EXPECT_ACC_ERROR(read_hostfile(write_hostfile("node-a slots=x\n")), {"slots 'x'"});
  EXPECT_ACC_ERROR(read_hostfile(write_hostfile("# nothing\n")), {"names no host"});
}

TEST(LaunchMachines, OneMpirunOverEveryMachine) {
  const auto o = parse_launch_args({"--num_machines", "2", "--num_processes", "4", "--hosts", "node-a,node-b",
                                    "--main_process_ip", "node-a", "prog"});
  const auto r = resolve_launch(o);
  ASSERT_EQ(r.hosts.size(), 2u);
  EXPECT_EQ(r.hosts[1].slots, 2);  // num_processes / num_machines
  const auto args = mpirun_args(o, r, 2, false);
  EXPECT_TRUE(has(args, "node-a:2,node-b:2"));
  EXPECT_TRUE(has(args, "-o BatchMode=yes -o ConnectTimeout=10"));
  EXPECT_TRUE(has(args, "slot:PE=1"));  // two ranks on each two-core machine
}

TEST(LaunchMachines, InconsistentMachinesAreNamed) {
  auto resolve = [](std::vector<std::string> args) {
    args.push_back("prog");
    return resolve_launch(parse_launch_args(args));
  };
  EXPECT_ACC_ERROR(resolve({"--num_machines", "2", "--num_processes", "2"}), {"--hostfile FILE", "--hosts"});
  EXPECT_ACC_ERROR(resolve({"--num_machines", "3", "--num_processes", "3", "--hosts", "a,b"}),
                   {"num_machines is 3 but --hosts names 2 machines"});
  EXPECT_ACC_ERROR(resolve({"--num_machines", "2", "--num_processes", "3", "--hosts", "a,b"}),
                   {"not a multiple of num_machines 2"});
  EXPECT_ACC_ERROR(resolve({"--num_machines", "2", "--num_processes", "4", "--hosts", "a:3,b"}),
                   {"host 'a' has 3 slots but each machine runs 2 ranks"});
  EXPECT_ACC_ERROR(resolve({"--num_machines", "2", "--num_processes", "2", "--hosts", "a,b", "--main_process_ip", "b"}),
                   {"rank 0 runs on the first machine listed (a); list b first"});
  EXPECT_ACC_ERROR(resolve({"--machine_rank", "1", "--num_processes", "2"}), {"run accelerate launch there only"});
  // The same from the config file, as Hugging Face accelerate writes it on the second machine.
  const auto file = acc::test::fresh_dir("machine_rank") / "second.yaml";
  std::ofstream(file) << "num_machines: 2\nmachine_rank: 1\nnum_processes: 2\n";
  EXPECT_ACC_ERROR(resolve({"--config_file", file.string(), "--hosts", "a,b"}),
                   {"machine_rank 1: acc starts the ranks of every machine from the main machine", "there only"});
}

TEST(LaunchMachines, AnUnreachableHostIsNamed) {
  EXPECT_NO_THROW(check_reachable({"localhost", 1}, 1));
  EXPECT_ACC_ERROR(check_reachable({"acc-no-such-host.invalid", 1}, 1),
                   {"host 'acc-no-such-host.invalid' cannot be reached: its name does not resolve"});
  // An address nobody answers on (TEST-NET-1, RFC 5737): refused, unreachable or silent, the
  // error names it within the timeout.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ACC_ERROR(check_reachable({"192.0.2.1", 1}, 1), {"host '192.0.2.1' cannot be reached: its ssh port 22"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
