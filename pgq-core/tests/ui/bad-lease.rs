use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(lease = "5 minutes")]
struct Words {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(lease = 300)]
struct NotAString {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(lease = "25h")]
struct OverADay {
    user_id: i64,
}

fn main() {}
