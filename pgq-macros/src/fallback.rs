//! What `#[derive(Task)]` emits when the input has errors: the errors, and a stub impl so that
//! code using the type as a `Task` does not add errors of its own.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt as _;
use syn::{Data, DeriveInput};

use crate::ast::call_site_ident;

pub(crate) fn expand(input: &DeriveInput, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    // A stub for a generic type or a union would only add errors of its own.
    if !input.generics.params.is_empty() || matches!(input.data, Data::Union(_)) {
        return errors;
    }
    let ty = call_site_ident(&input.ident);
    let name = input.ident.unraw().to_string();
    quote! {
        #errors
        const _: () = {
            #[automatically_derived]
            impl ::pgq_core::Task for #ty {
                const NAME: &'static str = #name;
            }
        };
    }
}
