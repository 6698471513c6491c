//! What commands print: aligned tables for people, one JSON document for scripts. No colours,
//! so that output reads the same on a terminal, in a pipe and in a log.

use std::io::Write;

use chrono::{DateTime, Utc};

/// Prints `value` as one line of JSON.
pub(crate) fn json(value: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    unless_closed(serde_json::to_writer(&mut out, value).map_err(std::io::Error::from))?;
    unless_closed(writeln!(out))
}

/// Prints a line of text.
pub(crate) fn line(text: &str) -> std::io::Result<()> {
    unless_closed(writeln!(std::io::stdout().lock(), "{text}"))
}

/// A write to a reader that has gone (`pgq jobs list | head -1`) is not the command's failure:
/// what it did stands, and its exit code says how that went. Any other write error is.
fn unless_closed(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

/// Prints rows under a header, each column as wide as its widest cell, every cell
/// [`printable`].
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = std::io::stdout().lock();
    let header: Vec<String> = header.iter().map(|h| h.to_uppercase()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        unless_closed(writeln!(out, "{}", cells.join("  ").trim_end()))?;
    }
    Ok(())
}

/// Text from the database as a terminal may show it: each control character (an escape
/// sequence's start, a line break) written as its escape, `\u{1b}`, `\n`, so that no stored
/// value can move the cursor, retitle the window or forge a line of output.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A time as people read it, to the second.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// An optional time, or `-`.
pub(crate) fn maybe_time(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(|| "-".into(), time)
}

/// Text cut to `max` characters, on one line.
pub(crate) fn short(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::{printable, short};

    #[test]
    fn control_characters_are_written_as_their_escapes() {
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}\nnext"),
            "\\u{1b}]0;pwned\\u{7}\\nnext"
        );
        assert_eq!(printable("café · 東京"), "café · 東京");
    }

    #[test]
    fn long_and_multi_line_text_is_cut_to_one_line() {
        assert_eq!(short("a\nb", 10), "a b");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(short("abcd", 4), "abcd");
    }
}
