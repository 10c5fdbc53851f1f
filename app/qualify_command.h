// `sextant qualify`: run every suite's qualify profile (a host-sized one on
// CPUs), check conformance, and judge the headline figures against the
// expectations of this device kind or a golden run (app/qualify_criteria.h).
// Prints PASS or FAIL per criterion with the measured value, threshold and
// margin, adds the verdict to the results (`qualification`), JUnit (a
// "qualify" test suite) and a one-page HTML verdict beside the results, and
// exits 0 when no criterion failed, 1 when one did.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "app/cli.h"

namespace sextant {

struct QualifyFlags {
  std::string expectations;  // a file; default: the one matching the device in the expectations folder
  std::string baseline;      // a golden results file of the same cluster
  double tolerance = 0.10;   // how far below (above) the golden figure a criterion may land
};

// Registers `qualify` with the options of `run` (flags) and its own (q).
CLI::App* add_qualify_command(CLI::App& app, RunFlags& flags, QualifyFlags& q);
// Collective over the world; returns the exit status.
int run_qualify_command(RunFlags flags, const QualifyFlags& q, const std::string& command_line);

}  // namespace sextant
