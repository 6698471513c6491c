//! Queue names: what pgq accepts, checked before anything reaches the database; and whether a
//! worker's queues match the queues its tasks declare.

use std::collections::BTreeSet;
use std::fmt;

use crate::error::{Error, Result};
use crate::limits;

/// Checks that `queue` is 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:`.
///
/// The same rule is a CHECK constraint on the jobs table, and `#[task(queue = ..)]` applies it
/// at compile time.
pub(crate) fn validate(queue: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::invalid_queue(queue, "must not be empty"));
    }
    if queue.chars().count() > limits::MAX_QUEUE_LEN {
        return Err(Error::invalid_queue(queue, "longer than 64 characters"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if !queue.chars().all(allowed) {
        return Err(Error::invalid_queue(
            queue,
            "only ASCII letters, digits, '_', '-', '.' and ':' are allowed",
        ));
    }
    Ok(())
}

/// Where a worker's queues and its linked tasks' `#[task(queue = ..)]` disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueueMismatch<'a> {
    /// A task the worker has a handler for declares a queue the worker does not serve.
    Unserved { task: &'a str, queue: &'a str },
    /// The worker serves a queue that no task it has a handler for declares.
    Undeclared { queue: &'a str },
}

impl fmt::Display for QueueMismatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueMismatch::Unserved { task, queue } => write!(
                f,
                "task {task:?} declares queue {queue:?}, which this worker does not serve"
            ),
            QueueMismatch::Undeclared { queue } => write!(
                f,
                "queue {queue:?} is served, but no task with a handler declares it"
            ),
        }
    }
}

/// Compares `declared` (each task with a handler, and the queue it declares) with the queues a
/// worker serves: first the unserved tasks by name, then the undeclared queues by name.
///
/// Neither is always a mistake: another worker may serve a task's queue, and jobs can go to any
/// queue through `EnqueueOptions::queue`. A typo in either name shows up as both.
pub(crate) fn mismatches<'a>(
    declared: impl IntoIterator<Item = (&'a str, &'a str)>,
    served: impl IntoIterator<Item = &'a str>,
) -> Vec<QueueMismatch<'a>> {
    let declared: BTreeSet<(&str, &str)> = declared.into_iter().collect();
    let served: BTreeSet<&str> = served.into_iter().collect();
    let unserved = declared
        .iter()
        .filter(|(_, queue)| !served.contains(queue))
        .map(|&(task, queue)| QueueMismatch::Unserved { task, queue });
    let undeclared = served
        .iter()
        .filter(|&&queue| !declared.iter().any(|&(_, declared)| declared == queue))
        .map(|&queue| QueueMismatch::Undeclared { queue });
    unserved.chain(undeclared).collect()
}

#[cfg(test)]
mod tests {
    use super::{QueueMismatch, mismatches, validate};

    #[test]
    fn matching_queues_have_no_mismatch() {
        let declared = [
            ("SendWelcome", "email"),
            ("Reset", "email"),
            ("Report", "reports"),
        ];
        assert_eq!(mismatches(declared, ["reports", "email"]), vec![]);
    }

    #[test]
    fn a_typo_is_an_unserved_task_and_an_undeclared_queue() {
        let declared = [("SendWelcome", "email"), ("Report", "reports")];
        assert_eq!(
            mismatches(declared, ["emial", "reports"]),
            vec![
                QueueMismatch::Unserved {
                    task: "SendWelcome",
                    queue: "email"
                },
                QueueMismatch::Undeclared { queue: "emial" },
            ]
        );
        assert_eq!(
            mismatches(declared, ["emial", "reports"])
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                r#"task "SendWelcome" declares queue "email", which this worker does not serve"#,
                r#"queue "emial" is served, but no task with a handler declares it"#,
            ]
        );
    }

    #[test]
    fn a_worker_serving_part_of_the_tasks_leaves_the_rest_unserved() {
        let declared = [
            ("Report", "reports"),
            ("SendWelcome", "email"),
            ("Bill", "billing"),
        ];
        assert_eq!(
            mismatches(declared, ["email"]),
            vec![
                QueueMismatch::Unserved {
                    task: "Bill",
                    queue: "billing"
                },
                QueueMismatch::Unserved {
                    task: "Report",
                    queue: "reports"
                },
            ]
        );
    }

    #[test]
    fn accepts_plain_names() {
        for name in [
            "default",
            "email",
            "reports.monthly",
            "a:b-c_d",
            &"q".repeat(64),
        ] {
            assert!(validate(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn refuses_hostile_names() {
        let long = "q".repeat(200);
        for name in [
            "",
            "it's",
            "a;drop table x",
            "e\u{1F600}",
            "tab\t",
            " ",
            &long,
        ] {
            assert!(validate(name).is_err(), "{name:?}");
        }
    }
}
