#include "io/table.h"

#include <algorithm>

namespace unipool::io {

std::vector<size_t> Table::Widths() const {
  std::vector<size_t> width(rows_[0].size(), 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  return width;
}

std::string Table::Row(const std::vector<std::string>& cells, std::vector<size_t>& widths) {
  widths.resize(std::max(widths.size(), cells.size()), 0);
  std::string line;
  for (size_t c = 0; c < cells.size(); ++c) {
    widths[c] = std::max(widths[c], cells[c].size());
    line += cells[c];
    if (c + 1 < cells.size()) line += std::string(widths[c] - cells[c].size() + 3, ' ');
  }
  return line + "\n";
}

std::string Table::Render() const {
  std::vector<size_t> width = Widths();
  std::string out;
  for (const auto& row : rows_) out += Row(row, width);
  return out;
}

}  // namespace unipool::io
