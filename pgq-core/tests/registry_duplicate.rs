//! Two task types with one name: a registry cannot be built, and the error names both types.

use pgq_core::{Error, Registry, Task};
use serde::{Deserialize, Serialize};

mod billing {
    #[derive(serde::Serialize, serde::Deserialize, pgq_core::Task)]
    #[task(name = "charge")]
    pub(crate) struct Charge;
}

#[derive(Serialize, Deserialize, Task)]
#[task(name = "charge")]
struct Charge2;

#[test]
fn two_types_with_one_task_name_are_a_clear_error() {
    let _ = (billing::Charge, Charge2);
    let err = Registry::linked().unwrap_err();
    assert!(
        matches!(&err, Error::DuplicateTaskName { name, .. } if name == "charge"),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("registry_duplicate::billing::Charge"),
        "{message}"
    );
    assert!(message.contains("registry_duplicate::Charge2"), "{message}");
}
