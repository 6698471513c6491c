//! The inline testing mode: a client whose enqueues run their jobs at once, in the caller's
//! task, through a runner that pgq-testkit provides (`pgq_testkit::Inline`). A client without a
//! runner, the default, leaves jobs for workers (or a test's drain): the manual mode.

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::error::Result;

/// Runs a queue's due jobs to their end; what an inline client calls after each enqueue that
/// commits on its own. Implemented by pgq-testkit for `pgq_core::Client`; doc-hidden. (The
/// client is a parameter so that the client's module depends on this one, not both ways.)
pub trait InlineRunner<Client>: Send + Sync + fmt::Debug {
    /// Runs the due jobs of `queue` in `client`'s database, through their handlers.
    fn run<'a>(&'a self, client: &'a Client, queue: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// A client's testing mode: `None` is manual.
#[derive(Debug)]
pub(crate) struct InlineMode<Client>(Option<Arc<dyn InlineRunner<Client>>>);

// Derived, these would ask `Client: Clone + Default`, which the runner does not need.
impl<Client> Clone for InlineMode<Client> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<Client> Default for InlineMode<Client> {
    fn default() -> Self {
        Self(None)
    }
}

impl<Client> InlineMode<Client> {
    pub(crate) fn new(runner: Option<Arc<dyn InlineRunner<Client>>>) -> Self {
        Self(runner)
    }

    pub(crate) fn is_inline(&self) -> bool {
        self.0.is_some()
    }

    /// Runs `queue`'s due jobs when the mode is inline; nothing otherwise.
    pub(crate) async fn after_enqueue(&self, client: &Client, queue: &str) -> Result<()> {
        match &self.0 {
            Some(runner) => runner.run(client, queue).await,
            None => Ok(()),
        }
    }
}
