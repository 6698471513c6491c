use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(timeout = "30")]
struct NoUnit {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(timeout = "1h30m")]
struct TwoUnits {
    user_id: i64,
}

fn main() {}
