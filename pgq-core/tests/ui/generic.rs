use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct Send<T> {
    payload: T,
}

fn main() {}
