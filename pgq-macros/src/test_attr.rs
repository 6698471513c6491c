//! `#[pgq_testkit::test]`: an async test that receives a migrated database of its own.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn};

/// The test function becomes a plain `#[test]` that hands its body's one argument (a
/// `TestDatabase` or a `Client` on one) to pgq-testkit's runner.
pub(crate) fn expand(args: TokenStream, item: ItemFn) -> TokenStream {
    match misuse(args, &item) {
        // The function stays as written, so that the error is the only one reported.
        Some(error) => quote!(#error #item),
        None => expand_test(item),
    }
}

/// The error for an attribute used where it does not fit.
fn misuse(args: TokenStream, item: &ItemFn) -> Option<TokenStream> {
    let error = if !args.is_empty() {
        quote_spanned!(args.span()=> compile_error!("#[pgq_testkit::test] takes no arguments");)
    } else if item.sig.asyncness.is_none() {
        quote_spanned!(item.sig.fn_token.span=>
            compile_error!("#[pgq_testkit::test] goes on an `async fn`");)
    } else if item.sig.inputs.len() != 1
        || !matches!(item.sig.inputs.first(), Some(FnArg::Typed(_)))
    {
        quote_spanned!(item.sig.inputs.span()=>
            compile_error!("a #[pgq_testkit::test] takes one argument: `db: TestDatabase` or `client: Client`");)
    } else if !item.sig.generics.params.is_empty() {
        quote_spanned!(item.sig.generics.span()=>
            compile_error!("a #[pgq_testkit::test] has no generic parameters");)
    } else {
        return None;
    };
    Some(error)
}

fn expand_test(item: ItemFn) -> TokenStream {
    let attrs = &item.attrs;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let output = &item.sig.output;
    let mut body = item.clone();
    body.attrs.clear();
    body.vis = syn::Visibility::Inherited;
    body.sig.ident = syn::Ident::new("__pgq_test_body", name.span());
    quote! {
        #[::core::prelude::v1::test]
        #(#attrs)*
        #vis fn #name() #output {
            #body
            ::pgq_testkit::__private::run_test(__pgq_test_body)
        }
    }
}
