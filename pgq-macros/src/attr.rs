//! The `#[task(key = value, ...)]` attributes, parsed into one argument per key.
//!
//! This pass checks only the syntax: known keys, no duplicates, a value after each `=`.
//! What a value means is checked in `valid.rs`.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::ext::IdentExt as _;
use syn::parse::{ParseStream, Parser as _};
use syn::{Attribute, Ident, LitInt, LitStr, Meta, Token};

use crate::ctxt::Ctxt;

/// Declares the keys of `#[task(...)]`; adding a key is one line here plus its arm in
/// `valid.rs` (the compiler points at the `match` that needs it).
macro_rules! keys {
    ($($variant:ident = $name:literal,)*) => {
        /// A key of `#[task(...)]`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(clippy::enum_variant_names, reason = "`UniqueKey` is the key `unique_key`")]
        pub(crate) enum Key {
            $($variant,)*
        }

        impl Key {
            /// Every key, in the order error messages list them.
            pub(crate) const ALL: &[Key] = &[$(Key::$variant,)*];

            /// The key as the user writes it.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Key::$variant => $name,)*
                }
            }
        }
    };
}

keys! {
    Queue = "queue",
    Priority = "priority",
    MaxAttempts = "max_attempts",
    UniqueKey = "unique_key",
    Name = "name",
    Timeout = "timeout",
    Lease = "lease",
    Cron = "cron",
    TimeZone = "time_zone",
    ConcurrencyKey = "concurrency_key",
    Concurrency = "concurrency",
}

impl Key {
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|key| key.name() == name)
    }

    /// "`queue`, `priority`, ..." for error messages.
    pub(crate) fn list() -> String {
        let names: Vec<String> = Self::ALL
            .iter()
            .map(|key| format!("`{}`", key.name()))
            .collect();
        names.join(", ")
    }
}

/// One `key = value` of a `#[task(...)]` attribute.
pub(crate) struct Arg {
    pub(crate) key: Key,
    /// The key as written, for spans.
    pub(crate) ident: Ident,
    /// The tokens after `=`; never empty.
    pub(crate) value: TokenStream,
}

impl Arg {
    /// The value as a string literal, or an error on the value.
    pub(crate) fn string(&self, cx: &Ctxt) -> Option<LitStr> {
        match syn::parse2::<LitStr>(self.value.clone()) {
            Ok(lit) => Some(lit),
            Err(_) => {
                cx.error_spanned_by(&self.value, "expected a string literal");
                None
            }
        }
    }

    /// The value as an integer literal, maybe negated, or an error on the value.
    ///
    /// Integers too large for `i128` come back as `i128::MAX`: out of every range.
    pub(crate) fn integer(&self, cx: &Ctxt) -> Option<i128> {
        let parser = |input: ParseStream<'_>| {
            let minus: Option<Token![-]> = input.parse()?;
            let lit: LitInt = input.parse()?;
            Ok((minus.is_some(), lit))
        };
        match parser.parse2(self.value.clone()) {
            Ok((negative, lit)) => {
                let value = lit.base10_parse::<i128>().unwrap_or(i128::MAX);
                Some(if negative { -value } else { value })
            }
            Err(_) => {
                cx.error_spanned_by(&self.value, "expected an integer");
                None
            }
        }
    }
}

/// Reads every `#[task(...)]` on the type into arguments, reporting bad syntax, unknown keys and
/// duplicates; the arguments that remain have a known key, once, and a value.
pub(crate) fn parse(cx: &Ctxt, attrs: &[Attribute]) -> Vec<Arg> {
    let mut args: Vec<Arg> = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("task")) {
        let Meta::List(list) = &attr.meta else {
            cx.error_spanned_by(attr, "expected #[task(key = value, ...)]");
            continue;
        };
        for entry in split_entries(cx, list.tokens.clone()) {
            if let Some(arg) = parse_entry(cx, entry) {
                if args.iter().any(|seen| seen.key == arg.key) {
                    cx.error_spanned_by(
                        &arg.ident,
                        format_args!("duplicate key `{}` in #[task]", arg.key.name()),
                    );
                } else {
                    args.push(arg);
                }
            }
        }
    }
    args
}

