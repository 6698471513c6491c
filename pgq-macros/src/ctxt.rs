//! Collects every error of one derive so that all of them are reported in one compile.

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use proc_macro2::Span;
use quote::ToTokens;

/// The errors found so far while deriving `Task` for one type.
///
/// Every pass reports into the same context and keeps going; [`Ctxt::check`] then combines the
/// errors into one [`syn::Error`]. Dropping a context without checking it panics, so that no
/// error can be lost.
pub(crate) struct Ctxt {
    /// `None` once [`Ctxt::check`] has taken the errors.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Self {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Reports an error spanned on the tokens of `obj`.
    pub(crate) fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        self.push(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    /// Reports an error at `span`.
    pub(crate) fn error_at<T: Display>(&self, span: Span, msg: T) {
        self.push(syn::Error::new(span, msg));
    }

    fn push(&self, error: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("errors reported after check")
            .push(error);
    }

    /// Consumes the context: `Ok` when nothing was reported, else every error combined.
    pub(crate) fn check(self) -> syn::Result<()> {
        let errors = self.errors.borrow_mut().take().expect("checked twice");
        let mut errors = errors.into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for error in errors {
            combined.combine(error);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("a Ctxt was dropped without check()");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn no_errors_is_ok() {
        assert!(Ctxt::new().check().is_ok());
    }

    #[test]
    fn every_error_is_kept_in_order() {
        let cx = Ctxt::new();
        cx.error_spanned_by(quote!(a), "first");
        cx.error_spanned_by(quote!(b), "second");
        let messages: Vec<String> = cx
            .check()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(messages, ["first", "second"]);
    }

    #[test]
    #[should_panic(expected = "without check")]
    fn dropping_unchecked_panics() {
        drop(Ctxt::new());
    }
}
