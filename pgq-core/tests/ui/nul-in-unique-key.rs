use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome\0{user_id}")]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
