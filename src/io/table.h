// Table: left-aligned text columns sized to their widest cell, the way
// kubectl prints them. Used by every human-readable writer.
#pragma once

#include <string>
#include <vector>

namespace unipool::io {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  // REQUIRES: cells.size() == header size.
  void Add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string Render() const;
  // Each column's width: its widest cell, header included.
  std::vector<size_t> Widths() const;
  // One line of `cells`, each column at least `widths` wide (a watch keeps
  // the columns of the table it printed first). A cell wider than its
  // column widens it in `widths`, so the rows after line up with it.
  static std::string Row(const std::vector<std::string>& cells, std::vector<size_t>& widths);

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace unipool::io
