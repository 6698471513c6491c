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
    /// The queue it declares when its jobs carry a concurrency key: that queue's claims bound
    /// each key.
    pub(crate) keyed_queue: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) struct Tasks {
    entries: HashMap<&'static str, TaskEntry>,
    /// Sorted, as every claim sends them.
    names: Vec<&'static str>,
    /// Each task's lease, in the order of `names`.
    leases_ms: Vec<i64>,
    /// The queues of the tasks with a concurrency key, sorted.
    keyed_queues: Vec<&'static str>,
}

impl Tasks {
    pub(crate) fn new(entries: HashMap<&'static str, TaskEntry>) -> Self {
        let mut names: Vec<_> = entries.keys().copied().collect();
        names.sort_unstable();
        let leases_ms = names.iter().map(|name| entries[name].lease_ms).collect();
        let mut keyed_queues: Vec<_> = entries.values().filter_map(|e| e.keyed_queue).collect();
        keyed_queues.sort_unstable();
        keyed_queues.dedup();
        Self {
            entries,
            names,
            leases_ms,
            keyed_queues,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<TaskEntry> {
        self.entries.get(name).copied()
    }

    pub(crate) fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Whether a task with a concurrency key runs on `queue` (keyed jobs go only to their
    /// task's queue): that queue's claims count the keys' held jobs, the others' do not.
    pub(crate) fn keyed_on(&self, queue: &str) -> bool {
        self.keyed_queues.binary_search(&queue).is_ok()
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
