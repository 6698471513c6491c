use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:{user_id")]
struct Unclosed {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:user_id}")]
struct Stray {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:{}")]
struct EmptyPlaceholder {
    user_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:{user_id:>8}")]
struct FormatSpec {
    user_id: i64,
}

fn main() {}
