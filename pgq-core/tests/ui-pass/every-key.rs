use pgq_core::Task;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email", priority = 150, max_attempts = 5)]
#[task(
    unique_key = "welcome:{user_id}:{{{email}}}",
    name = "billing.charge",
    timeout = "30s",
    lease = "2m"
)]
struct SendWelcome {
    user_id: i64,
    email: String,
}

fn main() {
    assert_eq!(SendWelcome::NAME, "billing.charge");
    assert_eq!(SendWelcome::QUEUE, "email");
    assert_eq!(SendWelcome::PRIORITY, 150_i16);
    assert_eq!(SendWelcome::MAX_ATTEMPTS, 5_i32);
    assert_eq!(SendWelcome::TIMEOUT, Some(Duration::from_secs(30)));
    assert_eq!(SendWelcome::LEASE, Some(Duration::from_secs(120)));
    let task = SendWelcome {
        user_id: 7,
        email: "a@example.com".into(),
    };
    assert_eq!(
        task.unique_key().as_deref(),
        Some("welcome:7:{a@example.com}")
    );

    let registry = pgq_core::Registry::linked().unwrap();
    let registration = registry.get("billing.charge").unwrap();
    assert_eq!(registration.queue(), "email");
    assert!(registration.type_name().ends_with("SendWelcome"));
}
