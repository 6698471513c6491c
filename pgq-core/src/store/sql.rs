//! Statement text as the database receives it: written in this layer for schema `pgq`, and
//! rendered once per schema and statement.
//!
//! Rendering does two things. It puts the client's schema where the text says `pgq.` and in the
//! names of pgq's notification channels, so that two pgq instances share a database without
//! seeing each other's jobs. And it qualifies every operator (`OPERATOR(pg_catalog.=)`), every
//! function call (`pg_catalog.now()`) and every cast to a built-in type that is not a keyword
//! (`::pg_catalog.text`), so that nothing another role put on the caller's `search_path` — a
//! look-alike `public.power(integer, integer)`, an operator `*(bigint, interval)` — ever runs
//! inside pgq's statements. Statements are therefore written without `IN`, `BETWEEN`,
//! `IS DISTINCT FROM` and `CASE x WHEN`, whose hidden operators cannot be qualified; and since a
//! qualified operator loses its precedence (`a OPERATOR(+) b OPERATOR(*) c` is `(a + b) * c`),
//! operators of different precedence are never mixed without parentheses. Rendering refuses
//! both.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

/// The schema pgq's statements are written for.
pub(crate) const TEMPLATE_SCHEMA: &str = "pgq";

/// Names written before `(` that are SQL syntax, not function calls.
const NOT_FUNCTIONS: &[&str] = &[
    "rows",
    "all",
    "and",
    "any",
    "array",
    "as",
    "by",
    "coalesce",
    "conflict",
    "exists",
    "extract",
    "filter",
    "from",
    "greatest",
    "in",
    "into",
    "join",
    "least",
    "materialized",
    "not",
    "nullif",
    "on",
    "or",
    "over",
    "returning",
    "row",
    "select",
    "set",
    "then",
    "using",
    "values",
    "when",
    "where",
    "with",
    "else",
    "distinct",
    "lateral",
];

/// Built-in types that are not SQL keywords: a cast to one is resolved on the search path.
const PLAIN_TYPES: &[&str] = &[
    "bool",
    "float8",
    "int2",
    "int4",
    "int8",
    "json",
    "jsonb",
    "text",
    "timestamptz",
    "varchar",
    "xid8",
];

/// Words that end an operand run: operators on either side of one never bind to each other.
const SEGMENT_ENDS: &[&str] = &[
    "and",
    "or",
    "not",
    "when",
    "then",
    "else",
    "end",
    "case",
    "select",
    "from",
    "where",
    "on",
    "as",
    "returning",
    "is",
    "any",
    "all",
    "by",
    "limit",
    "set",
    "filter",
    "desc",
    "asc",
];

/// Operators of one precedence class, which mix freely (left to right, as unqualified).
fn precedence(op: &str) -> u8 {
    match op {
        "*" | "/" | "%" => 1,
        "+" | "-" => 2,
        "<" | ">" | "=" | "<=" | ">=" | "<>" | "!=" => 4,
        _ => 3,
    }
}

/// Keywords after which `*` means all columns, not multiplication.
const STAR_AFTER: &[&str] = &["select", "returning"];

/// Rendered statements, by schema and template, kept for the life of the process: each is
/// rendered once, and there are as many as pgq has statements times the schemas in use.
static RENDERED: LazyLock<RwLock<HashMap<TemplateKey, &'static str>>> =
    LazyLock::new(RwLock::default);

/// A schema, and a template by its address and length.
type TemplateKey = (Arc<str>, usize, usize);

/// `template` rendered for `schema`.
pub(crate) fn statement(schema: &Arc<str>, template: &'static str) -> &'static str {
    let key = (schema.clone(), template.as_ptr() as usize, template.len());
    if let Some(&rendered) = RENDERED
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&key)
    {
        return rendered;
    }
    let rendered: &'static str = Box::leak(render(template, schema).into_boxed_str());
    RENDERED
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(key, rendered);
    rendered
}

