use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
struct SendWelcome {
    #[task(unique_key = "welcome:{user_id}")]
    user_id: i64,
}

fn main() {}
