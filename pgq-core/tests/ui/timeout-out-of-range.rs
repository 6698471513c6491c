use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(timeout = "0s")]
struct Zero {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(timeout = "25h")]
struct OverADay {
    user_id: i64,
}

fn main() {}
