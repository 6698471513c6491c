//! Decoding a stored payload into its task, and what a payload that does not decode is recorded
//! as: the field path and what was expected, never the value. serde's messages quote the value
//! they met (`invalid type: string "ada@example.com", expected i64`), and a stored error is read
//! by everyone who can see the job, its events and the logs.

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

/// Decodes `json` as a `T`, or says where and why it does not fit, without its values.
pub(crate) fn decode<T: DeserializeOwned>(json: &str) -> Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let serde_message = err.inner().to_string();
        let mut segments: Vec<&Segment> = err.path().iter().collect();
        // The path of an unknown field ends with its name, which is the payload's.
        if serde_message.starts_with("unknown field") {
            segments.pop();
        }
        let message = without_values(&serde_message);
        if segments.is_empty() {
            message
        } else {
            format!("{}: {message}", path_text(&segments))
        }
    })
}

/// A path as serde_path_to_error writes it: `user.tags[1]`. A struct's fields and a map's keys
/// are alike in it, and a map's keys can be data (`prefs.ada@example.com`): a name that could
/// not be a field's (anything but ASCII letters, digits and `_`, or longer than 64 bytes) is
/// written `[key]`.
fn path_text(segments: &[&Segment]) -> String {
    let mut text = String::new();
    for segment in segments {
        if !text.is_empty() && !matches!(segment, Segment::Seq { .. }) {
            text.push('.');
        }
        match segment {
            Segment::Map { key } if !could_be_a_field(key) => text.push_str("[key]"),
            segment => text.push_str(&segment.to_string()),
        }
    }
    text
}

fn could_be_a_field(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// serde's message with the values it quotes left out, and without its position. What it
/// expected comes last and is the type's, so the message is cut at its last ", expected ": a
/// value can hold that text too.
fn without_values(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => message,
    };
    for lead in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(lead)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return format!("{lead}{}, expected {expected}", kind(found));
        }
    }
    // An unknown name is the payload's, not the type's: a map's key can be data.
    for what in ["unknown variant", "unknown field"] {
        if let Some(rest) = message.strip_prefix(what) {
            return match rest.rsplit_once(", expected ") {
                Some((_, expected)) => format!("{what}, expected {expected}"),
                None if rest.ends_with(", there are no variants") => {
                    format!("{what}, there are no variants")
                }
                None if rest.ends_with(", there are no fields") => {
                    format!("{what}, there are no fields")
                }
                None => what.to_owned(),
            };
        }
    }
    message.to_owned()
}

/// `string "secret"` → `string`: what serde's `Unexpected` names, without the value.
fn kind(found: &str) -> &str {
    match found.find([' ', '`', '"']) {
        Some(at) if found[at..].starts_with(" point") => "floating point",
        Some(at) if found[..at].is_empty() => "a value",
        Some(at) => match &found[..at] {
            "unit" | "byte" | "newtype" | "tuple" | "struct" => found,
            kind => kind,
        },
        None => found,
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::decode;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Signup {
        user: User,
        plan: Plan,
        tags: Vec<u32>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct User {
        id: i64,
        email: String,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    enum Plan {
        Free,
        Pro,
    }

    fn error(json: &str) -> String {
        decode::<Signup>(json).unwrap_err()
    }

    #[test]
    fn a_wrong_type_names_the_field_and_the_expected_type_not_the_value() {
        let err = error(r#"{"user": {"id": 1, "email": 42424242}, "plan": "Free", "tags": []}"#);
        assert_eq!(err, "user.email: invalid type: integer, expected a string");
        let err = error(r#"{"user": {"id": "s3cr3t", "email": "x"}, "plan": "Free", "tags": []}"#);
        assert_eq!(err, "user.id: invalid type: string, expected i64");
        assert!(!err.contains("s3cr3t"));
    }

    #[test]
    fn elements_of_sequences_and_unknown_variants_keep_no_value_either() {
        let err = error(r#"{"user": {"id": 1, "email": "x"}, "plan": "Free", "tags": [1, -7]}"#);
        assert_eq!(err, "tags[1]: invalid value: integer, expected u32");
        let err = error(r#"{"user": {"id": 1, "email": "x"}, "plan": "Enterprise", "tags": []}"#);
        assert_eq!(err, "plan: unknown variant, expected `Free` or `Pro`");
        assert!(!err.contains("Enterprise"));
    }

    #[test]
    fn a_value_holding_serdes_own_words_keeps_no_part_of_it() {
        let err = error(
            r#"{"user": {"id": "a, expected SECRET", "email": "x"}, "plan": "Free", "tags": []}"#,
        );
        assert_eq!(err, "user.id: invalid type: string, expected i64");
        let err = error(
            r#"{"user": {"id": 1, "email": "x"}, "plan": "Pro`, expected SECRET", "tags": []}"#,
        );
        assert_eq!(err, "plan: unknown variant, expected `Free` or `Pro`");
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    enum Never {}

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        id: i64,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Empty {}

    #[test]
    fn unknown_names_are_left_out() {
        let err = decode::<Never>(r#""SECRET""#).unwrap_err();
        assert_eq!(err, "unknown variant, there are no variants");
        let err = decode::<Strict>(r#"{"id": 1, "SECRET": 2}"#).unwrap_err();
        assert_eq!(err, "unknown field, expected `id`");
        let err = decode::<Empty>(r#"{"SECRET": 2}"#).unwrap_err();
        assert_eq!(err, "unknown field, there are no fields");
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Preferences {
        limits: std::collections::HashMap<String, u8>,
    }

    #[test]
    fn map_keys_that_could_not_be_field_names_are_left_out() {
        let err = decode::<Preferences>(r#"{"limits": {"ada@example.com": 300}}"#).unwrap_err();
        assert_eq!(err, "limits.[key]: invalid value: integer, expected u8");
        let err = decode::<Preferences>(r#"{"limits": {"2024-01-01": -1}}"#).unwrap_err();
        assert_eq!(err, "limits.[key]: invalid value: integer, expected u8");
        let err = decode::<Preferences>(r#"{"limits": {"daily": "x"}}"#).unwrap_err();
        assert_eq!(err, "limits.daily: invalid type: string, expected u8");
    }

    #[test]
    fn a_missing_field_is_named() {
        let err = error(r#"{"user": {"id": 1}, "plan": "Free", "tags": []}"#);
        assert_eq!(err, "user: missing field `email`");
    }

    #[test]
    fn a_payload_that_fits_decodes() {
        let signup =
            decode::<Signup>(r#"{"user": {"id": 1, "email": "x"}, "plan": "Pro", "tags": [3]}"#)
                .unwrap();
        assert_eq!(signup.tags, vec![3]);
    }
}
