#include "cli/ctl_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvtier::cli {

std::string BytesText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{} ({:.1f} {})", bytes, v, kUnits[unit]);
}

std::string PercentText(double part, double whole) {
  if (whole <= 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * part / whole);
}

std::string ScalarText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "-";
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 1e15)
      return fmt::format("{}", static_cast<int64_t>(d));
    return fmt::format("{:.4g}", d);
  }
  return value.dump();  // integers, booleans
}

void PrintJson(std::ostream& out, const nlohmann::json& j) { out << j.dump(2) << "\n"; }

void PrintFields(std::ostream& out, const Fields& fields) {
  size_t width = 0;
  for (const auto& [name, value] : fields) width = std::max(width, name.size());
  for (const auto& [name, value] : fields) {
    out << name << std::string(width - name.size() + 2, ' ') << value << "\n";
  }
}

Fields ScalarFields(const nlohmann::json& object, const std::string& prefix) {
  Fields out;
  for (const auto& [name, value] : object.items()) {
    const std::string full = prefix + name;
    if (value.is_object()) {
      Fields inner = ScalarFields(value, full + ".");
      out.insert(out.end(), inner.begin(), inner.end());
    } else if (!value.is_array()) {
      const bool bytes = name.ends_with("_bytes") && value.is_number_unsigned();
      out.emplace_back(full, bytes ? BytesText(value.get<uint64_t>()) : ScalarText(value));
    }
  }
  return out;
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  };
  print(header_);
  for (const auto& row : rows_) print(row);
}

}  // namespace kvtier::cli
