use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(concurrency_key = "tenant:{custmer_id}", concurrency = 0)]
struct Export {
    customer_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(concurrency_key = "{customer_id", concurrency = 1001)]
struct Import {
    customer_id: i64,
}

fn main() {}
