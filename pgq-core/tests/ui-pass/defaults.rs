use pgq_core::Task;
use serde::{Deserialize, Serialize};

/// No `#[task]` at all: every constant is the trait's default.
#[derive(Serialize, Deserialize, Task)]
struct Ping;

/// Raw identifiers, a constant key, edge values, keys split over attributes.
#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "{type}-{{{in}}}")]
#[task(priority = 0, max_attempts = 1000, timeout = "500ms")]
#[task(queue = "a-b_c.d:e")]
struct r#Edge {
    r#type: String,
    r#in: u8,
}

#[derive(Serialize, Deserialize, Task)]
#[task(
    unique_key = "singleton",
    priority = 1000,
    max_attempts = 1,
    timeout = "24h"
)]
struct Nightly {}

fn main() {
    assert_eq!(Ping::NAME, "Ping");
    assert_eq!(Ping::QUEUE, pgq_core::defaults::QUEUE);
    assert_eq!(Ping::PRIORITY, pgq_core::defaults::PRIORITY);
    assert_eq!(Ping::MAX_ATTEMPTS, pgq_core::defaults::MAX_ATTEMPTS);
    assert_eq!(Ping::TIMEOUT, None);
    assert_eq!(Ping::LEASE, None);
    assert_eq!(Ping.unique_key(), None);

    assert_eq!(Edge::NAME, "Edge");
    assert_eq!(Edge::QUEUE, "a-b_c.d:e");
    assert_eq!((Edge::PRIORITY, Edge::MAX_ATTEMPTS), (0, 1000));
    assert_eq!(Edge::TIMEOUT, Some(std::time::Duration::from_millis(500)));
    let edge = Edge {
        r#type: "t".into(),
        r#in: 3,
    };
    assert_eq!(edge.unique_key().as_deref(), Some("t-{3}"));

    assert_eq!((Nightly::PRIORITY, Nightly::MAX_ATTEMPTS), (1000, 1));
    assert_eq!(
        Nightly::TIMEOUT,
        Some(std::time::Duration::from_secs(86_400))
    );
    assert_eq!(Nightly {}.unique_key().as_deref(), Some("singleton"));

    let registry = pgq_core::Registry::linked().unwrap();
    let names: Vec<&str> = registry.tasks().map(|task| task.name()).collect();
    assert_eq!(names, ["Edge", "Nightly", "Ping"]);
}
