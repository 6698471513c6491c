use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Default, Task)]
#[task(cron = "61 * * * * *")]
struct EverySixtyFirstSecond;

fn main() {}
