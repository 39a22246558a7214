//! A small column formatter for human output: every column as wide as its widest cell, two
//! spaces between columns, and no padding after the last one (so lines carry no trailing blanks).

/// Rows of cells under an optional header.
#[derive(Debug, Default)]
pub struct Table {
    header: Option<Vec<String>>,
    rows: Vec<Vec<String>>,
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
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table, each line prefixed with `indent` and ended with a newline.
    pub fn render(&self, indent: &str) -> String {
        let lines: Vec<&Vec<String>> = self.header.iter().chain(self.rows.iter()).collect();
        let columns = lines.iter().map(|line| line.len()).max().unwrap_or(0);
        // Width in characters, not bytes, so that names such as "Radeon™" line up.
        let mut widths = vec![0usize; columns];
        for line in &lines {
            for (column, cell) in line.iter().enumerate() {
                widths[column] = widths[column].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in lines {
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
    fn an_empty_table_renders_its_header_only() {
        let table = Table::with_header(["ONE", "TWO"]);
        assert!(table.is_empty());
        assert_eq!(table.render(""), "ONE  TWO\n");
        assert_eq!(Table::new().render(""), "");
    }
}
