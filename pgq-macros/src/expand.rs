//! Emits the `Task` impl and its registration.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{DeriveInput, Ident, LitStr};

use crate::ast::{self, Input};
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::valid::{self, Cron, Settings, UniqueKey};

/// `#[derive(Task)]`: the impl and registration, or every error plus a stub impl.
pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let task = Input::from_syn(&cx, input);
    let settings = valid::check(&cx, &task);
    match cx.check() {
        Ok(()) => impl_task(task.ident, &settings),
        Err(errors) => fallback::expand(input, errors),
    }
}

fn impl_task(ident: &Ident, settings: &Settings) -> TokenStream {
    let ty = ast::call_site_ident(ident);
    let name = &settings.name;
    let queue = settings
        .queue
        .as_ref()
        .map(|queue| quote!(const QUEUE: &'static str = #queue;));
    let priority = settings.priority.map(|priority| {
        let priority = Literal::i16_unsuffixed(priority);
        quote!(const PRIORITY: i16 = #priority;)
    });
    let max_attempts = settings.max_attempts.map(|max_attempts| {
        let max_attempts = Literal::i32_unsuffixed(max_attempts);
        quote!(const MAX_ATTEMPTS: i32 = #max_attempts;)
    });
    let timeout = settings
        .timeout_millis
        .map(|millis| duration_const("TIMEOUT", millis));
    let lease = settings
        .lease_millis
        .map(|millis| duration_const("LEASE", millis));
    let unique_key = settings
        .unique_key
        .as_ref()
        .map(|key| key_fn("unique_key", key));
    let concurrency = settings.concurrency.as_ref().map(|(key, limit)| {
        let key = key_fn("concurrency_key", key);
        let limit = Literal::u32_unsuffixed(*limit);
        quote! {
            const CONCURRENCY: ::core::option::Option<u32> = ::core::option::Option::Some(#limit);
            #key
        }
    });
    let schedule = settings
        .cron
        .as_ref()
        .map(|cron| declare_schedule(&ty, cron));
    quote! {
        const _: () = {
            #[automatically_derived]
            impl ::pgq_core::Task for #ty {
                const NAME: &'static str = #name;
                #queue
                #priority
                #max_attempts
                #timeout
                #lease
                #unique_key
                #concurrency
            }
            ::pgq_core::__private::register_task!(#ty);
            #schedule
        };
    }
}

/// The schedule's registration; its `Default` bound is reported on the user's struct.
fn declare_schedule(ty: &Ident, cron: &Cron) -> TokenStream {
    let Cron {
        expression,
        time_zone,
    } = cron;
    quote! {
        ::pgq_core::__private::declare_schedule!(#ty, #expression, #time_zone);
    }
}

/// `const NAME: Option<Duration> = Some(..);`
fn duration_const(name: &str, millis: u64) -> TokenStream {
    let name = Ident::new(name, Span::call_site());
    let millis = Literal::u64_unsuffixed(millis);
    quote! {
        const #name: ::core::option::Option<::core::time::Duration> =
            ::core::option::Option::Some(::core::time::Duration::from_millis(#millis));
    }
}

/// `fn unique_key` or `fn concurrency_key`, its `format!` located at the literal so that a field
/// that is not `Display` is reported there.
fn key_fn(name: &str, unique_key: &UniqueKey) -> TokenStream {
    let UniqueKey {
        format,
        fields,
        span,
    } = unique_key;
    let key = if fields.is_empty() {
        let text = LitStr::new(&format.replace("{{", "{").replace("}}", "}"), *span);
        quote_spanned!(*span=> ::std::string::String::from(#text))
    } else {
        let format = LitStr::new(format, *span);
        quote_spanned!(*span=> ::std::format!(#format, #(self.#fields),*))
    };
    let name = Ident::new(name, Span::call_site());
    quote! {
        fn #name(&self) -> ::core::option::Option<::std::string::String> {
            ::core::option::Option::Some(#key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn every_key() {
        let input: DeriveInput = parse_quote! {
            #[task(queue = "email", priority = 150, max_attempts = 5)]
            #[task(unique_key = "welcome:{user_id}", timeout = "30s", lease = "2m")]
            struct SendWelcome { user_id: i64, email: String }
        };
        let expected = quote! {
            const _: () = {
                #[automatically_derived]
                impl ::pgq_core::Task for SendWelcome {
                    const NAME: &'static str = "SendWelcome";
                    const QUEUE: &'static str = "email";
                    const PRIORITY: i16 = 150;
                    const MAX_ATTEMPTS: i32 = 5;
                    const TIMEOUT: ::core::option::Option<::core::time::Duration> =
                        ::core::option::Option::Some(::core::time::Duration::from_millis(30000));
                    const LEASE: ::core::option::Option<::core::time::Duration> =
                        ::core::option::Option::Some(::core::time::Duration::from_millis(120000));
                    fn unique_key(&self) -> ::core::option::Option<::std::string::String> {
                        ::core::option::Option::Some(::std::format!("welcome:{}", self.user_id))
                    }
                }
                ::pgq_core::__private::register_task!(SendWelcome);
            };
        };
        assert_eq!(derive(&input).to_string(), expected.to_string());
    }

    #[test]
    fn a_concurrency_key_with_its_limit() {
        let input: DeriveInput = parse_quote! {
            #[task(concurrency_key = "tenant:{customer_id}", concurrency = 2)]
            struct Export { customer_id: i64 }
        };
        let expected = quote! {
            const _: () = {
                #[automatically_derived]
                impl ::pgq_core::Task for Export {
                    const NAME: &'static str = "Export";
                    const CONCURRENCY: ::core::option::Option<u32> =
                        ::core::option::Option::Some(2);
                    fn concurrency_key(&self) -> ::core::option::Option<::std::string::String> {
                        ::core::option::Option::Some(::std::format!("tenant:{}", self.customer_id))
                    }
                }
                ::pgq_core::__private::register_task!(Export);
            };
        };
        assert_eq!(derive(&input).to_string(), expected.to_string());
    }

    #[test]
    fn only_the_name_by_default() {
        let input: DeriveInput = parse_quote!(
            struct Ping;
        );
        let expected = quote! {
            const _: () = {
                #[automatically_derived]
                impl ::pgq_core::Task for Ping {
                    const NAME: &'static str = "Ping";
                }
                ::pgq_core::__private::register_task!(Ping);
            };
        };
        assert_eq!(derive(&input).to_string(), expected.to_string());
    }

    #[test]
    fn a_constant_unique_key_is_not_formatted() {
        let input: DeriveInput = parse_quote!(
            #[task(name = "x", unique_key = "{{one}}")]
            struct Ping;
        );
        let expected = quote! {
            const _: () = {
                #[automatically_derived]
                impl ::pgq_core::Task for Ping {
                    const NAME: &'static str = "x";
                    fn unique_key(&self) -> ::core::option::Option<::std::string::String> {
                        ::core::option::Option::Some(::std::string::String::from("{one}"))
                    }
                }
                ::pgq_core::__private::register_task!(Ping);
            };
        };
        assert_eq!(derive(&input).to_string(), expected.to_string());
    }

    #[test]
    fn a_cron_declares_a_schedule_of_a_default_value() {
        let input: DeriveInput = parse_quote!(
            #[task(cron = "0 */5 * * * *", time_zone = "Europe/Paris")]
            struct Sweep;
        );
        let expected = quote! {
            const _: () = {
                #[automatically_derived]
                impl ::pgq_core::Task for Sweep {
                    const NAME: &'static str = "Sweep";
                }
                ::pgq_core::__private::register_task!(Sweep);
                ::pgq_core::__private::declare_schedule!(Sweep, "0 */5 * * * *", "Europe/Paris");
            };
        };
        assert_eq!(derive(&input).to_string(), expected.to_string());
    }

    #[test]
    fn cron_and_time_zone_errors() {
        let errors = |input: DeriveInput| -> Vec<String> {
            let cx = Ctxt::new();
            let task = Input::from_syn(&cx, &input);
            valid::check(&cx, &task);
            cx.check()
                .err()
                .map(|errors| errors.into_iter().map(|e| e.to_string()).collect())
                .unwrap_or_default()
        };
        let bad_cron = errors(parse_quote!(
            #[task(cron = "61 * * * * *")]
            struct A;
        ));
        assert_eq!(bad_cron.len(), 1);
        assert!(
            bad_cron[0].starts_with("cron expression does not parse"),
            "{bad_cron:?}"
        );
        let with_a_year = errors(parse_quote!(
            #[task(cron = "0 0 0 1 1 * 2030")]
            struct Y;
        ));
        assert!(
            with_a_year[0]
                .starts_with("a cron expression has six fields, seconds first, or five (not 7)"),
            "{with_a_year:?}"
        );
        let long: DeriveInput = syn::parse_str(&format!(
            "#[task(cron = \"{} * * * * *\")] struct L;",
            " ".repeat(300)
        ))
        .unwrap();
        assert_eq!(
            errors(long),
            ["a cron expression has at most 256 characters"]
        );
        assert_eq!(
            errors(parse_quote!(
                #[task(time_zone = "UTC")]
                struct B;
            )),
            ["time_zone is the time zone of a cron schedule; add `cron = \"...\"`"]
        );
        assert_eq!(
            errors(parse_quote!(
                #[task(cron = "* * * * * *", time_zone = "Paris time")]
                struct C;
            )),
            ["time_zone must be an IANA time zone name such as \"Europe/Paris\" or \"UTC\""]
        );
    }

    #[test]
    fn errors_come_with_a_stub() {
        let input: DeriveInput = parse_quote!(
            #[task(queu = "x", priority = 1001)]
            struct Ping;
        );
        let output = derive(&input).to_string();
        assert_eq!(output.matches("compile_error").count(), 2, "{output}");
        assert!(
            output.contains(
                &quote!(
                    const NAME: &'static str = "Ping";
                )
                .to_string()
            ),
            "{output}"
        );
        assert!(!output.contains("register_task"), "{output}");
    }
}
