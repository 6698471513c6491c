//! Unique keys: at most one active job per key, on every enqueue path.
//!
//! `cargo run -p pgq-examples --bin unique_keys`

use std::time::Duration;

use pgq_core::{EnqueueOptions, Enqueued, Task};
use serde::{Deserialize, Serialize};

/// One sync per account at a time, however often a webhook asks for it.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "sync", unique_key = "account:{account_id}")]
struct SyncAccount {
    account_id: i64,
    reason: String,
}

fn sync(account_id: i64, reason: &str) -> SyncAccount {
    SyncAccount {
        account_id,
        reason: reason.into(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    let account = i64::from(std::process::id());

    let first = client.enqueue(sync(account, "webhook")).await?;
    let second = client.enqueue(sync(account, "webhook again")).await?;
    println!("first enqueue:  {first:?}");
    println!("second enqueue: {second:?} (the same job)");
    assert_eq!(second, Enqueued::Duplicate(first.id()));

    // Replace a still-pending duplicate: new payload, priority and run_at.
    let replaced = client
        .enqueue_with(
            sync(account, "manual, urgent"),
            EnqueueOptions::default()
                .replace()
                .priority(150)
                .delay(Duration::from_secs(5)),
        )
        .await?;
    let job = client.job(replaced.id()).await?.expect("exists");
    println!(
        "replaced: {replaced:?}, reason now {}",
        job.payload["reason"]
    );
    assert!(matches!(replaced, Enqueued::Replaced(_)));

    // In bulk too, including duplicates inside one batch.
    let outcomes = client
        .enqueue_many([
            sync(account, "bulk"),
            sync(account + 1, "bulk"),
            sync(account + 1, "bulk"),
        ])
        .await?;
    for outcome in &outcomes {
        println!("bulk: {outcome:?}");
    }
    assert_eq!(outcomes[0], Enqueued::Duplicate(first.id()));
    assert_eq!(outcomes[2], Enqueued::Duplicate(outcomes[1].id()));

    for id in [first.id(), outcomes[1].id()] {
        client.cancel(id).await?; // the key is free again once the job is finished
    }
    let again = client.enqueue(sync(account, "after cancelling")).await?;
    println!("after the first job finished: {again:?}");
    assert!(matches!(again, Enqueued::Inserted(id) if id != first.id()));
    client.cancel(again.id()).await?;
    Ok(())
}
