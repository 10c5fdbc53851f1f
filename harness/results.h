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
  CaseConfig config;
  Device device = Device::host;
  std::string backend = "mpi";
  Conformance conformance;
  RegionTimes times;
  nlohmann::json metrics = nlohmann::json::object();
  std::string error;  // set when the case could not run
  std::string skip_reason;  // set when the plan skipped it (a swept config that does not fit)
};
nlohmann::json to_json(const CaseRecord& record);

// Facts about the run and the machines, gathered collectively over world.
nlohmann::json describe_run(const std::string& command_line, const std::string& start_time);
nlohmann::json describe_system(Communicator& world, Device device, const std::string& backend);

// Assembles the document.
nlohmann::json results_document(nlohmann::json run, nlohmann::json system, const std::vector<CaseRecord>& records);

// Throws UsageError unless dir exists (or can be created) and is writable.
void require_writable_dir(const std::string& dir, const std::string& option);
// Writes doc into dir under a fresh unique name and returns the path.
std::string write_results(const nlohmann::json& doc, const std::string& dir);
// JUnit XML: one testcase per record; failures carry errors and bounds.
void write_junit(const std::vector<CaseRecord>& records, const std::string& path);

std::string iso_time_now();

}  // namespace sextant
