//! The `#[derive(Task)]` macro of pgq, used through `pgq_core::Task`, and the test attribute
//! of pgq-testkit, used as `#[pgq_testkit::test]`.

mod ast;
mod attr;
mod ctxt;
mod duration;
mod expand;
mod fallback;
mod limits;
mod test_attr;
mod unique_key;
mod valid;

use proc_macro::TokenStream;
use syn::{DeriveInput, ItemFn, parse_macro_input};

/// Implements `pgq_core::Task` for a struct and registers it, so that workers and registries
/// find the task without a registration call.
///
/// The struct has named fields (or none) and no generic parameters; it also derives `Serialize`
/// and `Deserialize`. `#[task(key = value, ...)]` sets the task's defaults; each key may be given
/// once, across any number of `#[task]` attributes:
///
/// | key | value | sets | default |
/// |---|---|---|---|
/// | `name` | string: 1–128 ASCII letters, digits, `_` `-` `.` `:` `/` | `Task::NAME` | the type's name |
/// | `queue` | string: 1–64 ASCII letters, digits, `_` `-` `.` `:` | `Task::QUEUE` | `"default"` |
/// | `priority` | integer, 0–1000, higher runs first | `Task::PRIORITY` | 100 |
/// | `max_attempts` | integer, 1–1000 | `Task::MAX_ATTEMPTS` | 20 |
/// | `timeout` | string: a number and `ms`, `s`, `m` or `h`, at most `"24h"` | `Task::TIMEOUT` | none |
/// | `lease` | string: like `timeout`, at least `"1s"` | `Task::LEASE` | the worker's lease |
/// | `unique_key` | string: text with `{field}` placeholders, `{{` and `}}` for braces | `Task::unique_key` | none |
/// | `cron` | string: a cron expression, seconds first (five fields: second 0), checked here | a declared schedule of the type's `Default` value | none |
/// | `time_zone` | string: an IANA time zone name, with `cron` | the schedule's time zone | `"UTC"` |
/// | `concurrency_key` | string: like `unique_key` | `Task::concurrency_key` | none |
/// | `concurrency` | integer, 1–1000, with `concurrency_key` (and only with it) | `Task::CONCURRENCY` | none |
///
/// A field named in `unique_key` or `concurrency_key` must implement `Display`; a type with `cron` must implement
/// `Default`.
///
/// ```ignore
/// use pgq_core::Task;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Task)]
/// #[task(queue = "email", priority = 150, max_attempts = 5)]
/// #[task(unique_key = "welcome:{user_id}", timeout = "30s")]
/// struct SendWelcome {
///     user_id: i64,
///     email: String,
/// }
///
/// assert_eq!(SendWelcome::NAME, "SendWelcome");
/// assert_eq!(SendWelcome::TIMEOUT, Some(std::time::Duration::from_secs(30)));
/// ```
///
/// (The example is compiled by pgq-core's tests, where `pgq_core` is in scope.)
#[proc_macro_derive(Task, attributes(task))]
pub fn derive_task(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}

/// An async test that receives a migrated database of its own, dropped afterwards: use it as
/// `#[pgq_testkit::test]`, where its documentation is.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ItemFn);
    test_attr::expand(args.into(), item).into()
}
