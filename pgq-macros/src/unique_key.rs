//! `unique_key = "welcome:{user_id}"` and `concurrency_key = "{customer_id}"`: text with
//! `{field}` placeholders and `{{`/`}}` escapes.

use std::fmt;

/// A parsed `unique_key` or `concurrency_key` template.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Template {
    segments: Vec<Segment>,
}

/// A run of text or one placeholder.
#[derive(Debug, PartialEq, Eq)]
enum Segment {
    /// Text as it appears in the key, escapes resolved.
    Text(String),
    /// `{name}`.
    Field(String),
}

/// Why a key template was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TemplateError {
    /// `""`.
    Empty,
    /// A `{` with no `}` after it.
    Unclosed,
    /// A `}` with no `{` before it.
    Unmatched,
    /// `{}`.
    EmptyPlaceholder,
    /// `{0}`, `{a b}`, `{id:?}`: the text between the braces.
    NotAFieldName(String),
    /// A NUL character, which PostgreSQL cannot store.
    Nul,
    /// Fixed text of more bytes than any key may have: its byte count.
    TooLong(usize),
}

/// The most bytes a key has (`pgq_core::limits::MAX_UNIQUE_KEY_BYTES` and
/// `MAX_CONCURRENCY_KEY_BYTES`): a template whose fixed text alone is longer makes no key an
/// enqueue accepts.
const MAX_KEY_BYTES: usize = 1024;

impl TemplateError {
    /// The message for the template of `key` (`unique_key`, `concurrency_key`).
    pub(crate) fn describe(&self, key: &str) -> String {
        match self {
            Self::Empty => format!("{key} must not be empty"),
            Self::Unclosed => {
                format!("{key} has a `{{` with no closing `}}`; write `{{{{` for a literal `{{`")
            }
            Self::Unmatched => {
                format!("{key} has a `}}` with no opening `{{`; write `}}}}` for a literal `}}`")
            }
            Self::EmptyPlaceholder => {
                format!("{key} has an empty placeholder `{{}}`; name a field, as in `{{user_id}}`")
            }
            Self::NotAFieldName(text) => {
                format!("{key} placeholder `{{{text}}}` must be a field name, as in `{{user_id}}`")
            }
            Self::Nul => format!("{key} holds a NUL character, which PostgreSQL cannot store"),
            Self::TooLong(bytes) => format!(
                "{key} has {bytes} bytes of fixed text; a key has at most {MAX_KEY_BYTES} bytes"
            ),
        }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe("unique_key"))
    }
}

impl Template {
    pub(crate) fn parse(text: &str) -> Result<Self, TemplateError> {
        if text.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.next_if_eq(&'{').is_some() => literal.push('{'),
                '}' if chars.next_if_eq(&'}').is_some() => literal.push('}'),
                '}' => return Err(TemplateError::Unmatched),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(TemplateError::Unclosed),
                        }
                    }
                    if name.is_empty() {
                        return Err(TemplateError::EmptyPlaceholder);
                    }
                    if !is_field_name(&name) {
                        return Err(TemplateError::NotAFieldName(name));
                    }
                    if !literal.is_empty() {
                        segments.push(Segment::Text(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Field(name));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Text(literal));
        }
        let texts = segments.iter().filter_map(|segment| match segment {
            Segment::Text(text) => Some(text.as_str()),
            Segment::Field(_) => None,
        });
        if texts.clone().any(|text| text.contains('\0')) {
            return Err(TemplateError::Nul);
        }
        let bytes: usize = texts.map(str::len).sum();
        if bytes > MAX_KEY_BYTES {
            return Err(TemplateError::TooLong(bytes));
        }
        Ok(Self { segments })
    }

    /// The placeholders, in order, repeats included.
    pub(crate) fn fields(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|segment| match segment {
            Segment::Field(name) => Some(name.as_str()),
            Segment::Text(_) => None,
        })
    }

    /// The template as a `format!` string: each placeholder becomes `{}`, to be filled with
    /// [`Template::fields`] in order.
    pub(crate) fn format_string(&self) -> String {
        let mut format = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Text(text) => {
                    format.push_str(&text.replace('{', "{{").replace('}', "}}"));
                }
                Segment::Field(_) => format.push_str("{}"),
            }
        }
        format
    }
}

/// Whether `text` could name a field: an identifier, not `_`.
fn is_field_name(text: &str) -> bool {
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_alphabetic() || first == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && text != "_"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<String> {
        Template::parse(text)
            .unwrap()
            .fields()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn placeholders_and_text() {
        let template = Template::parse("welcome:{user_id}:{email}").unwrap();
        assert_eq!(template.format_string(), "welcome:{}:{}");
        assert_eq!(fields("welcome:{user_id}:{email}"), ["user_id", "email"]);
        assert_eq!(fields("{a}{a}"), ["a", "a"]);
        assert_eq!(fields("{_a1}{é}"), ["_a1", "é"]);
    }

    #[test]
    fn text_no_key_may_hold_is_refused() {
        assert_eq!(Template::parse("a\0b:{id}").err(), Some(TemplateError::Nul));
        let longest = "x".repeat(MAX_KEY_BYTES);
        assert!(Template::parse(&longest).is_ok());
        assert!(Template::parse(&format!("{longest}{{id}}")).is_ok());
        assert_eq!(
            Template::parse(&format!("{longest}:{{id}}")).err(),
            Some(TemplateError::TooLong(MAX_KEY_BYTES + 1))
        );
        // An escaped brace is one byte of the key.
        assert!(Template::parse(&format!("{}{{{{", "x".repeat(MAX_KEY_BYTES - 1))).is_ok());
    }

    #[test]
    fn escapes_stay_escaped_in_the_format_string() {
        let template = Template::parse("{{literal}}:{id}}}").unwrap();
        assert_eq!(template.format_string(), "{{literal}}:{}}}");
        assert_eq!(fields("{{literal}}:{id}}}"), ["id"]);
        assert_eq!(format!("{{literal}}:{}}}", 7), "{literal}:7}");
    }

    #[test]
    fn no_placeholders() {
        let template = Template::parse("singleton").unwrap();
        assert_eq!(template.format_string(), "singleton");
        assert_eq!(template.fields().count(), 0);
    }

    #[test]
    fn bad_templates() {
        use TemplateError::*;
        let cases = [
            ("", Empty),
            ("a{id", Unclosed),
            ("{", Unclosed),
            ("a}b", Unmatched),
            ("{id}}", Unmatched),
            ("{}", EmptyPlaceholder),
            ("{0}", NotAFieldName("0".into())),
            ("{ id }", NotAFieldName(" id ".into())),
            ("{id:?}", NotAFieldName("id:?".into())),
            ("{_}", NotAFieldName("_".into())),
            ("{a{b}", NotAFieldName("a{b".into())),
            ("{self.id}", NotAFieldName("self.id".into())),
        ];
        for (text, error) in cases {
            assert_eq!(Template::parse(text), Err(error), "{text:?}");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            TemplateError::NotAFieldName("id:?".into()).to_string(),
            "unique_key placeholder `{id:?}` must be a field name, as in `{user_id}`"
        );
        assert_eq!(
            TemplateError::Unclosed.to_string(),
            "unique_key has a `{` with no closing `}`; write `{{` for a literal `{`"
        );
        assert_eq!(
            TemplateError::Unmatched.describe("concurrency_key"),
            "concurrency_key has a `}` with no opening `{`; write `}}` for a literal `}`"
        );
    }
}
