use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "emails-for-new-users-who-signed-up-through-the-partner-programme-x")]
struct SendWelcome {
    user_id: i64,
}

fn main() {}
