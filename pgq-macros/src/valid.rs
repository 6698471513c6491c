//! Checks every `#[task(...)]` value and turns the arguments into the settings to emit.

use std::str::FromStr as _;

use proc_macro2::Span;
use syn::ext::IdentExt as _;
use syn::{Ident, LitStr};

use crate::ast::{Input, Shape};
use crate::attr::{Arg, Key};
use crate::ctxt::Ctxt;
use crate::duration::{self, Limits};
use crate::limits;
use crate::unique_key::Template;

const PRIORITY_RANGE: std::ops::RangeInclusive<i128> =
    limits::MIN_PRIORITY as i128..=limits::MAX_PRIORITY as i128;
const MAX_ATTEMPTS_RANGE: std::ops::RangeInclusive<i128> = 1..=limits::MAX_MAX_ATTEMPTS as i128;
const CONCURRENCY_RANGE: std::ops::RangeInclusive<i128> = 1..=limits::MAX_CONCURRENCY as i128;

/// The rules for queue names.
const QUEUE: Label = Label {
    what: "queue name",
    max_len: limits::MAX_QUEUE_LEN,
    punctuation: &['_', '-', '.', ':'],
};

/// The rules for task names.
const NAME: Label = Label {
    what: "task name",
    max_len: limits::MAX_TASK_NAME_LEN,
    punctuation: &['_', '-', '.', ':', '/'],
};

/// What `#[derive(Task)]` emits for one type; `None` keeps the trait's default.
pub(crate) struct Settings {
    pub(crate) name: String,
    pub(crate) queue: Option<String>,
    pub(crate) priority: Option<i16>,
    pub(crate) max_attempts: Option<i32>,
    pub(crate) timeout_millis: Option<u64>,
    pub(crate) lease_millis: Option<u64>,
    pub(crate) unique_key: Option<UniqueKey>,
    pub(crate) cron: Option<Cron>,
    /// `concurrency_key` with its `concurrency`: both or neither.
    pub(crate) concurrency: Option<(UniqueKey, u32)>,
}

/// A `cron` that parses, with the time zone it is read in.
pub(crate) struct Cron {
    pub(crate) expression: String,
    /// An IANA name, checked when the worker is built; `"UTC"` unless `time_zone` is given.
    pub(crate) time_zone: String,
}

/// A `unique_key` or `concurrency_key` whose placeholders all name fields.
pub(crate) struct UniqueKey {
    /// The `format!` string.
    pub(crate) format: String,
    /// The fields that fill the `{}` of [`UniqueKey::format`], in order.
    pub(crate) fields: Vec<Ident>,
    /// The literal, so that errors in the generated code point at it.
    pub(crate) span: Span,
}

