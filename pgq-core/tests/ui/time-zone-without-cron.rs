use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(time_zone = "Europe/Paris")]
struct Report;

fn main() {}
