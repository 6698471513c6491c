use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue, priority = )]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
