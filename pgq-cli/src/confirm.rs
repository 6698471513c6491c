//! Asking before a bulk action: on a terminal a yes/no question, elsewhere a refusal unless
//! `--yes` says the script means it.

use std::io::{BufRead, IsTerminal, Write};

use crate::failure::Failure;

/// Up to this many jobs, an action runs without asking.
pub(crate) const ASK_ABOVE: usize = 10;

/// A usage error when `what` would need a question and there is no terminal to ask on: found
/// before anything else is done, the database reached or a preview shown.
pub(crate) fn can_ask(what: &str, jobs: usize, yes: bool) -> Result<(), Failure> {
    if jobs <= ASK_ABOVE || yes || std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "refusing to {what} without confirmation: no terminal to ask on; pass --yes to go ahead, or --dry-run to see them"
    )))
}

/// Whether to go ahead with `what` (e.g. "retry 25 jobs"): at once for a few jobs or with
/// `yes`; otherwise the answer to a question on the terminal, or a usage error without one.
pub(crate) fn go_ahead(what: &str, jobs: usize, yes: bool) -> Result<bool, Failure> {
    if jobs <= ASK_ABOVE || yes {
        return Ok(true);
    }
    can_ask(what, jobs, yes)?;
    let stdin = std::io::stdin();
    let mut err = std::io::stderr().lock();
    write!(err, "{what}? [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
