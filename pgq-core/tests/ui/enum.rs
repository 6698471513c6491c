use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email")]
enum Notify {
    Welcome { user_id: i64 },
    Goodbye { user_id: i64 },
}

fn main() {}
