use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email")]
#[task(priority = 150, queue = "billing")]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
