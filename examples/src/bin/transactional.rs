//! Enqueue inside your transaction: the order row and its receipt job commit together, or
//! neither exists.
//!
//! `cargo run -p pgq-examples --bin transactional`

use pgq_core::{Client, Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "receipts")]
struct SendReceipt {
    order_id: i64,
}

#[async_trait]
impl Handler for SendReceipt {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        println!("sending the receipt for order {}", self.order_id);
        Ok(())
    }
}

/// Creates an order and its receipt job in one transaction; rolls back when `commit` is false.
async fn place_order(client: &Client, order_id: i64, commit: bool) -> Result<(), pgq_core::Error> {
    let mut tx = client.pool().begin().await?;
    sqlx::query("INSERT INTO orders (id) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    client.enqueue_in(&mut tx, SendReceipt { order_id }).await?;
    if commit {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY)")
        .execute(client.pool())
        .await?;

    let committed = 1_000 + i64::from(std::process::id());
    let rolled_back = committed + 1;
    place_order(&client, committed, true).await?;
    place_order(&client, rolled_back, false).await?;

    let drained = Worker::builder(client.clone())
        .queue("receipts", 4)
        .build()?
        .drain()
        .await?;
    let ran: Vec<String> = drained.iter().map(|job| job.task.clone()).collect();
    let orders: Vec<i64> = sqlx::query_scalar("SELECT id FROM orders WHERE id IN ($1, $2)")
        .bind(committed)
        .bind(rolled_back)
        .fetch_all(client.pool())
        .await?;
    println!(
        "orders in the table: {orders:?}; receipt jobs run: {}",
        ran.len()
    );
    assert_eq!(orders, vec![committed], "the rolled-back order is gone");
    Ok(())
}