/// Checks every argument, reporting each bad value on its tokens.
///
/// The settings are complete only if nothing was reported.
pub(crate) fn check(cx: &Ctxt, input: &Input<'_>) -> Settings {
    let mut settings = Settings {
        name: input.ident.unraw().to_string(),
        queue: None,
        priority: None,
        max_attempts: None,
        timeout_millis: None,
        lease_millis: None,
        unique_key: None,
        cron: None,
        concurrency: None,
    };
    let mut concurrency_key: Option<UniqueKey> = None;
    let mut concurrency: Option<u32> = None;
    let mut named = false;
    let mut time_zone: Option<(String, &Arg)> = None;
    for arg in &input.args {
        match arg.key {
            Key::Queue => settings.queue = arg.string(cx).and_then(|lit| label(cx, &QUEUE, &lit)),
            Key::Priority => {
                settings.priority = ranged(cx, arg, PRIORITY_RANGE).map(|value| value as i16);
            }
            Key::MaxAttempts => {
                settings.max_attempts =
                    ranged(cx, arg, MAX_ATTEMPTS_RANGE).map(|value| value as i32);
            }
            Key::UniqueKey => {
                settings.unique_key = arg
                    .string(cx)
                    .and_then(|lit| key_template(cx, input, "unique_key", &lit));
            }
            Key::ConcurrencyKey => {
                concurrency_key = arg
                    .string(cx)
                    .and_then(|lit| key_template(cx, input, "concurrency_key", &lit));
            }
            Key::Concurrency => {
                concurrency = ranged(cx, arg, CONCURRENCY_RANGE).map(|value| value as u32);
            }
            Key::Name => {
                named = true;
                if let Some(name) = arg.string(cx).and_then(|lit| label(cx, &NAME, &lit)) {
                    settings.name = name;
                }
            }
            Key::Timeout => settings.timeout_millis = millis(cx, arg, duration::TIMEOUT),
            Key::Lease => settings.lease_millis = millis(cx, arg, duration::LEASE),
            Key::Cron => settings.cron = arg.string(cx).and_then(|lit| cron(cx, &lit)),
            Key::TimeZone => {
                if let Some(lit) = arg.string(cx) {
                    match zone_name(&lit.value()) {
                        Ok(zone) => time_zone = Some((zone, arg)),
                        Err(err) => cx.error_spanned_by(&lit, err),
                    }
                }
            }
        }
    }
    if let Some((zone, arg)) = time_zone {
        match &mut settings.cron {
            Some(cron) => cron.time_zone = zone,
            None if input.args.iter().any(|arg| arg.key == Key::Cron) => {}
            None => cx.error_spanned_by(
                &arg.ident,
                "time_zone is the time zone of a cron schedule; add `cron = \"...\"`",
            ),
        }
    }
    settings.concurrency = pair_concurrency(cx, input, concurrency_key, concurrency);
    if !named && let Err(err) = NAME.check(&settings.name) {
        cx.error_spanned_by(
            input.ident,
            format_args!(
                "the task name defaults to the type name `{}`, but {err}; \
                 set one with #[task(name = \"...\")]",
                settings.name
            ),
        );
    }
    settings
}

/// An integer argument within `range`, or an error on the value naming the key.
fn ranged(cx: &Ctxt, arg: &Arg, range: std::ops::RangeInclusive<i128>) -> Option<i128> {
    let value = arg.integer(cx)?;
    if range.contains(&value) {
        Some(value)
    } else {
        cx.error_spanned_by(
            &arg.value,
            format_args!(
                "{} must be between {} and {}",
                arg.key.name(),
                range.start(),
                range.end()
            ),
        );
        None
    }
}

/// A duration argument in milliseconds, or an error on the value.
fn millis(cx: &Ctxt, arg: &Arg, limits: Limits) -> Option<u64> {
    let lit = arg.string(cx)?;
    match limits.parse_millis(&lit.value()) {
        Ok(millis) => Some(millis),
        Err(err) => {
            cx.error_spanned_by(&lit, err);
            None
        }
    }
}

/// A cron expression that parses: six fields with seconds, or five with second 0.
fn cron(cx: &Ctxt, lit: &LitStr) -> Option<Cron> {
    let expression = lit.value();
    // As `pgq_core::limits::MAX_CRON_CHARS`: the schedules table holds no longer one.
    const MAX_CRON_CHARS: usize = 256;
    if expression.chars().count() > MAX_CRON_CHARS {
        cx.error_spanned_by(
            lit,
            format_args!("a cron expression has at most {MAX_CRON_CHARS} characters"),
        );
        return None;
    }
    let fields = expression.split_whitespace().count();
    if !(5..=6).contains(&fields) && !expression.trim_start().starts_with('@') {
        cx.error_spanned_by(
            lit,
            format_args!(
                "a cron expression has six fields, seconds first, or five (not {fields}): \
                 `sec min hour day-of-month month day-of-week`, e.g. \"0 */5 * * * *\""
            ),
        );
        return None;
    }
    match croner::Cron::from_str(&expression) {
        Ok(_) => Some(Cron {
            expression,
            time_zone: "UTC".into(),
        }),
        Err(err) => {
            cx.error_spanned_by(
                lit,
                format_args!(
                    "cron expression does not parse: {err}; expected `sec min hour \
                     day-of-month month day-of-week`, e.g. \"0 */5 * * * *\""
                ),
            );
            None
        }
    }
}

