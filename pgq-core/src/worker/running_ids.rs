//! The worker ids that run in this process. A worker starting under the id of one this process
//! still runs (started again before the other's shutdown ended, or a second worker built with
//! the same id) must leave that one's jobs alone: only a process before this one can have left
//! jobs under its id for it to take back.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

static RUNNING: LazyLock<Mutex<HashMap<String, usize>>> = LazyLock::new(Mutex::default);

fn running() -> MutexGuard<'static, HashMap<String, usize>> {
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running worker's hold on its id, let go when dropped.
#[derive(Debug)]
pub(crate) struct RunningId {
    id: String,
}

impl RunningId {
    /// Holds `id` for a worker of this process; `true` with it when another worker of this
    /// process already runs under the same id.
    pub(crate) fn hold(id: &str) -> (Self, bool) {
        let mut running = running();
        let holders = running.entry(id.to_owned()).or_default();
        *holders += 1;
        (Self { id: id.to_owned() }, *holders > 1)
    }
}

impl Drop for RunningId {
    fn drop(&mut self) {
        let mut running = running();
        if let Some(holders) = running.get_mut(&self.id) {
            *holders -= 1;
            if *holders == 0 {
                running.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunningId;

    #[test]
    fn a_second_holder_of_an_id_is_told_until_the_first_lets_go() {
        let (first, shared) = RunningId::hold("running-ids-test");
        assert!(!shared);
        let (second, shared) = RunningId::hold("running-ids-test");
        assert!(shared);
        drop(first);
        drop(second);
        let (_third, shared) = RunningId::hold("running-ids-test");
        assert!(!shared, "both let go");
    }
}
