use pgq_core::Task;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
struct Facture {
    numéro: i64,
}

#[derive(Serialize, Deserialize, Task)]
struct Café {
    table: i64,
}

fn main() {}
