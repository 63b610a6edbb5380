#pragma once
// Table: a tiny aligned-column text formatter for the human output of `rsc`. Cells are
// left-aligned, columns are separated by two spaces, and lines carry no trailing blanks.
// Widths count bytes: every name the coordinator accepts is ASCII (docs/protocol.md §11).

#include <string>
#include <vector>

namespace rsc::cli {

class Table {
 public:
  // An empty header gives a table without a header row (key/value listings).
  explicit Table(std::vector<std::string> header = {});

  // Short rows are padded with empty cells; long rows widen the table.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Every line ends with '\n'.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace rsc::cli
