//! Text pgq stores on a job (error messages, stages), made storable whatever it holds:
//! PostgreSQL's text cannot hold a NUL character, and each column has a byte limit. A stored
//! value is never refused for its bytes, so an attempt's outcome is never lost to them.

use std::borrow::Cow;

/// What a NUL character becomes.
const NUL_STANDS_IN: char = '\u{FFFD}';

/// `text` with NUL characters replaced, cut to at most `max` bytes at a character boundary.
pub(crate) fn storable(text: &str, max: usize) -> Cow<'_, str> {
    let text = if text.contains('\0') {
        Cow::Owned(text.replace('\0', &NUL_STANDS_IN.to_string()))
    } else {
        Cow::Borrowed(text)
    };
    if text.len() <= max {
        return text;
    }
    let end = floor_char_boundary(&text, max);
    match text {
        Cow::Borrowed(text) => Cow::Borrowed(&text[..end]),
        Cow::Owned(mut text) => {
            text.truncate(end);
            Cow::Owned(text)
        }
    }
}

/// `text` in ASCII, each other character written as its code point (`\u{e9}`), cut to at most
/// `max` bytes: what a database whose encoding lacks some of `text`'s characters (`LATIN1`)
/// stores instead, since every server encoding holds ASCII.
pub(crate) fn ascii(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            use std::fmt::Write as _;
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        if out.len() >= max {
            break;
        }
    }
    out.truncate(max);
    out
}

/// How much of an input a message repeats.
const ECHOED_CHARS: usize = 80;

/// `input` as an error message repeats it: quoted and escaped, and cut to its first
/// [`ECHOED_CHARS`] characters, so that a message stays readable whatever was sent.
pub(crate) fn echoed(input: &str) -> String {
    match input.char_indices().nth(ECHOED_CHARS) {
        Some((end, _)) => format!("{:?}…", &input[..end]),
        None => format!("{input:?}"),
    }
}

/// The largest index at most `at` that falls on a character boundary of `text`.
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Whether serialized JSON holds a NUL character (`\u0000` in a string or a key), which
/// PostgreSQL's `jsonb` refuses.
pub(crate) fn json_has_nul(json: &str) -> bool {
    let bytes = json.as_bytes();
    json.match_indices("u0000").any(|(at, _)| {
        let backslashes = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        backslashes % 2 == 1
    })
}

/// Whether serialized JSON nests arrays and objects deeper than `max` levels. Brackets inside
/// strings are text: a scan of the bytes that tracks strings and their escapes.
pub(crate) fn json_nests_deeper_than(json: &str, max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in json.as_bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{ascii, echoed, json_has_nul, json_nests_deeper_than, storable};

    #[test]
    fn ascii_writes_other_characters_as_code_points_within_the_limit() {
        assert_eq!(
            ascii("Zoë → \u{FFFD}", 100),
            "Zo\\u{eb} \\u{2192} \\u{fffd}"
        );
        assert_eq!(ascii("plain", 100), "plain");
        assert_eq!(ascii("ééé", 12), "\\u{e9}\\u{e9}");
        assert_eq!(ascii("ééé", 12).len(), 12);
        assert_eq!(ascii("abcdef", 3), "abc");
    }

    #[test]
    fn an_echoed_input_is_quoted_and_cut_to_80_characters() {
        assert_eq!(echoed("7\n"), "\"7\\n\"");
        let long = "é".repeat(5_000);
        let shown = echoed(&long);
        assert_eq!(shown.matches('é').count(), 80);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn nul_characters_are_replaced() {
        assert_eq!(storable("a\0b", 100), "a\u{FFFD}b");
        assert_eq!(storable("plain", 100), "plain");
    }

    #[test]
    fn long_text_is_cut_at_a_char_boundary() {
        assert_eq!(storable("resize", 1024), "resize");
        let long = "é".repeat(600); // 1 200 bytes
        let cut = storable(&long, 1024);
        assert_eq!(cut.len(), 1024);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(storable("aé", 2), "a");
        assert_eq!(storable("\0\0\0", 4), "\u{FFFD}");
    }

    #[test]
    fn a_nul_in_json_is_found_and_an_escaped_backslash_is_not_one() {
        let with_nul = serde_json::to_string(&"a\0b").unwrap();
        assert!(json_has_nul(&with_nul));
        let key = serde_json::to_string(&std::collections::HashMap::from([("k\0", 1)])).unwrap();
        assert!(json_has_nul(&key));
        let backslash = serde_json::to_string(&"a\\u0000b").unwrap();
        assert!(!json_has_nul(&backslash), "{backslash}");
        assert!(!json_has_nul(r#"{"u0000": 1}"#));
    }

    #[test]
    fn nesting_counts_arrays_and_objects_outside_strings() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!json_nests_deeper_than(&nested(3), 3));
        assert!(json_nests_deeper_than(&nested(4), 3));
        assert!(!json_nests_deeper_than(r#"{"a": "[[[[{{{{", "b": [1]}"#, 2));
        assert!(!json_nests_deeper_than(r#"{"a": "\\\"[[[["}"#, 1));
        assert!(json_nests_deeper_than(r#"{"a": {"b": [{}]}}"#, 3));
    }

    /// The limit pgq refuses payloads beyond is what the worker's decoder reads.
    #[test]
    fn the_payload_depth_limit_is_serde_jsons() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let max = crate::limits::MAX_PAYLOAD_DEPTH;
        assert!(serde_json::from_str::<serde_json::Value>(&nested(max)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(max + 1)).is_err());
    }
}
