use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct SendWelcome(i64, String);

fn main() {}
