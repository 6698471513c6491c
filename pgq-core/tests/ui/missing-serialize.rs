use pgq_core::Task;
#[allow(unused_imports)]
use serde::{Deserialize, Serialize};

#[derive(Task)]
#[task(queue = "email")]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
