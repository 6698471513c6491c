use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(name = "billing charge")]
struct Charge {
    invoice_id: i64,
}

#[derive(Serialize, Deserialize, Task)]
#[task(name = "")]
struct Refund {
    invoice_id: i64,
}

fn main() {}