/// The shape of an IANA time zone name (`Europe/Paris`, `UTC`, `Etc/GMT+5`); whether the zone
/// exists is checked when the worker is built.
fn zone_name(value: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+');
    if value.is_empty() || value.len() > 64 || !value.chars().all(allowed) {
        return Err(
            "time_zone must be an IANA time zone name such as \"Europe/Paris\" or \"UTC\"".into(),
        );
    }
    Ok(value.to_owned())
}

fn label(cx: &Ctxt, rules: &Label, lit: &LitStr) -> Option<String> {
    let value = lit.value();
    match rules.check(&value) {
        Ok(()) => Some(value),
        Err(err) => {
            cx.error_spanned_by(lit, err);
            None
        }
    }
}

/// `concurrency_key` and `concurrency` together, or an error on the one given alone. A key or a
/// limit already reported as bad is not reported again as missing its partner.
fn pair_concurrency(
    cx: &Ctxt,
    input: &Input<'_>,
    key: Option<UniqueKey>,
    limit: Option<u32>,
) -> Option<(UniqueKey, u32)> {
    let given = |wanted: Key| input.args.iter().find(|arg| arg.key == wanted);
    match (key, limit) {
        (Some(key), Some(limit)) => return Some((key, limit)),
        (Some(_), None) if given(Key::Concurrency).is_none() => {
            if let Some(arg) = given(Key::ConcurrencyKey) {
                cx.error_spanned_by(
                    &arg.ident,
                    "concurrency_key needs a limit: add `concurrency = N` (1 to 1000), the most \
                     held jobs per key",
                );
            }
        }
        (None, Some(_)) if given(Key::ConcurrencyKey).is_none() => {
            if let Some(arg) = given(Key::Concurrency) {
                cx.error_spanned_by(
                    &arg.ident,
                    "concurrency is a limit per concurrency key; add \
                     `concurrency_key = \"{field}\"`",
                );
            }
        }
        _ => {}
    }
    None
}

/// A key template (`unique_key`, `concurrency_key`) whose placeholders all name fields.
fn key_template(cx: &Ctxt, input: &Input<'_>, key: &str, lit: &LitStr) -> Option<UniqueKey> {
    let template = match Template::parse(&lit.value()) {
        Ok(template) => template,
        Err(err) => {
            cx.error_spanned_by(lit, err.describe(key));
            return None;
        }
    };
    let known: &[&Ident] = match &input.shape {
        Shape::Named(fields) => fields,
        Shape::Unit => &[],
        // The shape is already reported; naming fields of it would pile on.
        Shape::Unsupported => return None,
    };
    // Located at the literal, resolved like the rest of the generated code.
    let span = lit.span().resolved_at(Span::call_site());
    let mut fields = Vec::new();
    for name in template.fields() {
        let Some(field) = known.iter().find(|field| field.unraw() == name) else {
            let listed = if known.is_empty() {
                format!("`{}` has no fields", input.ident.unraw())
            } else {
                let names: Vec<String> = known
                    .iter()
                    .map(|field| format!("`{}`", field.unraw()))
                    .collect();
                format!("the fields are {}", names.join(", "))
            };
            cx.error_spanned_by(
                lit,
                format_args!("{key} refers to unknown field `{name}`; {listed}"),
            );
            return None;
        };
        let mut field = (*field).clone();
        field.set_span(span);
        fields.push(field);
    }
    Some(UniqueKey {
        format: template.format_string(),
        fields,
        span,
    })
}

/// The rules for a name stored in job rows: its length and its characters.
struct Label {
    what: &'static str,
    max_len: usize,
    /// Allowed besides ASCII letters and digits.
    punctuation: &'static [char],
}

