use pgq_core::Task;
use serde::{Deserialize, Serialize};

/// Every five minutes in UTC; five fields mean second 0.
#[derive(Serialize, Deserialize, Default, Task)]
#[task(cron = "*/5 * * * *")]
struct Sweep;

/// At nine on weekdays in Paris, with seconds.
#[derive(Serialize, Deserialize, Default, Task)]
#[task(queue = "reports", cron = "0 0 9 * * MON-FRI", time_zone = "Europe/Paris")]
struct MorningReport {
    pages: u32,
}

fn main() {
    assert_eq!(Sweep::NAME, "Sweep");
    assert_eq!(MorningReport::QUEUE, "reports");
    let _ = MorningReport::default().pages;
}
