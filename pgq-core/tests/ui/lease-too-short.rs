use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(lease = "500ms")]
struct HalfASecond {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(lease = "0s")]
struct Zero {
    user_id: i64,
}

// The shortest lease allowed.
#[derive(Serialize, Deserialize, Task)]
#[task(lease = "1000ms")]
struct OneSecond {
    user_id: i64,
}

fn main() {}
