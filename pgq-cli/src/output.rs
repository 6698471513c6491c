//! What commands print: aligned tables for people, one JSON document for scripts. No colours,
//! so that output reads the same on a terminal, in a pipe and in a log.

use std::fmt::Write as _;
use std::io::Write;

use chrono::{DateTime, Utc};

/// Prints `value` as one line of JSON. serde_json escapes only the C0 controls: the
/// characters a terminal may still act on ([`hidden`]) are written as `\u` escapes too, which
/// every JSON reader reads back as they were (they occur only inside strings).
pub(crate) fn json(value: &serde_json::Value) -> std::io::Result<()> {
    unless_closed(writeln!(std::io::stdout().lock(), "{}", json_text(value)))
}

fn json_text(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(escaped, "\\u{unit:04x}");
            }
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// A character a terminal may act on or that reorders or hides text, besides the C0 controls:
/// DEL and the C1 controls (U+009B starts an escape sequence on some terminals), the
/// bidirectional marks, overrides and isolates, the zero-width space and word joiners, and the
/// line and paragraph separators. The zero-width joiner and non-joiner stay: scripts and emoji
/// need them.
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{7f}'..='\u{9f}'
        | '\u{200b}'
        | '\u{200e}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}'
        | '\u{feff}')
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
            if c.is_control() || hidden(c) {
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
        .map(|c| if c.is_control() || hidden(c) { ' ' } else { c })
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
    use super::{json_text, printable, short};

    #[test]
    fn json_escapes_what_a_terminal_acts_on_and_reads_back_the_same() {
        let value = serde_json::json!({"error": "\u{9b}2J\u{7f} \u{202e}exe \u{1b}[0m 東京 😀"});
        let text = json_text(&value);
        assert!(
            !text.contains('\u{9b}') && !text.contains('\u{202e}'),
            "{text}"
        );
        assert!(text.contains("\\u009b") && text.contains("\\u202e") && text.contains("\\u007f"));
        assert!(text.contains("東京 😀"), "{text}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            value
        );
    }

    #[test]
    fn control_characters_are_written_as_their_escapes() {
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}\nnext"),
            "\\u{1b}]0;pwned\\u{7}\\nnext"
        );
        assert_eq!(
            printable("café · 東京 · 👨\u{200d}👩\u{200d}👧"),
            "café · 東京 · 👨\u{200d}👩\u{200d}👧"
        );
        assert_eq!(
            printable("\u{9b}2J \u{202e}txt.exe \u{200b}"),
            "\\u{9b}2J \\u{202e}txt.exe \\u{200b}"
        );
    }

    #[test]
    fn long_and_multi_line_text_is_cut_to_one_line() {
        assert_eq!(short("a\nb", 10), "a b");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(short("abcd", 4), "abcd");
    }
}
