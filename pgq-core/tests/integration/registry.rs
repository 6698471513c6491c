use pgq_core::{Handler, JobContext, Registry, Task, TaskError, async_trait};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "reports", name = "reports.monthly")]
struct MonthlyReport {
    month: u32,
}

#[derive(Serialize, Deserialize, Task)]
struct EnqueueOnly;

#[async_trait]
impl Handler for MonthlyReport {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[test]
fn the_registry_lists_every_linked_task() {
    let registry = Registry::linked().unwrap();
    let report = registry.get("reports.monthly").unwrap();
    assert_eq!(report.queue(), "reports");
    assert!(report.type_name().ends_with("registry::MonthlyReport"));
    assert!(report.has_handler());

    let enqueue_only = registry.get("EnqueueOnly").unwrap();
    assert_eq!(enqueue_only.queue(), "default");
    assert!(!enqueue_only.has_handler());

    let names: Vec<&str> = registry.tasks().map(|t| t.name()).collect();
    for name in ["SendReceipt", "SendWelcome", "Index", "Sync"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}
