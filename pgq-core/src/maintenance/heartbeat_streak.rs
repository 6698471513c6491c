//! Whether this worker may judge others dead. A registration that expired says its worker's
//! heartbeats stopped landing; after an outage of the database (a restart, a failover, a cut
//! connection) every registration has expired, the live workers' too, until their next
//! heartbeats land. A worker whose own heartbeat failed judges again only once its heartbeats
//! have landed, without a miss, for as long as a registration lives: by then every live worker
//! has landed one too.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct HeartbeatStreak {
    state: Mutex<Streak>,
}

#[derive(Debug, Default, Clone, Copy)]
enum Streak {
    /// No heartbeat of this worker has failed.
    #[default]
    Unbroken,
    /// One failed; none has landed since.
    Broken,
    /// One failed; all have landed since this instant.
    Since(Instant),
}

impl HeartbeatStreak {
    pub(crate) fn landed(&self) {
        if let Ok(mut state) = self.state.lock()
            && matches!(*state, Streak::Broken)
        {
            *state = Streak::Since(Instant::now());
        }
    }

    pub(crate) fn missed(&self) {
        if let Ok(mut state) = self.state.lock() {
            *state = Streak::Broken;
        }
    }

    /// Whether an expired registration means a dead worker, for a worker whose registrations
    /// live `alive_for`.
    pub(crate) fn may_judge(&self, alive_for: Duration) -> bool {
        match self.state.lock().map(|state| *state) {
            Ok(Streak::Unbroken) => true,
            Ok(Streak::Since(since)) => since.elapsed() >= alive_for,
            Ok(Streak::Broken) | Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::HeartbeatStreak;

    #[test]
    fn a_worker_judges_until_a_miss_and_again_after_a_full_window_of_heartbeats() {
        let streak = HeartbeatStreak::default();
        assert!(streak.may_judge(Duration::from_secs(20)));
        streak.landed();
        assert!(streak.may_judge(Duration::from_secs(20)));
        streak.missed();
        assert!(!streak.may_judge(Duration::ZERO));
        streak.landed();
        assert!(!streak.may_judge(Duration::from_secs(20)));
        assert!(streak.may_judge(Duration::ZERO));
        // Landing again does not restart the window; missing does.
        streak.landed();
        assert!(streak.may_judge(Duration::ZERO));
        streak.missed();
        assert!(!streak.may_judge(Duration::ZERO));
    }
}
