use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(concurrency = 2)]
struct Export {
    customer_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(concurrency_key = "{customer_id}")]
struct Import {
    customer_id: i64,
}

fn main() {}