/// Splits the attribute's tokens at top-level commas; a trailing comma is allowed.
fn split_entries(cx: &Ctxt, tokens: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut entries = Vec::new();
    let mut current = Vec::new();
    for token in tokens {
        match &token {
            TokenTree::Punct(punct) if punct.as_char() == ',' => {
                if current.is_empty() {
                    cx.error_spanned_by(&token, "expected `key = value` before `,` in #[task]");
                } else {
                    entries.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(token),
        }
    }
    if !current.is_empty() {
        entries.push(current);
    }
    entries
}

/// Reads one `key = value`; `None` after reporting why it is not one.
fn parse_entry(cx: &Ctxt, entry: Vec<TokenTree>) -> Option<Arg> {
    let mut tokens = entry.into_iter().map(unwrap_none_group);
    let ident = match tokens.next() {
        Some(TokenTree::Ident(ident)) => ident,
        other => {
            let rest: TokenStream = other.into_iter().chain(tokens).collect();
            cx.error_spanned_by(
                rest,
                format_args!("expected a key in #[task], one of {}", Key::list()),
            );
            return None;
        }
    };
    let name = ident.unraw().to_string();
    let Some(key) = Key::from_name(&name) else {
        cx.error_spanned_by(
            &ident,
            format_args!(
                "unknown key `{name}` in #[task]; expected one of {}",
                Key::list()
            ),
        );
        return None;
    };
    let eq = match tokens.next() {
        Some(TokenTree::Punct(punct)) if punct.as_char() == '=' => punct,
        None => {
            cx.error_spanned_by(
                &ident,
                format_args!("key `{name}` in #[task] needs a value: `{name} = ...`"),
            );
            return None;
        }
        Some(other) => {
            let rest: TokenStream = std::iter::once(other).chain(tokens).collect();
            cx.error_spanned_by(rest, format_args!("expected `=` after `{name}`"));
            return None;
        }
    };
    let value: TokenStream = tokens.collect();
    if value.is_empty() {
        cx.error_spanned_by(eq, format_args!("expected a value after `{name} =`"));
        return None;
    }
    Some(Arg { key, ident, value })
}

/// A macro_rules fragment (`$key:ident`) may arrive wrapped in an invisible group.
fn unwrap_none_group(token: TokenTree) -> TokenTree {
    match &token {
        TokenTree::Group(group) if group.delimiter() == Delimiter::None => {
            let mut inner = group.stream().into_iter();
            match (inner.next(), inner.next()) {
                (Some(only), None) => unwrap_none_group(only),
                _ => token,
            }
        }
        _ => token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn messages(attrs: &[Attribute]) -> (Vec<Key>, Vec<String>) {
        let cx = Ctxt::new();
        let keys = parse(&cx, attrs).iter().map(|arg| arg.key).collect();
        let errors = match cx.check() {
            Ok(()) => Vec::new(),
            Err(err) => err.into_iter().map(|e| e.to_string()).collect(),
        };
        (keys, errors)
    }

    #[test]
    fn keys_of_several_attributes_are_merged() {
        let attrs: Vec<Attribute> = vec![
            parse_quote!(#[task(queue = "email", priority = 150,)]),
            parse_quote!(#[serde(rename_all = "camelCase")]),
            parse_quote!(#[task(max_attempts = 5)]),
        ];
        let (keys, errors) = messages(&attrs);
        assert_eq!(keys, [Key::Queue, Key::Priority, Key::MaxAttempts]);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn every_syntax_error_is_reported() {
        let attrs: Vec<Attribute> = vec![
            parse_quote!(#[task(queu = "email", priority = 1)]),
            parse_quote!(#[task(priority = 2, name, timeout("1s"), max_attempts =)]),
            parse_quote!(#[task]),
            parse_quote!(#[task(, "x" = 1)]),
        ];
        let (keys, errors) = messages(&attrs);
        assert_eq!(keys, [Key::Priority]);
        assert_eq!(
            errors,
            [
                "unknown key `queu` in #[task]; expected one of `queue`, `priority`, \
                 `max_attempts`, `unique_key`, `name`, `timeout`, `lease`, `cron`, \
                 `time_zone`, `concurrency_key`, `concurrency`",
                "duplicate key `priority` in #[task]",
                "key `name` in #[task] needs a value: `name = ...`",
                "expected `=` after `timeout`",
                "expected a value after `max_attempts =`",
                "expected #[task(key = value, ...)]",
                "expected `key = value` before `,` in #[task]",
                "expected a key in #[task], one of `queue`, `priority`, `max_attempts`, \
                 `unique_key`, `name`, `timeout`, `lease`, `cron`, `time_zone`, \
                 `concurrency_key`, `concurrency`",
            ]
        );
    }

    #[test]
    fn literal_kinds() {
        let attr: Attribute = parse_quote!(#[task(priority = -3, queue = 5, max_attempts = "x")]);
        let cx = Ctxt::new();
        let args = parse(&cx, &[attr]);
        assert_eq!(args[0].integer(&cx), Some(-3));
        assert!(args[1].string(&cx).is_none());
        assert!(args[2].integer(&cx).is_none());
        let errors: Vec<String> = cx
            .check()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(errors, ["expected a string literal", "expected an integer"]);
    }
}
