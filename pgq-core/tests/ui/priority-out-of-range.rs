use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(priority = 1001)]
struct TooHigh {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(priority = -1)]
struct Negative {
    user_id: i64,
}

fn main() {}
