#include "plot_command.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "acc/util/error.h"

namespace acc::cli {

std::string plot_script(const std::string& run_dir) {
  const std::string csv = run_dir + "/metrics.csv";
  return "set datafile separator ','\n"
         "set key autotitle columnhead\n"
         "set terminal pngcairo size 900,500\n"
         "set grid\n"
         "set xlabel 'step'\n"
         "set output '" + run_dir + "/loss.png'\n"
         "set ylabel 'loss (nats)'\n"
         "plot '" + csv + "' using 1:2 with lines title 'train loss', "
         "'' using 1:3 with linespoints title 'val loss'\n"
         "set output '" + run_dir + "/throughput.png'\n"
         "set ylabel 'tokens/s'\n"
         "set y2label 'MFU (%)'\n"
         "set y2tics\n"
         "plot '" + csv + "' using 1:6 with lines title 'tokens/s', "
         "'' using 1:($7*100) axes x1y2 with lines title 'MFU'\n";
}

int run_plot(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: accelerate plot RUN_DIR (a folder holding metrics.csv, e.g. runs/train_gpt2)";
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage << "\n  writes RUN_DIR/loss.png and RUN_DIR/throughput.png with gnuplot\n";
    return 0;
  }
  ACC_CHECK(args.size() == 1 && args[0].rfind("--", 0) != 0, kUsage);
  const std::string dir = args[0];
  ACC_CHECK(std::filesystem::is_regular_file(dir + "/metrics.csv"), "no metrics.csv in ", dir,
            " (the training programs write it into --run_dir)");
  ACC_CHECK(std::system("command -v gnuplot >/dev/null 2>&1") == 0,
            "gnuplot is not installed (scripts/setup installs Debian's gnuplot-nox)");
  const auto script = std::filesystem::path(dir) / ".plot.gp";
  std::ofstream(script) << plot_script(dir);
  const std::string command = "gnuplot '" + script.string() + "'";
  const int rc = std::system(command.c_str());
  std::filesystem::remove(script);
  ACC_CHECK(rc == 0, "gnuplot failed on ", dir, "/metrics.csv (exit status ", rc, ")");
  std::cout << "wrote " << dir << "/loss.png and " << dir << "/throughput.png\n";
  return 0;
}

}  // namespace acc::cli
