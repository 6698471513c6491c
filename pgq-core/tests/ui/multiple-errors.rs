use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queu = "email", priority = 5000, max_attempts = "many")]
#[task(unique_key = "welcome:{usr_id}", timeout = "soon", priority = 1)]
struct SendWelcome {
    user_id: i64,
}

fn main() {
    // The stub impl keeps uses of the type free of secondary errors.
    assert_eq!(SendWelcome::NAME, "SendWelcome");
    let _ = SendWelcome::QUEUE;
}
