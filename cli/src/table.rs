//! A small column formatter for human output: every column as wide as its widest cell, two
//! spaces between columns, and no padding after the last one (so lines carry no trailing blanks).

/// Rows of cells under an optional header.
#[derive(Debug, Default)]
pub struct Table {
    header: Option<Vec<String>>,
    rows: Vec<Line>,
}

#[derive(Debug)]
enum Line {
    Cells(Vec<String>),
    /// Free text starting at a column and running past the table's width: a long message
    /// that should not widen the columns of every other row.
    Spanning {
        column: usize,
        text: String,
    },
}

impl Table {
    /// A table whose first line is `header`.
    pub fn with_header<I, S>(header: I) -> Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            header: Some(header.into_iter().map(Into::into).collect()),
            rows: Vec::new(),
        }
    }

    /// A table without a header: key/value lists.
    pub fn new() -> Table {
        Table::default()
    }

    /// Appends a row. Rows may have fewer cells than others; the missing ones are empty.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(Line::Cells(cells.into_iter().map(Into::into).collect()));
    }

    /// Appends a line of free text that starts where column `column` starts (0 for the first)
    /// and does not count toward any column's width.
    pub fn spanning_row(&mut self, column: usize, text: impl Into<String>) {
        self.rows.push(Line::Spanning {
            column,
            text: text.into(),
        });
    }

    /// The table, each line prefixed with `indent` and ended with a newline.
    pub fn render(&self, indent: &str) -> String {
        let cell_lines = || {
            self.header.iter().chain(self.rows.iter().filter_map(|line| match line {
                Line::Cells(cells) => Some(cells),
                Line::Spanning { .. } => None,
            }))
        };
        let columns = cell_lines().map(Vec::len).max().unwrap_or(0);
        // Width in characters, not bytes, so that names such as "Radeon™" line up.
        let mut widths = vec![0usize; columns];
        for line in cell_lines() {
            for (column, cell) in line.iter().enumerate() {
                widths[column] = widths[column].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let header = self.header.as_ref().map(|cells| Line::Cells(cells.clone()));
        for line in header.iter().chain(self.rows.iter()) {
            let line = match line {
                Line::Cells(cells) => cells,
                Line::Spanning { column, text } => {
                    let start: usize = widths.iter().take(*column).map(|width| width + 2).sum();
                    out.push_str(indent);
                    out.push_str(&" ".repeat(start));
                    out.push_str(text.trim_end());
                    out.push('\n');
                    continue;
                }
            };
            let mut text = String::from(indent);
            for (column, cell) in line.iter().enumerate() {
                if column > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                let padding = widths[column].saturating_sub(cell.chars().count());
                text.push_str(&" ".repeat(padding));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_lines_have_no_trailing_blanks() {
        let mut table = Table::with_header(["A", "LONG HEADER", "C"]);
        table.row(["wide cell", "x", ""]);
        table.row(["é", "y"]);
        assert_eq!(
            table.render("  "),
            "  A          LONG HEADER  C\n  wide cell  x\n  é          y\n"
        );
    }

    #[test]
    fn spanning_rows_start_at_their_column_and_do_not_widen_it() {
        let mut table = Table::with_header(["A", "B", "C"]);
        table.row(["aa", "b", "c"]);
        table.spanning_row(1, "a long message that overflows");
        assert_eq!(
            table.render(""),
            "A   B  C\naa  b  c\n    a long message that overflows\n"
        );
    }

    #[test]
    fn an_empty_table_renders_its_header_only() {
        let table = Table::with_header(["ONE", "TWO"]);
        assert_eq!(table.render(""), "ONE  TWO\n");
        assert_eq!(Table::new().render(""), "");
    }
}
