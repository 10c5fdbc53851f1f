#include "harness/case.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

std::string CaseConfig::id() const {
  std::string out = cat(suite, "/", name, " ranks=", ranks, " ", dtype_name(dtype));
  std::string conf = to_string(parallel);
  for (char& c : conf) c = c == ' ' ? '-' : c;
  out += " " + conf;
  for (auto it = params.begin(); it != params.end(); ++it) {
    std::string value = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    out += cat(" ", it.key(), "=", value);
  }
  if (!fault_name().empty()) out += " fault=" + fault_name();
  if (fault_magnitude != 0) out += cat(" fault_magnitude=", fault_magnitude);
  return out;
}

std::string CaseConfig::fault_name() const {
  return kernel_fault != KernelFault::none ? kernel_fault_info(kernel_fault).name : fault;
}

void SweepRequest::require_declared(const std::string& key) const {
  if (declared && !find_option(*declared, key))
    throw RuntimeError(cat("a case reads option '", key, "' without declaring it in its CaseTable::options"));
}

void Registry::add(CaseDef def) {
  for (const CaseDef& c : cases_)
    if (c.full_name() == def.full_name()) throw RuntimeError("case registered twice: " + def.full_name());
  cases_.push_back(std::move(def));
}

std::vector<std::string> Registry::suites() const {
  std::vector<std::string> out;
  for (const CaseDef& c : cases_)
    if (std::find(out.begin(), out.end(), c.suite) == out.end()) out.push_back(c.suite);
  return out;
}

std::vector<const CaseDef*> Registry::select(const std::vector<std::string>& patterns) const {
  std::vector<const CaseDef*> out;
  auto add = [&](const CaseDef& c) {
    if (std::find(out.begin(), out.end(), &c) == out.end()) out.push_back(&c);
  };
  if (patterns.empty()) {
    for (const CaseDef& c : cases_) add(c);
    return out;
  }
  for (const std::string& p : patterns) {
    size_t slash = p.find('/');
    std::string suite = p.substr(0, slash);
    std::string name = slash == std::string::npos ? "" : p.substr(slash + 1);
    bool suite_known = false, matched = false;
    for (const CaseDef& c : cases_) {
      if (c.suite != suite) continue;
      suite_known = true;
      if (name.empty() || c.name == name) {
        add(c);
        matched = true;
      }
    }
    if (!suite_known) throw UsageError(cat("unknown suite '", suite, "': known suites are ", join(suites(), ", ")));
    if (!matched) throw UsageError(cat("unknown case '", p, "': run 'sextant list ", suite, "' to see its cases"));
  }
  return out;
}

std::vector<std::string> CaseDef::fault_names() const {
  std::vector<std::string> out;
  for (const FaultDoc& f : faults) out.push_back(f.name);
  return out;
}

bool CaseDef::plants(const std::string& fault) const { return fault_doc(fault) != nullptr; }

const FaultDoc* CaseDef::fault_doc(const std::string& fault) const {
  for (const FaultDoc& f : faults)
    if (f.name == fault) return &f;
  return nullptr;
}

namespace {
struct Registration {
  int suite_order, case_order;
  CaseDef (*make)() = nullptr;
  std::vector<CaseDef> (*make_all)() = nullptr;  // a table's cases, in its order
};
std::vector<Registration>& registrations() {
  static std::vector<Registration> all;
  return all;
}
}  // namespace

CaseRegistrar::CaseRegistrar(int suite_order, int case_order, CaseDef (*make)()) {
  registrations().push_back({suite_order, case_order, make, nullptr});
}

CaseRegistrar::CaseRegistrar(int suite_order, int case_order, std::vector<CaseDef> (*make_all)()) {
  registrations().push_back({suite_order, case_order, nullptr, make_all});
}

Registry all_suites() {
  std::vector<Registration> sorted = registrations();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Registration& a, const Registration& b) {
    return std::tie(a.suite_order, a.case_order) < std::tie(b.suite_order, b.case_order);
  });
  Registry r;
  for (const Registration& reg : sorted) {
    if (reg.make) r.add(reg.make());
    else
      for (CaseDef& def : reg.make_all()) r.add(std::move(def));
  }
  return r;
}

}  // namespace sextant
