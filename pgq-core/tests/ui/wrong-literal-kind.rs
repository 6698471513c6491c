use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(priority = "high", queue = 5, max_attempts = 2.5, timeout = 30)]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
