//! The one table style of the subcommands' human output: a head line of `#`-marked column
//! names, then a line per row; each column as wide as its widest cell (so a long cell moves
//! the next column over instead of running into it), two spaces between columns, every line
//! indented by one space and without trailing blanks.

/// A table being filled: rows are added, then it is rendered whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names (written as given: `#check`, `ns/CQE[median]`).
    pub(crate) fn new(head: &[&str]) -> Table {
        Table { head: head.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    /// Adds a row: one cell per column (missing cells are blank, extra ones are kept).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The head line and one line per row.
    pub(crate) fn lines(&self) -> Vec<String> {
        let columns = self.rows.iter().map(Vec::len).chain([self.head.len()]).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in std::iter::once(&self.head).chain(&self.rows) {
            for (w, cell) in widths.iter_mut().zip(line) {
                *w = (*w).max(cell.chars().count());
            }
        }
        std::iter::once(&self.head)
            .chain(&self.rows)
            .map(|cells| {
                let mut s = String::from(" ");
                for (i, w) in widths.iter().enumerate() {
                    let cell = cells.get(i).map_or("", String::as_str);
                    s.push_str(cell);
                    if i + 1 < columns {
                        let pad = w - cell.chars().count() + 2;
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                s.trim_end().to_owned()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_cell_widens_its_column_and_the_next_column_still_lines_up() {
        let mut t = Table::new(&["#check", "#result", "#reason"]);
        t.row(vec!["rc_send".into(), "pass".into(), "fine".into()]);
        t.row(vec!["a_check_with_a_much_longer_name".into(), "skip".into(), "why \u{2192} not".into()]);
        let lines = t.lines();
        let at = |l: &str, w: &str| l.find(w).map(|b| l[..b].chars().count());
        let col = at(&lines[0], "#result");
        assert_eq!(at(&lines[1], "pass"), col, "{lines:?}");
        assert_eq!(at(&lines[2], "skip"), col, "{lines:?}");
        assert_eq!(at(&lines[0], "#reason"), at(&lines[2], "why"), "{lines:?}");
        assert!(lines.iter().all(|l| l.starts_with(' ') && !l.ends_with(' ')), "{lines:?}");
    }
}
