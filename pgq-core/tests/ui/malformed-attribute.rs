use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task]
struct Bare {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task = "email"]
struct NameValue {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(timeout("30s"))]
struct Parenthesized {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email",, "priority" = 1)]
struct NotAKey {
    user_id: i64,
}

fn main() {}
