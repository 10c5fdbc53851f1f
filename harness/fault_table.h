// Planted faults, one typed table per family, on the model of
// kernel_fault.h: an enum whose first value is `none`, and one row per fault
// with its name as --fault takes it, what it breaks, and where it can show.
// "Where" is a line for listings and docs and a predicate over the family's
// Site (what the family knows of one config: its groups, masks, sizes),
// which a sweep asks before it plants the fault in a config. Names are
// compared in parse() and nowhere else; kernels read the enum.
//
//   const FaultTable<Fault, FaultSite>& faults();   // the family's table
//   Fault f = faults().parse(config.fault);         // "" -> Fault::none
//   if (!faults().shows(f, site)) continue;         // a sweep skips the config
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

// What listings and docs say of one planted fault.
struct FaultDoc {
  std::string family;      // the table it comes from ("cp", "moe", ...)
  std::string name;        // as --fault takes it
  std::string breaks;      // what it breaks, one line
  std::string shows_when;  // where it can change a result, one line
  double magnitude = 0;    // a fault of some size (--fault-magnitude): its default; 0: a fault of none
};

template <class Fault, class Site>
struct FaultRow {
  Fault fault;
  const char* name;
  const char* breaks;
  const char* shows_when;
  bool (*shows)(const Site&) = nullptr;  // nullptr: wherever the family runs
  double magnitude = 0;                  // the default size of a fault that has one (0: none)
};

template <class Fault, class Site>
class FaultTable {
 public:
  using Row = FaultRow<Fault, Site>;
  FaultTable(std::string family, std::vector<Row> rows) : family_(std::move(family)), rows_(std::move(rows)) {}

  const std::string& family() const { return family_; }
  const std::vector<Row>& rows() const { return rows_; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Row& r : rows_) out.push_back(r.name);
    return out;
  }
  std::vector<FaultDoc> docs() const {
    std::vector<FaultDoc> out;
    for (const Row& r : rows_) out.push_back({family_, r.name, r.breaks, r.shows_when, r.magnitude});
    return out;
  }
  // The faults that show at one of `sites` at least: the list of a case
  // whose configs look like those sites.
  std::vector<FaultDoc> docs_where(std::initializer_list<Site> sites) const {
    std::vector<FaultDoc> out;
    for (const Row& r : rows_) {
      bool any = !r.shows;
      for (const Site& s : sites) any = any || r.shows(s);
      if (any) out.push_back({family_, r.name, r.breaks, r.shows_when, r.magnitude});
    }
    return out;
  }

  std::optional<Fault> find(const std::string& name) const {
    for (const Row& r : rows_)
      if (name == r.name) return r.fault;
    return std::nullopt;
  }
  // "" -> Fault::none; a name the family does not know -> UsageError.
  Fault parse(const std::string& name) const {
    if (name.empty()) return Fault::none;
    if (std::optional<Fault> f = find(name)) return *f;
    throw UsageError(cat("--fault '", name, "' is not a ", family_, " fault (known: ", join(names(), ", "), ")"));
  }
  const Row& row(Fault fault) const {
    for (const Row& r : rows_)
      if (r.fault == fault) return r;
    throw RuntimeError(cat("no row for ", family_, " fault ", static_cast<int>(fault)));
  }
  // "" for none.
  std::string name(Fault fault) const { return fault == Fault::none ? std::string() : std::string(row(fault).name); }
  // Whether the fault can change a result of the config at `site` (none: true).
  bool shows(Fault fault, const Site& site) const {
    if (fault == Fault::none) return true;
    const Row& r = row(fault);
    return !r.shows || r.shows(site);
  }

 private:
  std::string family_;
  std::vector<Row> rows_;
};

}  // namespace sextant
