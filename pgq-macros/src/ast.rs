//! The deriving type, reduced to what `#[derive(Task)]` needs: its name, its fields and its
//! `#[task(...)]` arguments.

use proc_macro2::Span;
use syn::{Data, DeriveInput, Fields, Ident};

use crate::attr::{self, Arg};
use crate::ctxt::Ctxt;

/// A type that `#[derive(Task)]` was put on.
pub(crate) struct Input<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) shape: Shape<'a>,
    pub(crate) args: Vec<Arg>,
}

/// The fields a `unique_key` may name.
pub(crate) enum Shape<'a> {
    /// `struct T { a: A, b: B }`, with the field names in order.
    Named(Vec<&'a Ident>),
    /// `struct T;`
    Unit,
    /// An enum, union or tuple struct; already reported.
    Unsupported,
}

impl<'a> Input<'a> {
    /// Reads the type, reporting the shapes a task cannot have.
    pub(crate) fn from_syn(cx: &Ctxt, input: &'a DeriveInput) -> Self {
        if !input.generics.params.is_empty() {
            cx.error_spanned_by(
                &input.generics,
                "task types must not be generic: each task is registered as one concrete type",
            );
        }
        let shape = match &input.data {
            Data::Struct(data) => {
                for field in &data.fields {
                    for attr in field.attrs.iter().filter(|a| a.path().is_ident("task")) {
                        cx.error_spanned_by(
                            attr,
                            "#[task(...)] goes on the struct, not on a field",
                        );
                    }
                }
                match &data.fields {
                    Fields::Named(fields) => Shape::Named(
                        fields
                            .named
                            .iter()
                            .filter_map(|field| field.ident.as_ref())
                            .collect(),
                    ),
                    Fields::Unit => Shape::Unit,
                    Fields::Unnamed(fields) => {
                        cx.error_spanned_by(
                            fields,
                            "tuple structs are not supported; use named fields",
                        );
                        Shape::Unsupported
                    }
                }
            }
            Data::Enum(data) => {
                cx.error_at(
                    data.enum_token.span,
                    "#[derive(Task)] supports structs with named fields; enums are not supported",
                );
                Shape::Unsupported
            }
            Data::Union(data) => {
                cx.error_at(
                    data.union_token.span,
                    "#[derive(Task)] supports structs with named fields; unions are not supported",
                );
                Shape::Unsupported
            }
        };
        Self {
            ident: &input.ident,
            shape,
            args: attr::parse(cx, &input.attrs),
        }
    }
}

/// The type's name where the user wrote it, resolved like the rest of the generated code: how
/// both the impl and the fallback stub name the type.
pub(crate) fn call_site_ident(ident: &Ident) -> Ident {
    let mut ident = ident.clone();
    ident.set_span(ident.span().resolved_at(Span::call_site()));
    ident
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn errors(input: &DeriveInput) -> Vec<String> {
        let cx = Ctxt::new();
        Input::from_syn(&cx, input);
        match cx.check() {
            Ok(()) => Vec::new(),
            Err(err) => err.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn named_fields_are_listed() {
        let input: DeriveInput = parse_quote!(
            struct A {
                x: u8,
                r#type: u8,
            }
        );
        let cx = Ctxt::new();
        let parsed = Input::from_syn(&cx, &input);
        cx.check().unwrap();
        let Shape::Named(fields) = parsed.shape else {
            panic!("not named");
        };
        let names: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        assert_eq!(names, ["x", "r#type"]);
    }

    #[test]
    fn unsupported_shapes_are_reported_together() {
        let input: DeriveInput = parse_quote!(
            #[task(nope = 1)]
            struct A<'a, T>(&'a T, #[task(queue = "q")] u8);
        );
        assert_eq!(
            errors(&input),
            [
                "task types must not be generic: each task is registered as one concrete type",
                "#[task(...)] goes on the struct, not on a field",
                "tuple structs are not supported; use named fields",
                "unknown key `nope` in #[task]; expected one of `queue`, `priority`, \
                 `max_attempts`, `unique_key`, `name`, `timeout`, `lease`, `cron`, `time_zone`, \
                 `concurrency_key`, `concurrency`",
            ]
        );
    }

    #[test]
    fn enums_and_unions_are_reported() {
        let input: DeriveInput = parse_quote!(
            enum A {
                B,
            }
        );
        assert_eq!(
            errors(&input),
            ["#[derive(Task)] supports structs with named fields; enums are not supported"]
        );
        let input: DeriveInput = parse_quote!(union A { b: u8 });
        assert_eq!(
            errors(&input),
            ["#[derive(Task)] supports structs with named fields; unions are not supported"]
        );
    }
}
