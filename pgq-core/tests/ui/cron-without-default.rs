use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(cron = "0 0 * * * *")]
struct Hourly {
    report: String,
}

fn main() {}
