//! The client's enqueue calls: one task or many, on their own or inside the caller's
//! transaction, with the task's settings or per-call overrides.

use sqlx::PgConnection;
use tracing::Instrument;

use crate::client::Client;
use crate::enqueue::{self, EnqueueOptions};
use crate::enqueued::Enqueued;
use crate::error::Result;
use crate::store;
use crate::store::{on, run};
use crate::task::Task;
use crate::wakeup::Wakeup;

impl Client {
    /// Enqueues a task with its `#[task(...)]` settings.
    ///
    /// When the task has a unique key held by an active job, nothing is inserted and the
    /// result is [`Enqueued::Duplicate`] with that job's id.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let enqueued = client.enqueue(SendWelcome { user_id: 7 }).await?;
    /// println!("job {} (duplicate: {})", enqueued.id(), enqueued.is_duplicate());
    /// # Ok(()) }
    /// ```
    pub async fn enqueue<T: Task>(&self, task: T) -> Result<Enqueued> {
        self.enqueue_with(task, EnqueueOptions::default()).await
    }

    /// Enqueues a task with per-job overrides.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReminder { user_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let options = EnqueueOptions::default().delay(Duration::from_secs(3600)).priority(30);
    /// client.enqueue_with(SendReminder { user_id: 7 }, options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_with<T: Task>(
        &self,
        task: T,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        let template = enqueue::template::<T>(&options)?;
        let task = enqueue::prepare(&task, self.max_payload_bytes)?;
        let replaces = options.replace && task.unique_key.is_some();
        // A job due later wakes nobody; whether it is due is the database's to say, so a run
        // time near the client's now still joins the windows (its statement notifies only if due).
        let due_later = match template.run_at {
            Some(run_at) => run_at > chrono::Utc::now() + chrono::TimeDelta::seconds(1),
            None => template.delay_ms > 0,
        };
        let wakeup = if replaces || due_later {
            Wakeup::Alone
        } else {
            self.wakeups.enqueue(&self.store, template.queue)
        };
        let inserted = async {
            let mut conn = self.kept.acquire(&self.store).await?;
            let mut tries = 0;
            let inserted = loop {
                tries += 1;
                let inserted = on!(self.store, &mut conn, |c| store::enqueue::insert_one(
                    &self.store,
                    c,
                    &template,
                    &task,
                    options.replace,
                    wakeup.notifies(),
                ));
                match inserted {
                    // A deadlock or serialization failure (a replace meeting another, at the
                    // serializable level): the statement rolled back; it runs again.
                    Err(err) if err.is_conflict() && tries < store::CONFLICT_RETRIES => {
                        store::conflict_pause(tries).await;
                    }
                    inserted => break inserted,
                }
            };
            match inserted {
                Ok(inserted) => {
                    conn.keep(self.store.pool());
                    wakeup.returned(inserted.notified);
                    Ok(inserted.enqueued)
                }
                Err(err) => {
                    conn.discard_if_spoiled(&err);
                    Err(err)
                }
            }
        };
        let enqueued = inserted.instrument(template.span(1)).await?;
        template.count(&[enqueued]);
        self.inline.after_enqueue(self, template.queue).await?;
        Ok(enqueued)
    }

    /// Enqueues a task inside the caller's transaction: the job exists if and only if the
    /// transaction commits, and workers are woken at the commit.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReceipt { order_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    /// client.enqueue_in(&mut tx, SendReceipt { order_id: 42 }).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_in<T: Task>(&self, conn: &mut PgConnection, task: T) -> Result<Enqueued> {
        self.enqueue_in_with(conn, task, EnqueueOptions::default())
            .await
    }

    /// [`enqueue_in`](Self::enqueue_in) with per-job overrides.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct AskForReview { order_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("UPDATE orders SET delivered = true WHERE id = 42").execute(&mut *tx).await?;
    /// let in_a_week = EnqueueOptions::default().delay(Duration::from_secs(7 * 24 * 3600));
    /// client.enqueue_in_with(&mut tx, AskForReview { order_id: 42 }, in_a_week).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_in_with<T: Task>(
        &self,
        conn: &mut PgConnection,
        task: T,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        let template = enqueue::template::<T>(&options)?;
        let task = enqueue::prepare(&task, self.max_payload_bytes)?;
        let enqueued =
            store::enqueue::insert_one(&self.store, conn, &template, &task, options.replace, true)
                .instrument(template.span(1))
                .await?
                .enqueued;
        template.count(&[enqueued]);
        Ok(enqueued)
    }

    /// Enqueues many tasks of one type in one statement, honouring unique keys (also between
    /// tasks of the same batch). Returns one outcome per task, in order.
    ///
    /// The batch is checked before anything is written: one task over the payload limit
    /// refuses the whole batch. Idle workers of the queue are woken once, by the same statement.
    /// A task whose key's holder finishes while the batch runs goes in a second statement of its
    /// own (each commits as it runs, so that batches with keys in common never deadlock); for
    /// all or nothing, enqueue inside your transaction with
    /// [`enqueue_many_in`](Self::enqueue_many_in).
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Reindex { document_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let outcomes = client.enqueue_many((1..=10_000).map(|document_id| Reindex { document_id })).await?;
    /// assert_eq!(outcomes.len(), 10_000);
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many<T: Task>(
        &self,
        tasks: impl IntoIterator<Item = T>,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_many_with(tasks, EnqueueOptions::default())
            .await
    }

    /// [`enqueue_many`](Self::enqueue_many) with overrides that apply to every task of the
    /// batch: queue, priority, `max_attempts`, and `run_at` or `delay`.
    ///
    /// [`EnqueueOptions::replace`] is refused with
    /// [`Error::InvalidOption`](crate::Error::InvalidOption): a batch does not update pending
    /// jobs in place; enqueue such tasks one at a time with [`enqueue_with`](Self::enqueue_with).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Reindex { document_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // A backfill: low priority, on the queue the backfill workers serve, starting tonight.
    /// let backfill = EnqueueOptions::default()
    ///     .queue("backfill")
    ///     .priority(30)
    ///     .delay(Duration::from_secs(6 * 3600));
    /// let tasks = (1..=100_000).map(|document_id| Reindex { document_id });
    /// client.enqueue_many_with(tasks, backfill).await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many_with<T: Task>(
        &self,
        tasks: impl IntoIterator<Item = T>,
        options: EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        let template = enqueue::batch_template::<T>(&options)?;
        let batch = enqueue::prepare_many(tasks, self.max_payload_bytes)?;
        if batch.payloads.is_empty() {
            return Ok(Vec::new());
        }
        let enqueued = async {
            run!(self.store, |conn| store::enqueue::insert_many(
                &self.store,
                conn,
                &template,
                &batch
            ))
        }
        .instrument(template.span(batch.payloads.len()))
        .await?;
        template.count(&enqueued);
        self.inline.after_enqueue(self, template.queue).await?;
        Ok(enqueued)
    }

    /// [`enqueue_many`](Self::enqueue_many) inside the caller's transaction: the jobs exist if
    /// and only if the transaction commits, and workers are woken at the commit (PostgreSQL
    /// delivers the batch's notification then, or never on a rollback).
    ///
    /// Unique keys see the transaction's own earlier enqueues, so a key enqueued before in the
    /// same transaction is a duplicate.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct ShipItem { order_id: i64, sku: String }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let skus = ["A-1", "B-7", "C-3"];
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("UPDATE orders SET status = 'paid' WHERE id = 42").execute(&mut *tx).await?;
    /// let tasks = skus.map(|sku| ShipItem { order_id: 42, sku: sku.into() });
    /// client.enqueue_many_in(&mut tx, tasks).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many_in<T: Task>(
        &self,
        conn: &mut PgConnection,
        tasks: impl IntoIterator<Item = T>,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_many_in_with(conn, tasks, EnqueueOptions::default())
            .await
    }

    /// [`enqueue_many_in`](Self::enqueue_many_in) with overrides for every task of the batch,
    /// as [`enqueue_many_with`](Self::enqueue_many_with) (`replace` is refused).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Remind { invoice_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("UPDATE invoices SET sent = true WHERE due < now()").execute(&mut *tx).await?;
    /// let in_a_week = EnqueueOptions::default().delay(Duration::from_secs(7 * 24 * 3600));
    /// let tasks = [17, 18, 19].map(|invoice_id| Remind { invoice_id });
    /// client.enqueue_many_in_with(&mut tx, tasks, in_a_week).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many_in_with<T: Task>(
        &self,
        conn: &mut PgConnection,
        tasks: impl IntoIterator<Item = T>,
        options: EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        let template = enqueue::batch_template::<T>(&options)?;
        let batch = enqueue::prepare_many(tasks, self.max_payload_bytes)?;
        if batch.payloads.is_empty() {
            return Ok(Vec::new());
        }
        let enqueued = store::enqueue::insert_many(&self.store, conn, &template, &batch)
            .instrument(template.span(batch.payloads.len()))
            .await?;
        template.count(&enqueued);
        Ok(enqueued)
    }
}