impl Label {
    fn check(&self, value: &str) -> Result<(), String> {
        let what = self.what;
        let len = value.chars().count();
        if len == 0 {
            return Err(format!("{what} must not be empty"));
        }
        if len > self.max_len {
            return Err(format!(
                "{what} is {len} characters; the limit is {}",
                self.max_len
            ));
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || self.punctuation.contains(&c);
        if !value.chars().all(allowed) {
            let quoted: Vec<String> = self.punctuation.iter().map(|c| format!("'{c}'")).collect();
            let (last, rest) = quoted.split_last().expect("some punctuation");
            return Err(format!(
                "{what} may contain only ASCII letters, digits, {} and {last}",
                rest.join(", ")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::{DeriveInput, parse_quote};

    const BAD_QUEUE_CHAR: &str =
        "queue name may contain only ASCII letters, digits, '_', '-', '.' and ':'";
    const BAD_NAME_CHAR: &str =
        "task name may contain only ASCII letters, digits, '_', '-', '.', ':' and '/'";

    #[test]
    fn queue_names() {
        for ok in ["email", "a", "Q_1-x.y:z", &"q".repeat(64)] {
            assert_eq!(QUEUE.check(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(QUEUE.check(""), Err("queue name must not be empty".into()));
        assert_eq!(
            QUEUE.check(&"q".repeat(65)),
            Err("queue name is 65 characters; the limit is 64".into())
        );
        for bad in ["a b", "a/b", "é", "email\n", "a*"] {
            assert_eq!(QUEUE.check(bad), Err(BAD_QUEUE_CHAR.into()), "{bad:?}");
        }
    }

    #[test]
    fn task_names() {
        for ok in ["billing.charge", "a/b:c-d_e", &"n".repeat(128)] {
            assert_eq!(NAME.check(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(NAME.check(""), Err("task name must not be empty".into()));
        assert_eq!(
            NAME.check(&"n".repeat(129)),
            Err("task name is 129 characters; the limit is 128".into())
        );
        assert_eq!(NAME.check("a b"), Err(BAD_NAME_CHAR.into()));
    }

    fn check_input(input: &DeriveInput) -> Result<Settings, Vec<String>> {
        let cx = Ctxt::new();
        let settings = check(&cx, &Input::from_syn(&cx, input));
        match cx.check() {
            Ok(()) => Ok(settings),
            Err(err) => Err(err.into_iter().map(|e| e.to_string()).collect()),
        }
    }

    #[test]
    fn every_key() {
        let input: DeriveInput = parse_quote! {
            #[task(queue = "email", priority = 150, max_attempts = 5)]
            #[task(unique_key = "welcome:{user_id}", name = "billing.charge", timeout = "30s")]
            #[task(lease = "2m")]
            struct SendWelcome { user_id: i64, r#type: String }
        };
        let settings = check_input(&input).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(settings.name, "billing.charge");
        assert_eq!(settings.queue.as_deref(), Some("email"));
        assert_eq!(settings.priority, Some(150));
        assert_eq!(settings.max_attempts, Some(5));
        assert_eq!(settings.timeout_millis, Some(30_000));
        assert_eq!(settings.lease_millis, Some(120_000));
        let unique_key = settings.unique_key.unwrap();
        assert_eq!(unique_key.format, "welcome:{}");
        assert_eq!(unique_key.fields[0].to_string(), "user_id");
    }

    #[test]
    fn defaults() {
        let input: DeriveInput = parse_quote!(
            struct r#Ping;
        );
        let settings = check_input(&input).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(settings.name, "Ping");
        assert!(settings.queue.is_none() && settings.priority.is_none());
        assert!(settings.max_attempts.is_none() && settings.timeout_millis.is_none());
        assert!(settings.lease_millis.is_none() && settings.unique_key.is_none());
    }

    #[test]
    fn raw_field_names_are_matched_unraw() {
        let input: DeriveInput = parse_quote! {
            #[task(unique_key = "{type}")]
            struct A { r#type: String }
        };
        let settings = check_input(&input).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(settings.unique_key.unwrap().fields[0].to_string(), "r#type");
    }

    #[test]
    fn every_bad_value_is_reported() {
        let input: DeriveInput = parse_quote! {
            #[task(queue = "", priority = -1, max_attempts = 0, unique_key = "{usr_id}")]
            #[task(name = "a b", timeout = "1d", lease = "500ms")]
            struct SendWelcome { user_id: i64, email: String }
        };
        assert_eq!(
            check_input(&input).err().unwrap(),
            [
                "queue name must not be empty",
                "priority must be between 0 and 1000",
                "max_attempts must be between 1 and 1000",
                "unique_key refers to unknown field `usr_id`; the fields are `user_id`, `email`",
                BAD_NAME_CHAR,
                &duration::TIMEOUT
                    .parse_millis("1d")
                    .unwrap_err()
                    .to_string(),
                "lease must be at least 1s",
            ]
        );
    }

    #[test]
    fn a_concurrency_key_and_its_limit_come_together() {
        let input: DeriveInput = parse_quote! {
            #[task(concurrency_key = "{customer_id}:{region}", concurrency = 1000)]
            struct A { customer_id: i64, region: String }
        };
        let settings = check_input(&input).unwrap_or_else(|e| panic!("{e:?}"));
        let (key, limit) = settings.concurrency.unwrap();
        assert_eq!((key.format.as_str(), limit), ("{}:{}", 1000));
        let cases: [(DeriveInput, &[&str]); 5] = [
            (
                parse_quote!(
                    #[task(concurrency_key = "{id}")]
                    struct A {
                        id: i64,
                    }
                ),
                &[
                    "concurrency_key needs a limit: add `concurrency = N` (1 to 1000), the most \
                   held jobs per key",
                ],
            ),
            (
                parse_quote!(
                    #[task(concurrency = 2)]
                    struct A {
                        id: i64,
                    }
                ),
                &[
                    "concurrency is a limit per concurrency key; add `concurrency_key = \"{field}\"`",
                ],
            ),
            (
                parse_quote!(
                    #[task(concurrency_key = "{id}", concurrency = 0)]
                    struct A {
                        id: i64,
                    }
                ),
                &["concurrency must be between 1 and 1000"],
            ),
            (
                parse_quote!(
                    #[task(concurrency_key = "{idd}", concurrency = 1001)]
                    struct A {
                        id: i64,
                    }
                ),
                &[
                    "concurrency_key refers to unknown field `idd`; the fields are `id`",
                    "concurrency must be between 1 and 1000",
                ],
            ),
            (
                parse_quote!(
                    #[task(concurrency_key = "{}", concurrency = 1)]
                    struct A {
                        id: i64,
                    }
                ),
                &["concurrency_key has an empty placeholder `{}`; name a field, as in `{user_id}`"],
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(check_input(&input).err().unwrap(), expected);
        }
    }

    #[test]
    fn ranges_are_inclusive() {
        let input: DeriveInput = parse_quote! {
            #[task(priority = 1000, max_attempts = 1000)]
            struct A;
        };
        let settings = check_input(&input).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            (settings.priority, settings.max_attempts),
            (Some(1000), Some(1000))
        );
        let input: DeriveInput = parse_quote! {
            #[task(priority = 1001, max_attempts = 1001)]
            struct A;
        };
        assert_eq!(check_input(&input).err().unwrap().len(), 2);
        let input: DeriveInput = parse_quote! {
            #[task(priority = 0, max_attempts = 1)]
            struct A;
        };
        assert!(check_input(&input).is_ok());
        let input: DeriveInput = parse_quote! {
            #[task(priority = 99999999999999999999999999999999999999999999)]
            struct A;
        };
        assert_eq!(
            check_input(&input).err().unwrap(),
            ["priority must be between 0 and 1000"]
        );
    }

    #[test]
    fn unique_key_on_a_unit_struct() {
        let input: DeriveInput = parse_quote!(
            #[task(unique_key = "{id}")]
            struct Ping;
        );
        assert_eq!(
            check_input(&input).err().unwrap(),
            ["unique_key refers to unknown field `id`; `Ping` has no fields"]
        );
        let input: DeriveInput = parse_quote!(
            #[task(unique_key = "ping")]
            struct Ping;
        );
        assert!(check_input(&input).is_ok());
    }

    #[test]
    fn a_type_name_that_is_no_task_name() {
        let input: DeriveInput = parse_quote!(
            struct Café;
        );
        assert_eq!(
            check_input(&input).err().unwrap(),
            [format!(
                "the task name defaults to the type name `Café`, but {BAD_NAME_CHAR}; \
                 set one with #[task(name = \"...\")]"
            )]
        );
        let input: DeriveInput = parse_quote!(
            #[task(name = "cafe")]
            struct Café;
        );
        assert!(check_input(&input).is_ok());
    }
}
