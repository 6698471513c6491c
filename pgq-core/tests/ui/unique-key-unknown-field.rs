use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:{usr_id}")]
struct SendWelcome {
    user_id: i64,
    email: String,
}

#[derive(Serialize, Deserialize, Task)]
#[task(unique_key = "ping:{id}")]
struct Ping;

fn main() {}
