// How `kvtier ctl` prints: JSON for scripts (--json), and for people aligned "name  value" lines
// and tables with a header row. Byte counts show the exact number and a readable size, so the
// figures can be both read and grepped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace kvtier::cli {

// "67108864 (64.0 MiB)".
std::string BytesText(uint64_t bytes);
// "12.5%" of part/whole; "-" when whole is 0.
std::string PercentText(double part, double whole);
// A JSON scalar as a person reads it: strings unquoted, integers without ".0".
std::string ScalarText(const nlohmann::json& value);

// Pretty-printed JSON and a newline.
void PrintJson(std::ostream& out, const nlohmann::json& j);

// "name  value" lines, the values aligned in one column.
using Fields = std::vector<std::pair<std::string, std::string>>;
void PrintFields(std::ostream& out, const Fields& fields);

// Every scalar member of `object` (nested objects as "outer.inner"), in the object's order;
// arrays are left out (callers print them as tables). Members named *_bytes get BytesText.
Fields ScalarFields(const nlohmann::json& object, const std::string& prefix = "");

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t rows() const { return rows_.size(); }
  // Columns padded to their widest cell, separated by two spaces.
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kvtier::cli
