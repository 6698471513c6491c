use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "digest:{user_ids}")]
struct SendDigest {
    user_ids: Vec<i64>,
}

fn main() {}