/// `pgq.` and `'pgq_` (a channel name) put in `schema`; nothing else changes. For DDL, whose
/// names resolve when it runs under the migration's own search path.
pub(crate) fn in_schema(text: &str, schema: &str) -> String {
    if schema == TEMPLATE_SCHEMA {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(at) = rest.find(TEMPLATE_SCHEMA) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let boundary = !out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '"');
        let after = &from[TEMPLATE_SCHEMA.len()..];
        if boundary && after.starts_with('.') {
            out.push('"');
            out.push_str(schema);
            out.push('"');
        } else if boundary && after.starts_with('_') && out.ends_with('\'') {
            out.push_str(schema);
        } else {
            out.push_str(TEMPLATE_SCHEMA);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A statement for `schema`, with every operator, function and plain cast qualified.
pub(crate) fn render(template: &str, schema: &str) -> String {
    qualify(&in_schema(template, schema))
}

/// One lexical piece of a statement.
#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Word(&'a str),
    Quoted(&'a str),
    Operator(&'a str),
    Punct(char),
    Cast,
    Space(&'a str),
    Other(&'a str),
}

fn tokens(sql: &str) -> Vec<Token<'_>> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let start = i;
        let token = if c.is_ascii_whitespace() {
            while i < bytes.len() && (bytes[i] as char).is_ascii_whitespace() {
                i += 1;
            }
            Token::Space(&sql[start..i])
        } else if c == '\'' || c == '"' {
            i += 1;
            while i < bytes.len() {
                if bytes[i] as char == c {
                    if i + 1 < bytes.len() && bytes[i + 1] as char == c {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            Token::Quoted(&sql[start..i])
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            while i < bytes.len() {
                let d = bytes[i] as char;
                if d.is_ascii_alphanumeric() || d == '_' || d == '$' {
                    i += 1;
                } else {
                    break;
                }
            }
            Token::Word(&sql[start..i])
        } else if c == ':' && bytes.get(i + 1) == Some(&b':') {
            i += 2;
            Token::Cast
        } else if "+-*/<>=~!@#%^&|`?".contains(c) {
            while i < bytes.len() && "+-*/<>=~!@#%^&|`?".contains(bytes[i] as char) {
                i += 1;
            }
            Token::Operator(&sql[start..i])
        } else if "(),.;[]".contains(c) {
            i += 1;
            Token::Punct(c)
        } else {
            i += c.len_utf8().max(1);
            while !sql.is_char_boundary(i) {
                i += 1;
            }
            Token::Other(&sql[start..i])
        };
        out.push(token);
    }
    out
}

/// Qualifies operators, function calls and plain casts; panics on syntax whose operators cannot
/// be qualified (a bug in a statement, caught by the store's tests).
fn qualify(sql: &str) -> String {
    let tokens = tokens(sql);
    let significant = |from: usize, back: bool| -> Option<&Token<'_>> {
        let mut j = from;
        loop {
            if back {
                j = j.checked_sub(1)?;
            } else {
                j += 1;
            }
            match tokens.get(j)? {
                Token::Space(_) => continue,
                token => return Some(token),
            }
        }
    };
    let is_word = |token: Option<&Token<'_>>, words: &[&str]| matches!(token, Some(Token::Word(w)) if words.iter().any(|k| k.eq_ignore_ascii_case(w)));
    let mut out = String::with_capacity(sql.len() * 2);
    // Parenthesis depth of each open `SET` list, whose `column = value` pairs are assignments.
    let mut set_lists: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut assignment_next = false;
    // The precedence class of the operators seen in the current operand run, per depth.
    let mut runs: Vec<Option<u8>> = vec![None];
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Word(word) => {
                let lower = word.to_ascii_lowercase();
                if SEGMENT_ENDS.contains(&lower.as_str())
                    && let Some(run) = runs.last_mut()
                {
                    *run = None;
                }
                let previous = significant(i, true);
                let hidden_operator = match lower.as_str() {
                    "in" | "between" => true,
                    "distinct" => is_word(previous, &["is", "not"]),
                    "case" => !is_word(significant(i, false), &["when"]),
                    _ => false,
                };
                assert!(
                    !hidden_operator,
                    "statement uses {word}, whose operator cannot be qualified: {sql}"
                );
                if lower == "set" {
                    set_lists.push(depth);
                    assignment_next = true;
                } else if set_lists.last() == Some(&depth)
                    && ["from", "where", "returning"].contains(&lower.as_str())
                {
                    set_lists.pop();
                }
                let call = significant(i, false) == Some(&Token::Punct('('));
                let qualified = previous == Some(&Token::Punct('.'));
                let alias = is_word(previous, &["as"]);
                let cast_to = previous == Some(&Token::Cast);
                let function =
                    call && !qualified && !alias && !NOT_FUNCTIONS.contains(&lower.as_str());
                let plain_type = cast_to && PLAIN_TYPES.contains(&lower.as_str());
                if function || plain_type {
                    out.push_str("pg_catalog.");
                }
                out.push_str(word);
            }
            Token::Operator(op) => {
                let previous = significant(i, true);
                let star = *op == "*"
                    && (matches!(previous, Some(Token::Punct('(' | ',' | '.')))
                        || is_word(previous, STAR_AFTER));
                let assignment = *op == "=" && assignment_next && set_lists.last() == Some(&depth);
                if star || assignment {
                    assignment_next = false;
                    out.push_str(op);
                } else {
                    let class = precedence(op);
                    if let Some(run) = runs.last_mut() {
                        assert!(
                            run.is_none_or(|seen| seen == class),
                            "statement mixes operators of different precedence around {op} \
                             without parentheses: {sql}"
                        );
                        *run = Some(class);
                    }
                    if !out.ends_with(|c: char| c.is_ascii_whitespace() || c == '(') {
                        out.push(' ');
                    }
                    out.push_str("OPERATOR(pg_catalog.");
                    out.push_str(op);
                    out.push(')');
                    if !matches!(tokens.get(i + 1), Some(Token::Space(_))) {
                        out.push(' ');
                    }
                }
            }
            Token::Punct(c) => {
                match c {
                    '(' | '[' => {
                        depth += 1;
                        runs.push(None);
                    }
                    ')' | ']' => {
                        if set_lists.last() == Some(&depth) {
                            set_lists.pop();
                        }
                        depth = depth.saturating_sub(1);
                        if runs.len() > 1 {
                            runs.pop();
                        }
                    }
                    ',' => {
                        if set_lists.last() == Some(&depth) {
                            assignment_next = true;
                        }
                        if let Some(run) = runs.last_mut() {
                            *run = None;
                        }
                    }
                    _ => {}
                }
                out.push(*c);
            }
            Token::Cast => out.push_str("::"),
            Token::Quoted(text) | Token::Space(text) | Token::Other(text) => out.push_str(text),
        }
    }
    out
}

/// Renders every template for the default schema and another, as the store's tests do for
/// each statement: a statement that could not be qualified panics here, not in production.
#[cfg(test)]
pub(crate) fn assert_renders(templates: &[&str]) {
    for template in templates {
        for schema in [TEMPLATE_SCHEMA, "other_jobs"] {
            let rendered = render(template, schema);
            assert!(!rendered.contains(" IN ("), "{rendered}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{in_schema, render};

    #[test]
    fn operators_functions_and_plain_casts_are_qualified() {
        assert_eq!(
            render(
                "SELECT now() + ($1 * interval '1 ms'), x::text FROM pgq.jobs",
                "pgq"
            ),
            "SELECT pg_catalog.now() OPERATOR(pg_catalog.+) ($1 OPERATOR(pg_catalog.*) \
             interval '1 ms'), x::pg_catalog.text FROM pgq.jobs"
        );
    }

    #[test]
    fn assignments_stars_and_qualified_names_are_left_alone() {
        assert_eq!(
            render(
                "UPDATE pgq.jobs SET a = b + 1, c = pgq.f(d) WHERE e = 1 RETURNING *",
                "pgq"
            ),
            "UPDATE pgq.jobs SET a = b OPERATOR(pg_catalog.+) 1, c = pgq.f(d) \
             WHERE e OPERATOR(pg_catalog.=) 1 RETURNING *"
        );
        assert_eq!(
            render("SELECT count(*), j.* FROM x AS t(a, b)", "pgq"),
            "SELECT pg_catalog.count(*), j.* FROM x AS t(a, b)"
        );
    }

    #[test]
    fn a_set_list_ends_at_its_clause() {
        assert_eq!(
            render(
                "UPDATE t SET a = CASE WHEN s = 'x' THEN 1 END, b = 2 FROM u WHERE t.id = u.id",
                "pgq"
            ),
            "UPDATE t SET a = CASE WHEN s OPERATOR(pg_catalog.=) 'x' THEN 1 END, b = 2 \
             FROM u WHERE t.id OPERATOR(pg_catalog.=) u.id"
        );
    }

    #[test]
    fn operators_written_without_spaces_get_them() {
        assert_eq!(
            render("SELECT (e->>'at')", "pgq"),
            "SELECT (e OPERATOR(pg_catalog.->>) 'at')"
        );
    }

    #[test]
    fn strings_and_quoted_names_are_not_touched() {
        assert_eq!(
            render("SELECT 'a = b(c)' AS \"x = y\"", "pgq"),
            "SELECT 'a = b(c)' AS \"x = y\""
        );
    }

    #[test]
    #[should_panic(expected = "different precedence")]
    fn operators_that_would_lose_their_precedence_are_refused() {
        render("SELECT now() + $1 * interval '1 ms'", "pgq");
    }

    #[test]
    fn parenthesised_and_same_class_operators_are_fine() {
        render(
            "SELECT a < (now() - ($1 * interval '1 ms')), 'x' || b || 'y', a + b - c",
            "pgq",
        );
        render("SELECT f(a + b, c * d) WHERE x = 1 AND y >= z", "pgq");
    }

    #[test]
    #[should_panic(expected = "cannot be qualified")]
    fn in_lists_are_refused() {
        render("SELECT 1 WHERE status IN ('a', 'b')", "pgq");
    }

    #[test]
    #[should_panic(expected = "cannot be qualified")]
    fn is_distinct_from_is_refused() {
        render("SELECT 1 WHERE a IS DISTINCT FROM b", "pgq");
    }

    #[test]
    #[should_panic(expected = "cannot be qualified")]
    fn simple_case_is_refused() {
        render("SELECT CASE status WHEN 'a' THEN 1 END", "pgq");
    }

    #[test]
    fn the_schema_and_channels_follow_the_clients_schema() {
        assert_eq!(
            in_schema(
                "SELECT pgq.f(x), pg_notify('pgq_insert', 'pgq.jobs_id_seq') FROM pgq.jobs, pgqx.t",
                "app_jobs"
            ),
            "SELECT \"app_jobs\".f(x), pg_notify('app_jobs_insert', '\"app_jobs\".jobs_id_seq') \
             FROM \"app_jobs\".jobs, pgqx.t"
        );
        assert_eq!(in_schema("pgq.jobs", "pgq"), "pgq.jobs");
    }
}
