// The results document, schema "sextant.result/1" (results/schema.json):
// run, system, and one record per case instance. Written once, atomically
// (temp file + hard link), and never over another run's file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"

namespace sextant {

constexpr const char* kResultSchema = "sextant.result/1";

struct CaseRecord {
  CaseConfig config{};
  Device device = Device::host;
  std::string backend = "mpi";
  Conformance conformance{};
  RegionTimes times{};
  nlohmann::json metrics = nlohmann::json::object();
  std::string error{};        // set when the case could not run
  std::string skip_reason{};  // set when the plan skipped it (a swept config that does not fit)
};
nlohmann::json to_json(const CaseRecord& record);

// Facts about the run and the machines, gathered collectively over world.
nlohmann::json describe_run(const std::string& command_line, const std::string& start_time);
nlohmann::json describe_system(Communicator& world, Device device, const std::string& backend);

// Assembles the document (run.summary counted from the cases).
nlohmann::json results_document(nlohmann::json run, nlohmann::json system, const std::vector<CaseRecord>& records);
nlohmann::json results_document(nlohmann::json run, nlohmann::json system, nlohmann::json cases);

// The suspects every case named (perf.metrics.suspects: the screen suite),
// each with "case" set to the case id that named it.
nlohmann::json suspects_of(const nlohmann::json& cases);
// One line for a suspect, e.g. "slow_rank rank 7 (host a, gpu 3): tflops 41.9
// against the class median 74.1 (host); rule: ...".
std::string describe_suspect(const nlohmann::json& suspect);

// Throws UsageError unless dir exists (or can be created) and a file can be
// created in it (a probe file is created and removed: permissions alone do
// not tell, e.g. /proc or a read-only mount as root).
void require_writable_dir(const std::string& dir, const std::string& option);
// The same for a file to be written: path names a file whose folder exists
// (or can be created) and takes a new file.
void require_writable_file(const std::string& path, const std::string& option);

// A sextant results file read for `option` (e.g. "--baseline"); throws
// UsageError naming the option where the file is unreadable, not JSON, or
// not a results document (schema sextant.result/1 with a cases array).
nlohmann::json read_results_file(const std::string& path, const std::string& option);
// The same for --junit's target (a folder, or a file name in a folder).
void require_writable_junit(const std::string& target);

// The path of a run's results without extension: DIR/sextant-<run id>, with
// ':' replaced (run ids are "<start>-<host>-<pid>"). The journal is
// <base>.journal, the results <base>.json.
std::string results_base(const std::string& dir, const std::string& run_id);
// Writes doc as <base>.json (or <base>-N.json when taken: never over another
// run's file), atomically, and returns the path.
std::string write_results_at(const nlohmann::json& doc, const std::string& base);
// Writes doc into dir under the run's unique name and returns the path.
std::string write_results(const nlohmann::json& doc, const std::string& dir);

// JUnit XML of a results document, one testcase per case; failures carry
// errors and bounds. An incomplete run adds a "run complete" testcase in
// error carrying run.incomplete_reason. `target` is a folder (one that exists, or a path ending
// in '/'): the file is <folder>/sextant-<run id>.xml, named like the results;
// or a file name: used when free, otherwise the run id joins the name
// (junit.xml -> junit-<run id>.xml). Never over another file. Returns the path.
std::string write_junit(const nlohmann::json& doc, const std::string& target);

std::string iso_time_now();

}  // namespace sextant
