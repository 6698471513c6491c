//! The tasks a worker runs: each one's handler and lease, and the lists its claims send.

use std::collections::HashMap;
use std::time::Duration;

use crate::handler::RunFn;

/// A task this worker can run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskEntry {
    pub(crate) run: RunFn,
    pub(crate) lease_ms: i64,
    /// How long one attempt may run (`#[task(timeout)]`).
    pub(crate) timeout: Option<Duration>,
}

#[derive(Debug)]
pub(crate) struct Tasks {
    entries: HashMap<&'static str, TaskEntry>,
    /// Sorted, as every claim sends them.
    names: Vec<&'static str>,
    /// Each task's lease, in the order of `names`.
    leases_ms: Vec<i64>,
}

impl Tasks {
    pub(crate) fn new(entries: HashMap<&'static str, TaskEntry>) -> Self {
        let mut names: Vec<_> = entries.keys().copied().collect();
        names.sort_unstable();
        let leases_ms = names.iter().map(|name| entries[name].lease_ms).collect();
        Self {
            entries,
            names,
            leases_ms,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<TaskEntry> {
        self.entries.get(name).copied()
    }

    pub(crate) fn names(&self) -> &[&'static str] {
        &self.names
    }

    pub(crate) fn leases_ms(&self) -> &[i64] {
        &self.leases_ms
    }

    /// The lease of `name`, or the shortest of all for a name this worker does not run.
    pub(crate) fn lease_ms(&self, name: &str) -> i64 {
        self.get(name)
            .map_or_else(|| self.shortest_lease_ms(), |entry| entry.lease_ms)
    }

    pub(crate) fn shortest_lease_ms(&self) -> i64 {
        self.leases_ms.iter().copied().min().unwrap_or(i64::MAX)
    }
}
