use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(max_attempts = 0)]
struct NoAttempts {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(max_attempts = 100000)]
struct TooMany {
    user_id: i64,
}

fn main() {}
