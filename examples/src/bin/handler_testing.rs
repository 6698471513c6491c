//! A handler and its unit tests with `pgq-testkit`: no database needed for them. Run the tests
//! with `cargo test -p pgq-examples --bin handler_testing`; run the program to see the same
//! handler under a real worker.

use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

/// Charges an invoice; small amounts are waved through, large ones need a review job.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "billing", unique_key = "invoice:{invoice_id}")]
struct ChargeInvoice {
    invoice_id: i64,
    cents: i64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Task)]
#[task(queue = "billing")]
struct ReviewCharge {
    invoice_id: i64,
}

/// The application's settings, handed to handlers as worker state.
struct Billing {
    review_above_cents: i64,
}

#[async_trait]
impl Handler for ChargeInvoice {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let billing = ctx
            .state::<Billing>()
            .ok_or_else(|| TaskError::fail("no Billing state"))?;
        if self.cents <= 0 {
            return Err(TaskError::fail(format_args!(
                "invalid amount {}",
                self.cents
            )));
        }
        ctx.progress(50, "charging").await;
        if self.cents > billing.review_above_cents {
            ctx.enqueue(ReviewCharge {
                invoice_id: self.invoice_id,
            })
            .await?;
        }
        // The same key on every attempt: pass it to the payment provider to charge once.
        ctx.event(&format!("charged with key {}", ctx.idempotency_key()))
            .await;
        Ok(())
    }
}

#[async_trait]
impl Handler for ReviewCharge {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        println!("invoice {} queued for review", self.invoice_id);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    let invoice_id = i64::from(std::process::id());
    client
        .enqueue(ChargeInvoice {
            invoice_id,
            cents: 250_000,
        })
        .await?;
    let drained = Worker::builder(client)
        .queue("billing", 2)
        .state(Billing {
            review_above_cents: 100_000,
        })
        .build()?
        .drain()
        .await?;
    for job in drained {
        println!("{} {}: {:?}", job.task, job.id, job.outcome);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgq_core::TaskAction;
    use pgq_testkit::TestContext;

    fn billing() -> Billing {
        Billing {
            review_above_cents: 100_000,
        }
    }

    #[tokio::test]
    async fn a_large_charge_enqueues_a_review() {
        let ctx = TestContext::new().state(billing());
        ctx.run(ChargeInvoice {
            invoice_id: 7,
            cents: 250_000,
        })
        .await
        .unwrap();
        assert_eq!(
            ctx.enqueued::<ReviewCharge>(),
            vec![ReviewCharge { invoice_id: 7 }]
        );
        assert_eq!(ctx.progress(), vec![(50, "charging".to_string())]);
        assert_eq!(
            ctx.events(),
            vec!["charged with key ChargeInvoice:invoice:7".to_string()]
        );
    }

    #[tokio::test]
    async fn a_small_charge_needs_no_review() {
        let ctx = TestContext::new().state(billing());
        ctx.run(ChargeInvoice {
            invoice_id: 8,
            cents: 500,
        })
        .await
        .unwrap();
        assert!(ctx.enqueued::<ReviewCharge>().is_empty());
    }

    #[tokio::test]
    async fn a_payload_in_an_old_shape_fails_as_it_would_in_production() {
        let ctx = TestContext::new().state(billing());
        // A row written when amounts were strings.
        let err = ctx
            .perform::<ChargeInvoice>(r#"{"invoice_id": 7, "cents": "2500.00"}"#)
            .await
            .unwrap_err();
        assert!(err.message().contains("cents"), "{}", err.message());
    }

    /// With a database: the charge is enqueued where the worker looks for it, and draining it
    /// leaves one review waiting in the billing queue.
    #[tokio::test]
    async fn a_large_charge_leaves_one_review_waiting() {
        use pgq_testkit::{Expect, TestDatabase, assert_enqueued_with, drain_with};

        let db = TestDatabase::new().await;
        let client = db.client();
        client
            .enqueue(ChargeInvoice {
                invoice_id: 7,
                cents: 250_000,
            })
            .await
            .unwrap();
        let billing_queue = Expect::default().queue("billing").count(1);
        assert_enqueued_with::<ChargeInvoice>(db.pool(), billing_queue, |c| c.invoice_id == 7)
            .await;
        drain_with(Worker::builder(client).queue("billing", 1).state(billing())).await;
        // The review was drained too (same queue); what remains is its completed row.
        let done = Expect::default().status(pgq_core::JobStatus::Completed);
        assert_enqueued_with::<ReviewCharge>(db.pool(), done.count(1), |r| r.invoice_id == 7).await;
    }

    /// The inline mode: the enqueue runs the charge at once, and the review it enqueues with
    /// it; `#[pgq_testkit::test]` hands the test a migrated database of its own.
    #[pgq_testkit::test]
    async fn inline_a_large_charge_is_reviewed_at_the_enqueue(db: pgq_testkit::TestDatabase) {
        use pgq_testkit::{Expect, Inline, assert_enqueued_with};

        let client = Inline::new()
            .worker(|builder| builder.state(billing()))
            .client(&db.client());
        let charge = ChargeInvoice {
            invoice_id: 8,
            cents: 250_000,
        };
        let id = client.enqueue(charge).await.unwrap().id();
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.status, pgq_core::JobStatus::Completed);
        let done = Expect::default().status(pgq_core::JobStatus::Completed);
        assert_enqueued_with::<ReviewCharge>(db.pool(), done.count(1), |r| r.invoice_id == 8).await;
    }

    #[tokio::test]
    async fn an_invalid_amount_fails_without_retrying() {
        let ctx = TestContext::new().attempt(2).state(billing());
        let err = ctx
            .run(ChargeInvoice {
                invoice_id: 9,
                cents: -1,
            })
            .await
            .unwrap_err();
        assert_eq!(err.action(), TaskAction::Fail);
        assert_eq!(err.message(), "invalid amount -1");
    }
}
