use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "")]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
